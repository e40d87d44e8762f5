# Every NIF of the crate (native/nx_vulkan), by name, with its arguments. Nx.Vulkan.NIF holds the
# stubs the crate replaces at load; Nx.Vulkan.Native, which the rest of the code calls, wraps each.
nifs = [
  # tensor.rs
  upload: [:binary, :device],
  download: [:buffer, :bytes, :reason],
  byte_size: [:buffer],
  materialize: [:buffer],
  buffer_device: [:buffer],
  buffer_placement: [:buffer],
  deallocate: [:buffer],
  pin: [:buffer],
  # checks.rs
  attach_check: [:out, :value, :type, :condition, :exception, :message],
  verify_checks: [:buffer],
  # device.rs
  device_info: [:device],
  flush: [],
  flush_for_fallback: [],
  set_batch_max: [:n],
  set_submit_bytes: [:n],
  set_submit_commands: [:n],
  set_submit_idle: [:n],
  set_window_fusion: [:n],
  set_lavapipe_threads: [:value],
  configure: [
    :precise_f32,
    :precise_dot,
    :spin_us,
    :cpu_device,
    :submit_bytes,
    :submit_commands,
    :submit_idle,
    :submit_programs,
    :per_invocation,
    :workgroup,
    :gemm_block,
    :gemm_coop
  ],
  stats: [:device],
  set_gpu_timing: [:on, :per_command],
  take_kernel_times: [],
  # ops/elementwise.rs
  unary_op: [:op, :type, :x, :n],
  fft: [:inverse, :rows, :n, :x, :eps],
  binary_op: [:op, :type, :a, :a_shape, :b, :b_shape, :out_shape],
  classify: [:op, :type, :x, :n],
  complex_unary: [:op, :type, :x, :n],
  complex_real: [:op, :type, :x, :n],
  select: [:bytes, :pred, :pred_shape, :t, :t_shape, :f, :f_shape, :out_shape],
  # ops/layout.rs
  view_copy: [:bytes, :src, :offset, :dims, :strides],
  lazy_view: [:bytes, :src, :dims, :strides],
  copy_into: [:bytes, :dst, :dst_off, :dst_strides, :src, :src_off, :src_strides, :dims],
  dynamic_slice: [:bytes, :src, :offset, :dims, :strides, :starts, :max_starts, :start_strides],
  dynamic_put_slice: [
    :bytes,
    :dst,
    :offset,
    :dst_strides,
    :src,
    :dims,
    :starts,
    :max_starts,
    :start_strides
  ],
  fill: [:bytes, :n, :bits, :device],
  refill: [:buffer, :device],
  iota: [:type, :n, :inner, :dim, :eye, :device],
  alloc_buffer: [:bytes, :device],
  scatter: [:add, :type, :target, :shape, :indices, :indices_shape, :updates, :axes],
  gather: [:bytes, :x, :shape, :indices, :index_bytes, :indices_shape, :axes],
  # ops/convert.rs, ops/reduce.rs, ops/matmul.rs
  as_type: [:from, :to, :x, :n],
  reduce: [:op, :type, :x, :shape, :axes],
  window_reduce: [:op, :type, :x, :shape, :out_shape, :window, :strides, :pad_low, :dilations],
  sort: [:type, :x, :shape, :axis, :desc, :indices, :index_bytes],
  window_scatter: [
    :min,
    :type,
    :x,
    :shape,
    :source,
    :source_shape,
    :init,
    :window,
    :strides,
    :pad_low
  ],
  arg_reduce: [:op, :type, :x, :shape, :axes, :tie_high, :index_bytes],
  triangular_solve: [:type, :a, :b, :n, :cols, :batches, :backward, :a_strides, :b_strides],
  dot: [:type, :a, :a_shape, :a_contract, :a_batch, :b, :b_shape, :b_contract, :b_batch],
  conv2d: [
    :type,
    :input,
    :input_shape,
    :kernel,
    :kernel_dims,
    :groups,
    :strides,
    :padding_low,
    :dilation,
    :out_spatial
  ],
  # pipelines.rs, pipeline_disk_cache.rs, memory and queue bounds (device.rs, tensor.rs)
  forget_pipelines: [],
  save_pipeline_cache: [],
  set_memory_limit: [:bytes],
  set_pool_idle_ms: [:ms],
  set_pool_max_age_ms: [:ms],
  set_pending_limits: [:commands, :bytes],
  reset_peak: [],
  queue_full: [],
  throttle: [],
  reclaim: [],
  # events.rs
  set_event_sink: [:sink],
  # capture.rs (the compiler's programs)
  capture_begin: [:inputs, :device, :for_loop],
  capture_end: [:inputs, :outputs],
  capture_cancel: [],
  capture_give_up: [:reason],
  program_run: [:program, :inputs],
  program_info: [:program],
  # loops.rs (the compiler's device-side while loops)
  loop_new: [:cond, :flag, :body, :next, :state],
  loop_run: [:loop, :initial]
]

