defmodule Nx.Vulkan do
  @moduledoc """
  nx_vulkan: an `Nx` backend on any Vulkan device. See `Nx.Vulkan.Backend`.

      Nx.default_backend(Nx.Vulkan.Backend)
      t = Nx.tensor([1.0, 2.0, 3.0]) |> Nx.exp()   # recorded on the device's pending queue
      Nx.to_binary(t)                              # flushes, downloads

  ## The compiler

  `Nx.Vulkan` is also an `Nx.Defn.Compiler`:

      Nx.Defn.jit(&MyModel.train_step/3, compiler: Nx.Vulkan)
      Nx.Defn.compile(&MyModel.predict/2, templates, compiler: Nx.Vulkan)
      Nx.Defn.global_default_options(compiler: Nx.Vulkan)

  A function is traced once per structure (function, argument shapes and types, options) and
  run once under `Nx.Defn.Evaluator` on placeholder tensors while its device commands are
  captured; work that depends on no argument runs then, element-wise chains are fused into
  generated kernels, and the commands are ordered by dependency level. Later calls replay that
  program: one NIF call, no per-op work on the host (a long program runs from a command buffer
  recorded once, with its arguments and results copied in and out), results on
  `Nx.Vulkan.Backend` and bit for bit what the Evaluator gives on the same device. A program keeps
  its intermediate buffers between calls (the 64 most recently built programs are kept).
  `program_info/3` shows a program's dispatches, barriers and fused kernels. `NXV_FUSE=0` turns
  fusion off, `NXV_PRERECORD=0` pre-recording.

  A `while` or `cond` whose condition depends on no argument (a fixed trip count, such as
  `Nx.Random`'s loops) is decided at capture: the loop unrolls into the program. Hooks compile:
  each call hands the hooked values to the hook functions (the `:hooks` option's, else the
  hook's own) in the Evaluator's order, once the program is queued. Functions whose control
  flow depends on the arguments, hooks on tokens, or anything that needs the host mid-work (a
  host fallback, an integer division by a tensor's deferred check) run under the Evaluator on
  the eager backend instead, every call, with the same results; `Nx.Vulkan.compiler_census/0`
  counts those calls by reason. Telemetry: `[:nx_vulkan, :compile]` and `[:nx_vulkan, :run]`
  (below).

  ## Host syncs and deferred checks

  No op reads a tensor's value on the host mid-work; the caller waits on the device only when it
  reads data. `stats/0`'s `host_syncs` counts those waits by reason (`:download`,
  `:defn_control` for `Nx.Defn.Evaluator`'s own `while`/`cond` reads, `:fallback`,
  `:explicit_flush`, `:value_read_by_op`). `slice`/`put_slice` with tensor start indices read and
  clamp the starts on the device.

  Ops that must raise for bad values (integer `quotient`/`remainder` by zero, integer `pow` with a
  negative exponent, shifts by a negative amount, `Nx.LinAlg.triangular_solve/3` of a singular
  matrix) check a tensor operand on the device and raise at the next read of the result, or of
  any tensor computed from it, with the BinaryBackend's exception and message:

      q = Nx.quotient(a, Nx.tensor([1, 0]))   # returns a tensor, no wait
      Nx.add(q, 1) |> Nx.to_list()             # ** (ArithmeticError) integer quotient by zero (a divisor is 0)

  Every read of such a tensor raises; `inspect` shows the exception inside an `Inspect.Error`. A
  constant operand (`Nx.quotient(a, 0)`) raises at the call. `put_check_mode(:immediate)` makes
  this process's ops raise at the call instead, at one host sync each.

  ## Schedulers

  No NIF that runs on a normal BEAM scheduler waits or compiles: an op records its work and
  returns in microseconds. The first use of a kernel variant queues its pipeline for background
  builder threads (niced; compiling takes 50-150 ms per variant on lavapipe) and the dispatch is
  recorded against it; a read (on a dirty scheduler) waits for it like for any pending work.
  Pipelines persist across VM starts in an on-disk VkPipelineCache (`NXV_PIPELINE_CACHE`).

  ## Telemetry

  `:telemetry` events (all measurements in microseconds where timed):

    * `[:nx_vulkan, :submit]` - a batch went to the GPU (one submission: one command buffer, or
      several of 512 commands for a longer batch). Measurements: `commands`,
      `duration_us` (the GPU thread's recording and submitting). Metadata: `reason`
      (`:batch_cap`, `:work` (see `NXV_SUBMIT_BYTES`), `:commands` (see `NXV_SUBMIT_COMMANDS`), `:idle` (see `NXV_SUBMIT_IDLE`), `:program` (a compiled program's replay, submitted once
      recorded), `:gpu_timing` (a batch opened before `set_gpu_timing/1` changed the setting,
      submitted so that the next commands are timed as asked), or the flush reason that
      submitted it).
    * `[:nx_vulkan, :flush]` - a flush finished: the caller waited `duration_us` for `commands`
      commands. Metadata: `reason` (`:download`, `:explicit`, `:fallback`, `:value_read_by_op`,
      `:defn_control`, `:reclaim` (an allocation over the budget), `:backpressure` (a producer
      at the pending queue's bound)).
    * `[:nx_vulkan, :pipeline, :create]` - a pipeline was created. Measurements: `duration_us`.
      Metadata: `kernel` (its name), `op` (specialization constant 0).
    * `[:nx_vulkan, :fallback]` - an op ran on the host. Measurements: `count` (1). Metadata:
      `op`, `reason`.
    * `[:nx_vulkan, :compile]` - the compiler built a function's program (once per structure).
      Measurements: `trace_us`, `capture_us`, `dispatches` (0 when not captured). Metadata:
      `result` (`:program` or `:evaluator`), `reason` (why not, or `:program`).
    * `[:nx_vulkan, :run]` - a compiled program was queued (a call that did not go to the
      Evaluator). Measurements: `host_us` (the caller's time for the call).
    * `[:nx_vulkan, :out_of_memory]` - an allocation failed after reclaiming, just before the
      `Nx.Vulkan.Error`. Measurements: `requested_bytes`. Metadata: `nif`, `message`.

  Submissions, flushes and pipeline creations happen on the crate's own threads; they reach
  handlers through one process (`Nx.Vulkan.Telemetry`), so a handler runs there, shortly after
  the event. Fallbacks and out-of-memory errors run the handlers in the calling process.

  ## Environment

    * `NXV_BATCH_MAX` - the most commands per command buffer: a full one is submitted at once,
      the rest at the next flush (default 64; `0` submits every op on its own). Read at
      application start; anything but an integer from 0 to 2 ** 63 - 1 stops the start.
    * `NXV_DEVICE` - device index (default: the best compute device: discrete, integrated,
      virtual, CPU).
    * `NXV_DEVICE_CLASS` - overrides `Nx.Vulkan.Device.class/0`.
    * `NXV_HOST_FALLBACK` - `allow`, `warn` or `raise` (see `Nx.Vulkan.Fallback`); checked at
      application start, with the `:host_fallback` config, anything else stops the start.
    * `NXV_PRECISE` - `0`/`1`: f32/f16 math, sums and dot in f64, rounded once (default by device
      class, see `Nx.Vulkan.Device.configure!/0`).
    * `NXV_SUBMIT_BYTES` - a command buffer whose commands write this many bytes is submitted as
      soon as the GPU has room for it, not at the next flush (default 4 MiB on GPUs, `0`, never,
      on CPU devices).
    * `NXV_SUBMIT_COMMANDS` - a command buffer of this many commands is submitted as soon as the
      GPU has room for it (default 16 on GPUs, `0`, never, on CPU devices).
    * `NXV_SUBMIT_IDLE` - a command buffer of this many commands is submitted at once while
      nothing is on the GPU (default 2 on GPUs, `0`, never, on CPU devices).
    * `NXV_WINDOW_FUSION` - how many times the GPU thread must see a chain of element-wise
      commands before it builds a fused kernel for it (default 2 on GPUs, `0`, never, on CPU
      devices); see `set_window_fusion/1`.
    * `NXV_MEMORY_LIMIT` - the device-memory budget: bytes, or a fraction in (0, 1] of the
      largest device-local heap (default 0.9; wins over `config :nx_vulkan, memory_limit:`); see
      `set_memory_limit/1`.
    * `NXV_PENDING_COMMANDS`, `NXV_PENDING_BYTES` - the pending queue's bound (default 4096
      commands, a quarter of the memory limit); see `set_pending_limits/1`.
    * `NXV_PIPELINE_CACHE` - directory of the on-disk pipeline cache (default
      `$XDG_CACHE_HOME/nx_vulkan`, else `~/.cache/nx_vulkan`; `off` disables it). A file written
      for another device or driver, or corrupt, is ignored and replaced.
    * `NXV_ELEMENTS_PER_INVOCATION` - `1`, `2`, `4`, `8` or `16`: elements each invocation of the
      element-wise kernels visits (default 4 on GPUs, 1 on CPU devices); read at application
      start, anything else stops the start.
    * `NXV_WORKGROUP_SIZE` - `32`, `64`, `128` or `256`: invocations per workgroup of the
      element-wise kernels (default 256 on GPUs, 64 on CPU devices); read at application start,
      anything else stops the start.
  """
  alias Nx.Vulkan.Native

  @behaviour Nx.Defn.Compiler

  @impl Nx.Defn.Compiler
  defdelegate __jit__(key, vars, fun, args_list, opts), to: Nx.Vulkan.Compiler
  @impl Nx.Defn.Compiler
  defdelegate __compile__(key, vars, fun, opts), to: Nx.Vulkan.Compiler
  @impl Nx.Defn.Compiler
  defdelegate __partitions_options__(opts), to: Nx.Vulkan.Compiler
  @impl Nx.Defn.Compiler
  defdelegate __to_backend__(opts), to: Nx.Vulkan.Compiler

  @doc """
  What the compiler did: `programs` built, `replays` run, and `evaluator`, the calls of
  functions it could not capture (run under `Nx.Defn.Evaluator`), by reason.
  """
  @spec compiler_census() :: %{programs: non_neg_integer, replays: non_neg_integer, evaluator: map}
  def compiler_census, do: Nx.Vulkan.Compiler.census()

  @doc """
  The program `compiler: Nx.Vulkan` runs for `fun` on arguments like `args` (built and cached if
  it is not yet), or `{:evaluator, reason}` when the function runs under `Nx.Defn.Evaluator`
  instead. `opts` are the jit options. The program: `commands` (`dispatches` and copies) a call
  runs, the `barriers` between them (and `barriers_in_capture_order`, before they were ordered by
  dependency level), whether it is `prerecorded` (run from a command buffer recorded once, with
  `replay_copies` copies of arguments and results around it), and the `buffers` and `bytes` it
  holds.
  """
  @spec program_info(function, [term], keyword) :: map | {:evaluator, String.t()}
  def program_info(fun, args, opts \\ []) when is_function(fun) and is_list(args),
    do: Nx.Vulkan.Compiler.info(fun, args, opts)

  @default_batch_max 64
  # The NIF stores the cap from an i64.
  @max_batch_max 2 ** 63 - 1

  @doc """
  The devices this VM can use, as `%{index: i, name: name, type: type}`: every Vulkan device
  with a compute queue (`index` is what `NXV_DEVICE` and `{Nx.Vulkan.Backend, device: i}`
  take; devices other than the default open only if they are of the default's model), or, with
  `NXV_LOGICAL_DEVICES=n`, n logical devices 0..n-1 opened on the default GPU (each with its own
  queue, GPU thread, buffer pool and pipelines: how the multi-device paths are tested on one
  GPU). The default is `Nx.Vulkan.Device.info/0`.
  """
  @spec devices() :: [map]
  def devices, do: Nx.Vulkan.Device.info().devices

  @doc """
  Device memory of `device` (default: the default device), in bytes:

    * `:live` - held by tensors;
    * `:pooled` - idle in the buffer pool, for reuse;
    * `:pending` - held only by queued and in-flight work (buffers of tensors that died while
      their work was pending, staging buffers of uploads and downloads);
    * `:peak` - the most allocated at once (live + pooled + pending) since start or
      `reset_peak/0`;
    * `:limit` - the budget (`set_memory_limit/1`), `:infinity` if none;
    * `:queued_commands`, `:queued_bytes` - commands recorded and not yet retired, and the bytes
      they write, against the pending queue's bound (`set_pending_limits/1`).
  """
  @spec memory(non_neg_integer | nil) :: map
  def memory(device \\ nil) do
    s = stats(device)

    %{
      live: s.live_bytes,
      pooled: s.pooled_bytes,
      pending: max(s.allocated_bytes - s.live_bytes - s.pooled_bytes, 0),
      peak: s.peak_allocated_bytes,
      limit: if(s.memory_limit == 2 ** 64 - 1, do: :infinity, else: s.memory_limit),
      queued_commands: s.queued_commands,
      queued_bytes: s.queued_bytes
    }
  end

  @doc "Starts `memory/0`'s peak (and `stats/0`'s `peak_bytes`) again from what is in use now."
  @spec reset_peak() :: :ok
  def reset_peak, do: Native.reset_peak() |> Native.unwrap!()

  @doc """
  Sets the device-memory budget: a number of bytes, a float in (0, 1] (that fraction of the
  largest device-local heap), or `:infinity`. An allocation that would pass it first reclaims
  (empties the buffer pool, garbage-collects the calling process, waits for queued and in-flight
  work), then raises `Nx.Vulkan.Error` "out of device memory: requested N bytes; live L, pooled P,
  pending Q, limit M". Set at start from `NXV_MEMORY_LIMIT` or `config :nx_vulkan,
  memory_limit:` (default 0.9 of the heap). Returns the limit in bytes.
  """
  @spec set_memory_limit(pos_integer | float | :infinity) :: non_neg_integer | :infinity
  def set_memory_limit(limit) do
    bytes = memory_limit_bytes!(limit, "set_memory_limit/1")
    Native.set_memory_limit(if bytes == :infinity, do: 0, else: bytes)
    bytes
  end

  @doc """
  Bounds the pending queue: at most `:commands` commands, writing at most `:bytes` bytes, recorded
  and not yet retired by the GPU. A process past either bound waits (on a dirty scheduler) until
  the GPU has caught up, so a loop that never reads stays that far ahead of the device. Set at
  start from `NXV_PENDING_COMMANDS` (default 4096) and
  `NXV_PENDING_BYTES` (default a quarter of the memory limit). Each process checks the bound
  every 16 results, so the queue can pass it by that many commands per producing process.
  """
  @spec set_pending_limits(keyword) :: :ok
  def set_pending_limits(opts) do
    opts = Keyword.validate!(opts, [:commands, :bytes])
    s = stats()
    commands = Keyword.get(opts, :commands, s.pending_max_commands)
    bytes = Keyword.get(opts, :bytes, s.pending_max_bytes)

    unless is_integer(commands) and commands > 0 and is_integer(bytes) and bytes > 0 do
      raise ArgumentError,
            "set_pending_limits/1 takes positive integers for :commands and :bytes, got: #{inspect(opts)}"
    end

    Native.set_pending_limits(commands, bytes) |> Native.unwrap!()
  end

  @doc false
  # The limit in bytes for a setting (where: what to name in the error).
  def memory_limit_bytes!(:infinity, _), do: :infinity
  def memory_limit_bytes!(n, _) when is_integer(n) and n > 0, do: n

  def memory_limit_bytes!(f, _) when is_float(f) and f > 0 and f <= 1 do
    heap =
      Nx.Vulkan.Device.info().memory_heaps
      |> Enum.filter(& &1.device_local)
      |> Enum.map(& &1.size)
      |> Enum.max(fn -> 0 end)

    max(trunc(heap * f), 1)
  end

  def memory_limit_bytes!(other, where) do
    raise ArgumentError,
          "#{where}: the memory limit is a number of bytes, a fraction in (0, 1] of the " <>
            "device-local heap, or :infinity, got: #{inspect(other)}"
  end

  @check_mode_key {__MODULE__, :check_mode}

  @doc """
  Sets when this process's ops raise for bad integer operands (quotient/remainder by zero,
  pow with a negative exponent, shifts by negative amounts) and singular triangular matrices,
  where the operand is a tensor (a constant one is checked at once either way). Returns the
  previous mode.

    * `:deferred` (default) - the condition is computed on the device and the exception is
      raised at the next host read (`Nx.to_binary/1`, `Nx.to_number/1`, `inspect`, a host
      fallback...) of the result or of any tensor computed from it; the op itself never waits
      for the device.
    * `:immediate` - the op reads the condition at once and raises there, as
      `Nx.BinaryBackend` does, at the cost of one host sync per such op (counted in `stats/0`'s
      `host_syncs` as `:value_read_by_op`).
  """
  @spec put_check_mode(:deferred | :immediate) :: :deferred | :immediate
  def put_check_mode(mode) when mode in [:deferred, :immediate],
    do: Process.put(@check_mode_key, mode) || :deferred

  def put_check_mode(mode),
    do:
      raise(ArgumentError, "put_check_mode/1 takes :deferred or :immediate, got: #{inspect(mode)}")

  @doc "This process's check mode (see `put_check_mode/1`)."
  @spec check_mode() :: :deferred | :immediate
  def check_mode, do: Process.get(@check_mode_key, :deferred)

  @doc """
  Makes the contiguous copy of a lazy view now (a transpose or broadcast on
  `Nx.Vulkan.Backend`, which binary ops and dot read in place and other ops copy when they first
  need it; see README, Known limitations) and returns the tensor. Queued like any op (no flush);
  nothing for other tensors. Useful to time the copy, or to let a large base go before the view
  is used.
  """
  @spec materialize(Nx.Tensor.t()) :: Nx.Tensor.t()
  def materialize(%Nx.Tensor{data: %Nx.Vulkan.Backend{ref: ref}} = t) do
    Native.materialize(ref) |> Native.unwrap!()
    t
  end

  def materialize(%Nx.Tensor{} = t), do: t

  @doc "Submits all pending device work, on every device opened, and waits for it."
  @spec flush() :: :ok
  def flush, do: Native.flush() |> Native.unwrap!()

  @doc """
  Queue, pipeline-cache and memory counters of `device` (default: the default device; `:device`
  in the result) since start: dispatches recorded, submissions (and the `command_buffers` they
  carried: a batch past 512 queue entries records as command buffers of 512, submitted
  together), flushes by reason, host syncs by reason, GPU-thread time spent recording/submitting/waiting
  (ns), GPU time (ns, with `set_gpu_timing/1`), pipelines created vs cache hits (and the time
  spent creating them, `pipeline_create_us`, of which `pipeline_driver_us` inside the driver's
  vkCreateComputePipelines; what the on-disk cache held at start,
  `pipeline_disk_cache`), live and peak device bytes, everything allocated (`allocated_bytes`,
  `peak_allocated_bytes`) against `memory_limit`, the pending queue (`queued_commands`,
  `queued_bytes`) against its bound (`pending_max_commands`, `pending_max_bytes`), and the policy
  in force (`precise_f32`, `spin_us`, `cpu_device`).

  `host_syncs` counts the flushes a caller blocked on (commands were queued since the previous
  flush, whether or not the GPU had finished them, so the count does not depend on its speed), by
  reason: `:download` (a read: `Nx.to_binary/1`, `Nx.to_number/1`, `inspect`, a transfer),
  `:defn_control` (`Nx.Defn.Evaluator` reading a `while` condition or `cond` predicate),
  `:fallback` (the host fallback), `:explicit_flush` (`flush/0`), `:value_read_by_op` (an op
  that reads a value mid-work: only checks in immediate mode, see `put_check_mode/1`),
  `:reclaim` (an allocation over the memory budget waiting for queued work) and
  `:backpressure` (a producer waiting at the pending queue's bound). The
  batch cap's submissions do not make the caller wait and are not counted; uploads never flush.
  `window_replaced` counts the commands the GPU thread ran inside fused kernels of its window
  (see `set_window_fusion/1`) and `window_kernels` those kernels (per device);
  `window_templates` and `window_unfusable` the chains built into a kernel and those left as
  they were, `window_building` those still being built (all devices).
  `loop_chunks` and `loop_iterations` count the device loops' chunks (each one fence wait of the
  GPU thread, not of a caller) and the iterations they ran (`compiler: Nx.Vulkan` runs a `while`
  whose condition depends on the arguments on the device).
  """
  @spec stats(non_neg_integer | nil) :: map
  def stats(device \\ nil)
  def stats(nil), do: Native.stats(nil) |> Native.unwrap!()

  def stats(device) when is_integer(device) do
    Nx.Vulkan.Device.info(device)
    Native.stats(device) |> Native.unwrap!()
  end

  @doc """
  Turns GPU timestamps on (`true`: after every command, which also gives `take_kernel_times/0`;
  `:per_batch`: only around each submission) or off (`false`, the default). `stats/0`'s `gpu_ns`
  then accumulates the GPU time from each submission's first command to its last. A timestamp
  waits for the work before it, so per-command timestamps serialise independent dispatches and
  add to the time they measure; `:per_batch` measures without that. The setting applies to the
  commands queued after the call: it first waits for the commands already queued to be recorded
  under the old one.
  """
  def set_gpu_timing(on) when is_boolean(on),
    do: Native.set_gpu_timing(on, true) |> Native.unwrap!()

  def set_gpu_timing(:per_batch), do: Native.set_gpu_timing(true, false) |> Native.unwrap!()

  def set_gpu_timing(on),
    do:
      raise(
        ArgumentError,
        "set_gpu_timing/1 takes true, :per_batch or false, got: #{inspect(on)}"
      )

  @doc """
  GPU time by kernel since the last call, while `set_gpu_timing(true)` is on: a map from kernel
  name as an atom (e.g. `:gemm_tiled8_f32`, `:buffer_copy`) to `{commands, ns}`, where each command's
  time runs from the end of the command before it to its own end (so commands the GPU overlaps
  share their time, and the sum is the submissions' GPU time). Counting starts again after each
  call. Flush first (`flush/0`) so that recorded work has run.
  """
  @spec take_kernel_times() :: %{atom => {non_neg_integer, non_neg_integer}}
  def take_kernel_times, do: Native.take_kernel_times() |> Native.unwrap!()

  @doc "The pending-dispatch cap in force."
  def batch_max, do: stats().batch_max

  @doc """
  Sets the pending-dispatch cap at run time (normally set from `NXV_BATCH_MAX` at start).
  Results never depend on it; only when work is submitted does.
  """
  def set_batch_max(n) when is_integer(n) and n >= 0 and n <= @max_batch_max,
    do: Native.set_batch_max(n) |> Native.unwrap!()

  def set_batch_max(n) do
    raise ArgumentError,
          "set_batch_max/1: the batch max must be an integer from 0 to 2 ** 63 - 1 " <>
            "(0 = submit every op on its own), got: #{inspect(n)}"
  end

  # Early submission's thresholds (queue.rs, Recorder::due): a command buffer goes to the GPU as
  # soon as it has room once its commands write this many bytes, or once it holds this many
  # commands, or at once when it holds this many while nothing is on the GPU.
  for {name, env, measure, unit} <- [
        {:set_submit_bytes, "NXV_SUBMIT_BYTES",
         "how many bytes a command buffer's commands must write", "byte count"},
        {:set_submit_commands, "NXV_SUBMIT_COMMANDS",
         "how many commands a command buffer must hold", "command count"},
        {:set_submit_idle, "NXV_SUBMIT_IDLE",
         "how many commands a command buffer must hold while nothing is on the GPU",
         "command count"}
      ] do
    @doc """
    Sets at run time #{measure} for it to be submitted as soon as the GPU has room, rather than
    at the next flush or the cap (normally set from `#{env}` at start; `0` turns it off).
    Results never depend on it. Anything but a #{unit} from 0 to 2 ** 63 - 1 raises
    `ArgumentError`.
    """
    def unquote(name)(n) when is_integer(n) and n >= 0 and n <= @max_batch_max,
      do: apply(Native, unquote(name), [n]) |> Native.unwrap!()

    def unquote(name)(n) do
      raise ArgumentError,
            "#{unquote(name)}/1: takes an integer from 0 to 2 ** 63 - 1 (0 = off), got: #{inspect(n)}"
    end
  end

  @doc """
  Sets how many times the GPU thread must see a chain of element-wise commands (each reading the
  one before it, adjacent in the order they were queued: an eager chain, the Evaluator's ops)
  before it builds one fused kernel for the chain, on a thread of its own; once built, the chain
  runs as that kernel wherever it comes again in one of the windows the GPU thread records. `0`
  turns it off (normally set from `NXV_WINDOW_FUSION` at start: 2 on GPUs, 0 on CPU devices).
  A fused kernel computes each op as the op's own kernel does and writes every op's result, so
  results never depend on it; only how many dispatches and barriers run does (`stats/0`'s
  `window_replaced`, `window_kernels`, `window_templates` and `window_unfusable`). Anything but
  an integer from 0 to 2 ** 32 - 1 raises `ArgumentError`.
  """
  def set_window_fusion(n) when is_integer(n) and n >= 0 and n < 4_294_967_296,
    do: Native.set_window_fusion(n) |> Native.unwrap!()

  def set_window_fusion(n) do
    raise ArgumentError,
          "set_window_fusion/1: takes an integer from 0 to 2 ** 32 - 1 (0 = off), got: #{inspect(n)}"
  end

  @doc false
  def batch_max_from_env! do
    case System.get_env("NXV_BATCH_MAX") do
      nil ->
        @default_batch_max

      "" ->
        @default_batch_max

      value ->
        case Integer.parse(String.trim(value)) do
          {n, ""} when n >= 0 and n <= @max_batch_max ->
            n

          _ ->
            raise ArgumentError,
                  "NXV_BATCH_MAX must be an integer from 0 to 2 ** 63 - 1 " <>
                    "(0 = submit every op on its own), got: #{inspect(value)}"
        end
    end
  end
end
