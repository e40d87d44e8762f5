defmodule Nx.Vulkan do
  @moduledoc """
  nx_vulkan: an `Nx` backend on any Vulkan device. See `Nx.Vulkan.Backend`.

      Nx.default_backend(Nx.Vulkan.Backend)
      t = Nx.tensor([1.0, 2.0, 3.0]) |> Nx.exp()   # recorded on the device's pending queue
      Nx.to_binary(t)                              # flushes, downloads

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
    * `NXV_EARLY_SUBMIT` - `1` submits a command buffer of 16+ commands whenever the GPU is idle
      (default `0`).
    * `NXV_ELEMENTS_PER_INVOCATION` - `1`, `2`, `4`, `8` or `16`: elements each invocation of the
      element-wise kernels visits (default 4 on GPUs, 1 on CPU devices); read at application
      start, anything else stops the start.
  """
  alias Nx.Vulkan.Native

  @default_batch_max 64
  # The NIF stores the cap from an i64.
  @max_batch_max 2 ** 63 - 1

  @doc """
  Every Vulkan device with a compute queue, as `%{index: i, name: name, type: type}`; `index` is
  what `NXV_DEVICE` takes. The one in use is `Nx.Vulkan.Device.info/0`.
  """
  @spec devices() :: [map]
  def devices, do: Nx.Vulkan.Device.info().devices

  @doc "Device memory held by tensors, in bytes: live now, peak, and idle in the buffer pool."
  @spec memory() :: %{live: non_neg_integer, peak: non_neg_integer, pooled: non_neg_integer}
  def memory do
    s = stats()
    %{live: s.live_bytes, peak: s.peak_bytes, pooled: s.pooled_bytes}
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

  @doc "Submits all pending device work and waits for it."
  @spec flush() :: :ok
  def flush, do: Native.flush() |> Native.unwrap!()

  @doc """
  Queue, pipeline-cache and memory counters since start: dispatches recorded, submissions,
  flushes by reason, host syncs by reason, GPU-thread time spent recording/submitting/waiting
  (ns), GPU time (ns, with `set_gpu_timing/1`), pipelines created vs cache hits, live and peak
  device bytes, and the policy in force (`precise_f32`, `fence_spin_us`, `cpu_device`).

  `host_syncs` counts the flushes a caller blocked on (work was pending or in flight), by
  reason: `:download` (a read: `Nx.to_binary/1`, `Nx.to_number/1`, `inspect`, a transfer),
  `:defn_control` (`Nx.Defn.Evaluator` reading a `while` condition or `cond` predicate),
  `:fallback` (the host fallback), `:explicit_flush` (`flush/0`) and `:value_read_by_op` (an op
  that reads a value mid-work: only checks in immediate mode, see `put_check_mode/1`). The
  batch cap's submissions do not make the caller wait and are not counted; uploads never flush.
  """
  @spec stats() :: map
  def stats, do: Native.stats()

  @doc """
  Turns GPU timestamps around every submission on or off; `stats/0`'s `gpu_ns` then accumulates
  the GPU time from each submission's first command to its last. Off by default.
  """
  def set_gpu_timing(on) when is_boolean(on), do: Native.set_gpu_timing(on)

  def set_gpu_timing(on),
    do: raise(ArgumentError, "set_gpu_timing/1 takes true or false, got: #{inspect(on)}")

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