defmodule Nx.Vulkan.NIF do
  @moduledoc false
  # NIF stubs only: the crate registers its NIFs in this module.
  @on_load :load_nif

  def load_nif do
    path = :filename.join(:code.priv_dir(:nx_vulkan), ~c"native/libnx_vulkan")

    case :erlang.load_nif(path, 0) do
      :ok ->
        :ok

      {:error, {reason, text}} ->
        IO.warn("nx_vulkan: could not load its NIF (#{reason}): #{text}; run mix compile")
        {:error, reason}
    end
  end

  for {name, args} <- nifs do
    def unquote(name)(unquote_splicing(Enum.map(args, &Macro.var(:"_#{&1}", nil)))),
      do: :erlang.nif_error(:nx_vulkan_not_loaded)
  end
end

defmodule Nx.Vulkan.Native do
  @moduledoc false
  # Every NIF, as the rest of the code calls it. Each returns {:ok, value} or
  # {:error, {kind, message}}; unwrap!/1 is the one place errors become exceptions.
  #
  # An op NIF runs on a normal scheduler, where it must not wait for the device: when an
  # allocation passes the memory budget and emptying the pool did not help, it returns
  # :out_of_memory. Its wrapper here then reclaims (a garbage collection of the calling process
  # frees its dead tensors; reclaim/0 waits, on a dirty scheduler, for queued and in-flight work,
  # whose buffers then return, and empties the pool) and calls the NIF once more. If that fails
  # too, dead tensors may sit in other processes' heaps (a process that dropped a tensor and then
  # went to sleep collects nothing), or cached programs hold it (each keeps its intermediates):
  # the compiler's program cache is emptied, every process collected, memory reclaimed again,
  # and the NIF called a third time; a third :out_of_memory is the error unwrap!/1 raises as
  # Nx.Vulkan.Error. A NIF that fails this way has queued nothing a later call would repeat
  # wrongly: its own outputs are new buffers.
  alias Nx.Vulkan.NIF

  @doc false
  def unwrap!({:ok, value}), do: value
  def unwrap!({:error, {:argument, message}}), do: raise(ArgumentError, message)
  def unwrap!({:error, {:other_device, message}}), do: raise(ArgumentError, message)
  def unwrap!({:error, {:arithmetic, message}}), do: raise(ArithmeticError, message)
  def unwrap!({:error, {:vulkan, message}}), do: raise(Nx.Vulkan.Error, message)
  def unwrap!({:error, {:out_of_memory, message}}), do: raise(Nx.Vulkan.Error, message)

  def unwrap!({:error, {:unsupported, message}}),
    do: raise(Nx.Vulkan.Error, "not supported on the device: " <> message)

  for {name, args} <- nifs do
    vars = Enum.map(args, &Macro.var(&1, nil))

    def unquote(name)(unquote_splicing(vars)) do
      case NIF.unquote(name)(unquote_splicing(vars)) do
        {:error, {:out_of_memory, _}} ->
          reclaim!(:self)

          with {:error, {:out_of_memory, _}} <- NIF.unquote(name)(unquote_splicing(vars)) do
            reclaim!(:all)
            retried = NIF.unquote(name)(unquote_splicing(vars))

            with {:error, {:out_of_memory, message}} <- retried,
                 do: out_of_memory(unquote(name), message)

            retried
          end

        {:error, {:other_device, _}} = error ->
          case constants_follow([unquote_splicing(vars)]) do
            nil -> error
            args -> apply(__MODULE__, unquote(name), args)
          end

        result ->
          result
      end
    end
  end

  # An op's tensors on different devices: constants (tensors `fill` made, which is what numbers in
  # an op become, on the calling process's default device) are made again on the device of the
  # op's other tensors (queued there, no host sync) and the NIF called again; nil when anything
  # else is on another device (the error then stands).
  defp constants_follow(args) do
    placed =
      for ref <- refs_in(args, []),
          placement = placement(ref),
          placement != nil,
          uniq: true,
          do: {ref, placement}

    homes = for {_, {device, false}} <- placed, uniq: true, do: device

    home =
      case {homes, placed} do
        {[home], _} -> home
        {[], [{_, {device, true}} | _]} -> device
        _ -> nil
      end

    moved =
      for {ref, {device, true}} <- placed, home != nil and device != home, into: %{} do
        {ref, NIF.refill(ref, home) |> unwrap!()}
      end

    if moved != %{}, do: replace_refs(args, moved)
  end

  defp refs_in(ref, acc) when is_reference(ref), do: [ref | acc]
  defp refs_in(list, acc) when is_list(list), do: Enum.reduce(list, acc, &refs_in/2)
  defp refs_in(tuple, acc) when is_tuple(tuple), do: refs_in(Tuple.to_list(tuple), acc)
  defp refs_in(_, acc), do: acc

  # {device, made by fill}, or nil for a reference that is no buffer of this node (a program).
  defp placement(ref) do
    NIF.buffer_placement(ref)
  rescue
    ArgumentError -> nil
  end

  defp replace_refs(ref, moved) when is_reference(ref), do: Map.get(moved, ref, ref)
  defp replace_refs(list, moved) when is_list(list), do: Enum.map(list, &replace_refs(&1, moved))

  defp replace_refs(tuple, moved) when is_tuple(tuple),
    do: tuple |> Tuple.to_list() |> replace_refs(moved) |> List.to_tuple()

  defp replace_refs(other, _moved), do: other

  defp reclaim!(:self) do
    :erlang.garbage_collect()
    NIF.reclaim() |> unwrap!()
  end

  # Every other process, concurrently (each on its own scheduler), waiting at most 5 s: a process
  # busy in a long NIF collects when it returns, and its memory then comes later. A helper sends
  # the requests, so replies that come after the wait land in its mailbox, not the caller's.
  defp reclaim!(:all) do
    Nx.Vulkan.ProgramCache.clear()
    caller = self()

    {helper, monitor} =
      spawn_monitor(fn ->
        refs =
          for pid <- Process.list(), pid not in [caller, self()] do
            ref = make_ref()
            :erlang.garbage_collect(pid, async: ref)
            ref
          end

        for ref <- refs, do: receive(do: ({:garbage_collect, ^ref, _} -> :ok))
      end)

    receive do
      {:DOWN, ^monitor, :process, ^helper, _} -> :ok
    after
      5_000 -> Process.demonitor(monitor, [:flush])
    end

    reclaim!(:self)
  end

  defp out_of_memory(nif, message) do
    [_, requested] = Regex.run(~r/requested (\d+) bytes/, message)
    measurements = %{requested_bytes: String.to_integer(requested)}
    :telemetry.execute([:nx_vulkan, :out_of_memory], measurements, %{nif: nif, message: message})
  end
end
