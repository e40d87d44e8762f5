defmodule Nx.Vulkan.Device do
  @moduledoc """
  The VM's Vulkan devices: `info/0` is the default device (`NXV_DEVICE`), `info/1` any of
  `Nx.Vulkan.devices/0` (opening it). Every device of a VM is of one model, so the class below,
  derived from the default device, sets the policy for all of them.

  `class/0` derives a class from measured properties (never from the name), used to pick kernel
  variants and queue policy:

    * `:software` - a CPU implementation (lavapipe, SwiftShader)
    * `:discrete_large` - a discrete GPU with at least 32 GiB of device-local memory and subgroups
      of 32 or more (data-centre cards such as the H100/H200, MI300)
    * `:discrete` - any other discrete GPU
    * `:integrated` - a GPU sharing memory with the host
    * `:other` - virtual GPUs and anything else

  `NXV_DEVICE_CLASS` overrides the derived class (one of the atoms above, without the colon).
  """
  alias Nx.Vulkan.Native

  @classes [:software, :discrete_large, :discrete, :integrated, :other]

  @doc """
  Device facts: name, type, vendor and device ids, driver, API version, subgroup size, compute
  limits, memory heaps and optional features (float64, int64, float16, int8, int16, 8/16-bit
  storage), and `direct_read_bytes`: the largest read that copies a tensor's bytes straight from
  its memory after the fence (`:infinity` on a CPU device, whose memory the host caches; 256 on a
  GPU with host-visible device memory, where small results are allocated; 0 where every read
  goes through a staging copy, one more command and submission). Raises `Nx.Vulkan.Error` when
  no Vulkan loader or device is present.
  """
  @spec info() :: map
  def info do
    case :persistent_term.get({__MODULE__, :info}, nil) do
      nil ->
        info = Native.device_info(nil) |> Native.unwrap!()
        :persistent_term.put({__MODULE__, :info}, info)
        info

      info ->
        info
    end
  end

  @doc """
  The facts of device `index` (see `Nx.Vulkan.devices/0`), opening it on first use: its own
  context, pending queue, GPU thread, buffer pool and pipelines. Raises `ArgumentError` for an
  index this VM cannot use.
  """
  @spec info(non_neg_integer) :: map
  def info(index) when is_integer(index) and index >= 0 do
    case :persistent_term.get({__MODULE__, :info, index}, nil) do
      nil ->
        info = Native.device_info(index) |> Native.unwrap!()
        :persistent_term.put({__MODULE__, :info, index}, info)
        info

      info ->
        info
    end
  end

  @doc """
  What the application decided for lavapipe's worker threads (`LP_NUM_THREADS`) before it
  opened the instance: `{:set, "0"}` on hosts with at most two logical CPUs (each dispatch then
  runs on lavapipe's queue thread, without the hand-off to a worker pool that costs a tiny
  kernel ~40 µs there), `{:user, value}` when the environment set it, `:driver_default`
  otherwise. Only CPU devices (lavapipe) read it.
  """
  @spec lavapipe_threads() :: {:set, String.t()} | {:user, String.t()} | :driver_default
  def lavapipe_threads, do: :persistent_term.get({Nx.Vulkan.Application, :lavapipe_threads})

  @doc "The default device's index (`NXV_DEVICE`; 0 with `NXV_LOGICAL_DEVICES`)."
  @spec default_index() :: non_neg_integer
  def default_index, do: info().index

  @doc "The device class (see the moduledoc)."
  @spec class() :: atom
  def class do
    case System.get_env("NXV_DEVICE_CLASS") do
      value when value in [nil, ""] -> derive_class(info())
      value -> parse_class!(value)
    end
  end

  @doc """
  Applies the policy that follows from the class: f32/f16 math and sums in f64 (`precise_f32`)
  where f64 is fast (`:software`, `:discrete_large`) and supported, unless `NXV_PRECISE` (`0`/`1`)
  says otherwise; f32/f16 dot products (and conv) accumulated in f64 (`precise_dot`) only on
  `:software` unless `NXV_PRECISE_DOT`, or else an explicit `NXV_PRECISE`, says otherwise (GPUs
  accumulate in f32, as cuBLAS does: the f64 accumulator costs GEMM 4-5x there); fence waits poll for 200 us before blocking on GPUs, not on CPU devices (where
  polling takes a core from the driver's worker threads); `:software` devices take the kernel
  variants without workgroup barriers (a row-per-invocation GEMM and serial reductions), which
  measure about 10x faster on lavapipe, and run their element-wise kernels one element per
  invocation in workgroups of 64 (GPUs: 4 elements per invocation, workgroups of 256;
  `NXV_ELEMENTS_PER_INVOCATION`, `NXV_WORKGROUP_SIZE`). On GPUs a command buffer whose commands
  write 4 MiB or more, or that holds 16 commands, is submitted as soon as the GPU has room for
  it, so the GPU works while the BEAM queues the next, and one of 2 commands at once while
  nothing is on the GPU (`NXV_SUBMIT_BYTES`, `NXV_SUBMIT_COMMANDS`, `NXV_SUBMIT_IDLE`; 0 on CPU
  devices: never). Submissions
  triggered by the cap or the work never wait for the GPU: up to two are in flight. Called at
  application start.
  """
  def configure! do
    info = info()
    class = class()

    precise = flag!("NXV_PRECISE", info.float64 and class in [:software, :discrete_large])
    # Dot products accumulate in f64 only on CPU devices unless asked: on GPUs the f64
    # accumulator cannot take the register-blocked GEMM (H200, cd2e7c6: 1024^3 in 531 us against
    # 145 us with f32 accumulation, the precision cuBLAS and PyTorch use).
    dot_default =
      if System.get_env("NXV_PRECISE") in [nil, ""],
        do: info.float64 and class == :software,
        else: precise

    precise_dot = flag!("NXV_PRECISE_DOT", dot_default)

    # A CPU device (lavapipe, or any CPU whatever class it is forced to) shares the host's cores
    # with the BEAM: the polling and early-submission policies below are for GPUs only.
    cpu? = class == :software or info.type == :cpu

    # How long threads waiting on the GPU poll before they block (queue.rs, SPIN_US): a blocked
    # thread wakes late on GPU hosts; on a CPU device (whatever class it is forced to) polling
    # steals a core from the threads doing the work.
    spin_default = if cpu?, do: 0, else: 1000
    spin_us = integer_env!("NXV_SPIN_US", spin_default, 0, "a number of microseconds")
    # Work-based submission (queue.rs, SUBMIT_BYTES): on GPUs, where a kernel over large
    # tensors would otherwise wait idle for the flush; never on CPU devices, whose driver threads
    # share the host's cores with the BEAM.
    submit_default = if cpu?, do: 0, else: 4 * 1024 * 1024
    submit_bytes = integer_env!("NXV_SUBMIT_BYTES", submit_default, 0, "a number of bytes (0: off)")
    # Count-based submission (queue.rs, SUBMIT_COMMANDS): on GPUs a batch of 16 small commands
    # goes to the GPU while the BEAM queues the next (the seed's MNIST step on the H200: 0.66 ms
    # with all 48 commands waiting for the loss read, 0.29-0.32 submitted as they come); never
    # on CPU devices, where the driver's threads and the BEAM share the cores.
    commands_default = if cpu?, do: 0, else: 16

    submit_commands =
      integer_env!("NXV_SUBMIT_COMMANDS", commands_default, 0, "a number of commands (0: off)")

    # Idle submission (queue.rs, SUBMIT_IDLE): on GPUs, 2 commands go at once when nothing is in
    # flight, so the GPU starts on a step's first ops (H100, the seed's MNIST step: 0.249 ms
    # against 0.256-0.288 without); never on CPU devices, as above.
    idle_default = if cpu?, do: 0, else: 2
    submit_idle = integer_env!("NXV_SUBMIT_IDLE", idle_default, 0, "a number of commands (0: off)")

    # Fusion in the recorder's window (window_fuse.rs): on GPUs a chain of element-wise commands
    # seen twice gets a fused kernel, built on a thread of its own, which later sightings run in
    # the members' place (H100, the MNIST step: 43 dispatches -> 24, and a shorter loss read);
    # never on CPU devices, where the builds would take the cores lavapipe's kernels run on.
    window_fusion =
      integer_env!(
        "NXV_WINDOW_FUSION",
        if(cpu?, do: 0, else: 2),
        0,
        "a number of sightings (0: off)"
      )

    # A compiled program's replay submitted as soon as the GPU thread records it (queue.rs,
    # SUBMIT_PROGRAMS): on GPUs, where the thread polls for work (spin_us > 0).
    submit_programs = flag!("NXV_SUBMIT_PROGRAMS", spin_us > 0)

    # Elements per invocation of the element-wise kernels: 4 on GPUs, where a quarter of the
    # invocations each visiting four elements measured faster (H200); 1 on CPU devices, where
    # lavapipe runs the loop slower than the invocations it saves.
    per_invocation_default = if class == :software, do: 1, else: 4

    per_invocation =
      choice_env!("NXV_ELEMENTS_PER_INVOCATION", per_invocation_default, [1, 2, 4, 8, 16])

    # Invocations per workgroup of the element-wise kernels: lavapipe runs every invocation of a
    # workgroup however few elements it holds (a scalar dispatch of 256 cost 5.6-7 us against 0.6
    # with 64); on the H200 64 slowed strided copies and gathers (transpose 8192^2 511 -> 704 us).
    workgroup_default = if class == :software, do: 64, else: 256
    workgroup = choice_env!("NXV_WORKGROUP_SIZE", workgroup_default, [32, 64, 128, 256])

    gemm_block = gemm_block!()
    # Results a process makes between its own collections (see Backend.collect_on_pressure):
    # a quarter of what the pool keeps, so the buffers a collection frees fit back into it.
    collect =
      integer_env!(
        "NXV_COLLECT_BYTES",
        div(Native.stats(nil) |> Native.unwrap!() |> Map.fetch!(:pool_max_bytes), 4),
        0,
        "a number of bytes (0: off)"
      )

    :persistent_term.put({__MODULE__, :collect_bytes}, collect)

    # f16 GEMMs on tensor cores (NV cooperative matrices) where the device has them: on by
    # default since their tile loads went 16 bytes at a time (H200, a0186a8: 125 TFLOP/s at
    # 4096^3 against the register-blocked kernel's 27.3). "1": the block by shape; a block's
    # name ("128x128", "128x128/2",
    # "128x256") forces it, to measure crossovers (the native side checks it).
    coop =
      case System.get_env("NXV_GEMM_COOP") do
        value when value in [nil, ""] -> "1"
        value -> value
      end

    # 2-D f32/f16 convolutions as an implicit GEMM that reads the windows in place, where dot
    # accumulates in f32 on a GPU: on the H200 im2col's copies (padding, patches, the output
    # transpose) took as long as its GEMM. CPU devices keep im2col and the barrier-free GEMM.
    implicit_conv = flag!("NXV_IMPLICIT_CONV", class != :software and not precise_dot)
    put_implicit_conv(implicit_conv)

    Native.configure(
      precise,
      precise_dot,
      spin_us,
      class == :software,
      submit_bytes,
      submit_commands,
      submit_idle,
      submit_programs,
      per_invocation,
      workgroup,
      gemm_block,
      coop
    )
    |> Native.unwrap!()

    Native.set_window_fusion(window_fusion) |> Native.unwrap!()
    configure_limits!()
  end

  # The device-memory budget (default 0.9 of the largest device-local heap, as EXLA's
  # memory_fraction) and the pending queue's bound (see Nx.Vulkan.set_pending_limits/1).
  defp configure_limits! do
    limit =
      case System.get_env("NXV_MEMORY_LIMIT") do
        value when value in [nil, ""] ->
          Application.get_env(:nx_vulkan, :memory_limit, 0.9)
          |> Nx.Vulkan.memory_limit_bytes!("config :nx_vulkan, memory_limit:")

        value ->
          value
          |> String.trim()
          |> parse_number()
          |> Nx.Vulkan.memory_limit_bytes!("NXV_MEMORY_LIMIT")
      end

    Nx.Vulkan.set_memory_limit(limit)
    # Pooled buffers unused this long are freed (a background thread looks once a second), so
    # what a burst of work pooled goes back to the device when the program moves on or idles.
    Native.set_pool_idle_ms(
      integer_env!("NXV_POOL_IDLE_MS", 10_000, 0, "a number of milliseconds (0: never)")
    )

    # And buffers allocated longer ago than this are freed when released (and when the thread
    # finds them pooled): the pool renews what long-running work keeps cycling.
    Native.set_pool_max_age_ms(
      integer_env!("NXV_POOL_MAX_AGE_MS", 600_000, 0, "a number of milliseconds (0: any age)")
    )

    default_bytes = if limit == :infinity, do: 2 ** 62, else: max(div(limit, 4), 1)

    Nx.Vulkan.set_pending_limits(
      commands: integer_env!("NXV_PENDING_COMMANDS", 4096, 1, "a positive integer"),
      bytes: integer_env!("NXV_PENDING_BYTES", default_bytes, 1, "a positive number of bytes")
    )
  end

  defp parse_number(text) do
    case {Integer.parse(text), Float.parse(text)} do
      {{n, ""}, _} -> n
      {_, {f, ""}} -> f
      _ -> text
    end
  end

  # A setting that takes one of a few integers (`allowed`); unset or empty: `default`.
  defp choice_env!(name, default, allowed) do
    case System.get_env(name) do
      value when value in [nil, ""] ->
        default

      value ->
        case Integer.parse(String.trim(value)) do
          {n, ""} ->
            if n in allowed, do: n, else: raise_choice!(name, allowed, value)

          _ ->
            raise_choice!(name, allowed, value)
        end
    end
  end

  defp raise_choice!(name, allowed, value) do
    {init, [last]} = Enum.split(allowed, -1)

    raise ArgumentError,
          "#{name} must be #{Enum.join(init, ", ")} or #{last}, got: #{inspect(value)}"
  end

  @doc false
  # Whether 2-D f32/f16 convs take the implicit-GEMM kernel (set at start; the tests flip it to
  # check that kernel on CPU devices too).
  def implicit_conv?, do: :persistent_term.get({__MODULE__, :implicit_conv}, false)

  @doc false
  def put_implicit_conv(on) when is_boolean(on),
    do: :persistent_term.put({__MODULE__, :implicit_conv}, on)

  @doc false
  # Bytes of results after which a process collects its garbage (0: never).
  def collect_bytes do
    case :persistent_term.get({__MODULE__, :collect_bytes}, 0) do
      0 -> :infinity
      n -> n
    end
  end

  defp integer_env!(name, default, min, what) do
    case System.get_env(name) do
      value when value in [nil, ""] ->
        default

      value ->
        case Integer.parse(String.trim(value)) do
          {n, ""} when n >= min -> n
          _ -> raise ArgumentError, "#{name} must be #{what}, got: #{inspect(value)}"
        end
    end
  end

  # The register-blocked GEMM's block edge, forced (to measure crossovers on a new device);
  # 0 lets the shape choose (see native/nx_vulkan/src/ops/matmul.rs).
  # "64": 64x64 blocks of 256 threads, "64x64/128": of 128 threads (8x4 outputs each), "128":
  # 128x128, "128x64": 128 rows by 64 columns.
  @gemm_blocks %{"64" => 64, "64x64/128" => 65, "128" => 128, "128x64" => 129}
  defp gemm_block! do
    case System.get_env("NXV_GEMM_BLOCK") do
      value when value in [nil, ""] ->
        0

      value ->
        Map.get(@gemm_blocks, value) ||
          raise ArgumentError,
                "NXV_GEMM_BLOCK must be one of #{Enum.join(Map.keys(@gemm_blocks), ", ")}, got: #{inspect(value)}"
    end
  end

  defp flag!(name, default) do
    case System.get_env(name) do
      value when value in [nil, ""] -> default
      "0" -> false
      "1" -> true
      other -> raise ArgumentError, "#{name} must be 0 or 1, got: #{inspect(other)}"
    end
  end

  @doc false
  def derive_class(%{type: :cpu}), do: :software

  def derive_class(%{type: :discrete_gpu} = info) do
    local =
      info.memory_heaps
      |> Enum.filter(& &1.device_local)
      |> Enum.map(& &1.size)
      |> Enum.max(fn -> 0 end)

    if local >= 32 * 1024 ** 3 and info.subgroup_size >= 32, do: :discrete_large, else: :discrete
  end

  def derive_class(%{type: :integrated_gpu}), do: :integrated
  def derive_class(_), do: :other

  defp parse_class!(value) do
    Enum.find(@classes, &(Atom.to_string(&1) == value)) ||
      raise ArgumentError,
            "NXV_DEVICE_CLASS must be one of #{Enum.map_join(@classes, ", ", &Atom.to_string/1)}, got: #{inspect(value)}"
  end
end
