defmodule Nx.Vulkan.Backend do
  @moduledoc """
  An `Nx.Backend` that keeps tensors in Vulkan device memory and runs ops as compute dispatches.

  ## Where it differs from `Nx.BinaryBackend`

    * Ops are recorded onto one pending queue and run when the host needs data (`to_binary`,
      `inspect`, a host fallback, `Nx.Vulkan.flush/0`) or when `NXV_BATCH_MAX` dispatches are
      pending. Results do not depend on when that happens.
    * On devices where f64 is fast (classes `:software` and `:discrete_large`, see
      `Nx.Vulkan.Device`), f32 and f16 math, sums and `dot` compute in f64 and round once, as the
      BinaryBackend does through Erlang's f64 arithmetic; f64 functions use the crate's own f64
      routines (within 1 ulp of the BinaryBackend's glibc results but for rare inputs: see the
      README's accuracy table). Elsewhere (or with `NXV_PRECISE=0`) f32 uses the GPU's
      native functions and f32 accumulation, which may differ in the last digits.
    * Sums are tree-ordered per output element (deterministic, but not the BinaryBackend's
      left-to-right order).
    * Float math follows IEEE 754 and C where the BinaryBackend raises or is off (x / 0.0,
      sqrt of negatives, exp overflow, pow with infinite exponents...: the README lists them).
      Integer `quotient`/`remainder` by zero, integer `pow` with a negative exponent and shifts
      by negative amounts raise the BinaryBackend's exceptions, and so does `triangular_solve`
      of a singular matrix, but where the operand is a tensor they raise at the next host read
      (`to_binary`, `to_number`, `inspect`, a fallback) of the result or of anything computed
      from it, not at the call: the condition is computed on the device and read with the data
      (a deferred check). Every read of such a tensor raises; of several failed checks, the
      earliest op's. A constant operand raises at the call; so does every such op after
      `Nx.Vulkan.put_check_mode(:immediate)` (one host sync each).
    * No op reads a tensor on the host: `slice`/`put_slice` with tensor start indices clamp
      them on the device. `Nx.Vulkan.stats/0`'s `host_syncs` counts the waits that remain, by
      reason.
    * `gather` clamps out-of-range indices and `indexed_add`/`indexed_put` skip out-of-range
      index tuples; the BinaryBackend raises.
    * Ops without a device kernel yet go through `Nx.Vulkan.Fallback` (counted; strict mode
      available). The README lists them.
    * `backend_deallocate/1` frees the device memory at once, and so does `backend_transfer/3`
      to another backend, after the copy (as Nx documents); using the tensor (or a reshape or
      bitcast of it) afterwards raises `ArgumentError`. Shared constants ignore both. Otherwise
      memory returns to the pool when the tensor is garbage collected.
    * Zero-size tensors (Nx.pad with negative padding makes them) work in every op: empty
      results, and reductions over an empty axis give their identity (the BinaryBackend fails
      inside for most of them).

  ## Options

    * `:device` - the index of the device (`Nx.Vulkan.devices/0`) that creation functions and
      transfers place tensors on; default: the default device (`NXV_DEVICE`). Each device has
      its own context, queue, GPU thread and buffer pool, so devices work in parallel. An op
      runs on the device of its tensors; tensors on different devices in one op raise
      `ArgumentError` naming both (move one with `Nx.backend_transfer(t, {Nx.Vulkan.Backend,
      device: i})`, which goes through the host). Numbers in an op become constants on the
      calling process's default backend: a process working on device `i` sets
      `Nx.default_backend({Nx.Vulkan.Backend, device: i})` (Nx.Defn's Evaluator makes a
      function's constants there too). Unknown options and indices this VM cannot use raise
      `ArgumentError`, also when given to creation functions (`Nx.tensor(..., backend:
      {Nx.Vulkan.Backend, opts})`).

  ## Inspect

  `inspect/2` names the backend on its own line unless `config :nx_vulkan,
  add_backend_on_inspect: false` (set in this project's tests so Nx's doctests compare equal).
  """
  @behaviour Nx.Backend

  # `constant`: for tensors made by constant/3, the value every element holds (as stored, e.g.
  # 0.1 rounded to f32), so broadcasts, transposes and casts of it become other constants
  # (shared, no dispatch) instead of copies; nil otherwise.
  defstruct [:ref, :constant]

  alias Nx.Tensor, as: T
  alias Nx.Vulkan.{Fallback, Native}

  ## Creation

  @impl true
  def init(opts) do
    opts = Keyword.validate!(opts, [:device])

    case Keyword.fetch(opts, :device) do
      {:ok, device} -> check_device!(device)
      :error -> :ok
    end

    opts
  end

  # A :device is an index of Nx.Vulkan.devices/0 that opens (another model than the default's
  # raises there, saying why).
  defp check_device!(device) do
    devices = Nx.Vulkan.devices()

    if is_integer(device) and Enum.any?(devices, &(&1.index === device)) do
      Nx.Vulkan.Device.info(device)
      :ok
    else
      raise ArgumentError,
            "Nx.Vulkan.Backend's :device must be the index of one of this VM's devices: " <>
              Enum.map_join(devices, ", ", &"#{&1.index} (#{&1.name})") <>
              " (NXV_LOGICAL_DEVICES=n opens n logical devices on the default one); got: " <>
              inspect(device)
    end
  end

  # Creation callbacks get the backend options straight from Nx (Nx.tensor(..., backend:
  # {Nx.Vulkan.Backend, opts}) does not call init/1): they are checked there too. Returns the
  # device index they name.
  defp device!([]), do: Nx.Vulkan.Device.default_index()

  defp device!(opts) do
    init(opts)
    Keyword.get_lazy(opts, :device, &Nx.Vulkan.Device.default_index/0)
  end

  # Where a tensor of another backend that reaches an op goes: the device of the calling
  # process's default backend.
  defp upload_device do
    case Nx.default_backend() do
      {__MODULE__, opts} -> Keyword.get_lazy(opts, :device, &Nx.Vulkan.Device.default_index/0)
      _ -> Nx.Vulkan.Device.default_index()
    end
  end

  @doc false
  # The device index a tensor of this backend lives on (one of another node's: where an op here
  # uploads it).
  def device_of(%T{data: %__MODULE__{ref: ref}}) when node(ref) == node(),
    do: Native.buffer_device(ref)

  def device_of(%T{data: %__MODULE__{}}), do: upload_device()

  defp on_device?(%T{data: %__MODULE__{ref: ref}} = t, device),
    do: node(ref) == node() and device_of(t) == device

  ## Tensors of other nodes
  #
  # A tensor's buffer is a NIF resource of the node that made it; sent to another node it is a
  # plain reference there (naming its node), and back home it is the resource again. Another
  # node reads it through the owner (Erlang distribution), and an op there uploads what it read.
  # The owner frees the buffer once no process of its own holds the tensor: one sent away and
  # then dropped at home cannot be read any more, which raises saying how to send host tensors
  # instead (Nx.Serving's distributed_postprocessing, as with EXLA).

  defp fetch_from_owner(%T{data: %__MODULE__{ref: ref}} = t, limit) do
    owner = node(ref)

    try do
      :erpc.call(owner, __MODULE__, :read_for_node, [t, limit])
    catch
      :error, {:erpc, reason} ->
        raise Nx.Vulkan.Error,
              "this tensor lives on node #{owner}'s Vulkan device, which cannot be reached " <>
                "(#{inspect(reason)}); transfer tensors to the host (Nx.backend_transfer(t, " <>
                "Nx.BinaryBackend)) before sending them to another node"
    end
    |> case do
      {:ok, binary} ->
        binary

      :gone ->
        raise ArgumentError,
              "this tensor lived on node #{owner}'s Vulkan device and was freed there (no " <>
                "process on #{owner} holds it any more); send host tensors to other nodes: " <>
                "Nx.backend_transfer(t, Nx.BinaryBackend) before sending, or " <>
                "Nx.Serving.distributed_postprocessing(serving, &Nx.backend_transfer(&1, " <>
                "Nx.BinaryBackend)) for a serving's results"
    end
  end

  @doc false
  # On the owner: `limit` elements of a tensor another node asks for, or :gone when its buffer
  # was freed here (the reference no longer names a resource).
  def read_for_node(%T{data: %__MODULE__{ref: ref}} = t, limit) do
    Native.byte_size(ref)
    {:ok, read_binary(t, limit, :download)}
  rescue
    e in ArgumentError ->
      if Exception.message(e) == "argument error", do: :gone, else: reraise(e, __STACKTRACE__)
  end

  # Tensors are immutable, so small constants (defn materialises the same scalars every step)
  # are filled once and shared: see Nx.Vulkan.ConstantCache.
  @impl true
  def constant(%T{type: type, shape: shape} = out, number, opts) do
    device = device!(opts)
    # Floats by their bits: 0.0 and -0.0 are equal terms on OTP 25 but different constants.
    key = {type, shape, if(is_float(number), do: <<number::float>>, else: number), device}

    case Nx.Vulkan.ConstantCache.get(key) do
      nil ->
        t = fill_constant(out, number, opts, device)

        case t.data do
          %__MODULE__{} = data ->
            stored = Nx.BinaryBackend.constant(%{out | shape: {}}, number, []) |> Nx.to_number()
            data = %{data | constant: stored}
            Nx.Vulkan.ConstantCache.put(key, Nx.size(shape), data)
            %{t | data: data}

          _ ->
            t
        end

      data ->
        %{out | data: data}
    end
  end

  # A cast of a constant is the constant of the new type when writing the stored value into that
  # type is what as_type does: to floats (rounding to nearest; bf16 truncated from f32, as both
  # do) and integer to integer (wrapping). Float to integer is not (as_type truncates).
  defp constant_cast?({:f, _}, {:f, _}), do: true
  defp constant_cast?({:bf, _}, {:f, _}), do: true
  defp constant_cast?({:f, _}, {:bf, _}), do: true
  defp constant_cast?({:bf, _}, {:bf, _}), do: true
  defp constant_cast?({kind, _}, {:f, _}) when kind in [:s, :u], do: true
  defp constant_cast?({kind, _}, {:bf, _}) when kind in [:s, :u], do: true
  defp constant_cast?({from, _}, {to, _}) when from in [:s, :u] and to in [:s, :u], do: true
  defp constant_cast?(_, _), do: false

  defp fill_constant(%T{type: type} = out, number, opts, device) do
    case elem_bytes(type) do
      bytes when bytes in [1, 2, 4, 8] ->
        <<bits::unsigned-little-size(bytes * 8)>> =
          Nx.BinaryBackend.constant(%{out | shape: {}}, number, []) |> Nx.BinaryBackend.to_binary(1)

        Native.fill(bytes, Nx.size(out), bits, device)
        |> result(out, :constant, [out, number, opts])

      _ ->
        # c128 (no 16-byte fill kernel): upload the one value, broadcast it with stride 0.
        scalar = Nx.BinaryBackend.constant(%{out | shape: {}}, number, [])
        one = from_binary(scalar, Nx.BinaryBackend.to_binary(scalar, 1), device: device)

        view(out, one, 0, List.duplicate(0, tuple_size(out.shape))) ||
          Fallback.run(:constant, "no fill kernel for #{Nx.Type.to_string(type)}", [
            out,
            number,
            opts
          ])
    end
  end

  @impl true
  def from_binary(%T{} = out, binary, opts) do
    device = device!(opts)
    binary |> pad_to_bytes() |> Native.upload(device) |> Native.unwrap!() |> wrap(out)
  end

  defp pad_to_bytes(binary) when is_binary(binary), do: binary

  defp pad_to_bytes(bits) do
    pad = 8 - rem(bit_size(bits), 8)
    <<bits::bitstring, 0::size(pad)>>
  end

  @impl true
  def eye(%T{shape: shape, type: type} = out, opts) do
    device = device!(opts)
    rank = tuple_size(shape)
    cols = elem(shape, rank - 1)
    rows = elem(shape, rank - 2)
    ct = index_type(type)

    Native.iota(ct, Nx.size(shape), cols, rows, true, device)
    |> result(with_type(out, ct), :eye, [out, opts])
    |> cast(type)
  end

  @impl true
  def iota(%T{shape: shape, type: type} = out, axis, opts) do
    device = device!(opts)

    {inner, dim} =
      case axis do
        nil ->
          {1, 0}

        axis ->
          {shape |> Tuple.to_list() |> Enum.drop(axis + 1) |> Enum.product(), elem(shape, axis)}
      end

    ct = index_type(type)

    Native.iota(ct, Nx.size(shape), inner, dim, false, device)
    |> result(with_type(out, ct), :iota, [out, axis, opts])
    |> cast(type)
  end

  ## Transfer

  # `limit` counts elements of the whole (possibly vectorized) tensor, clamped here to its size
  # (inspect's limit can exceed what the NIF's u64 byte count holds). Sub-byte types are stored
  # bit-packed, padded to whole bytes. A read raises for a failed deferred check of the tensor
  # (see the moduledoc).
  @impl true
  def to_binary(%T{} = t, limit), do: read_binary(t, limit, read_reason())

  @doc false
  # A whole tensor read for `reason` (:download, or :fallback from the host fallback).
  def read_binary(t, reason), do: read_binary(t, Nx.flat_size(t), reason)

  # A tensor of another node: fetched from the node that owns it.
  defp read_binary(%T{data: %__MODULE__{ref: ref}} = t, limit, _reason) when node(ref) != node(),
    do: fetch_from_owner(t, min(limit, Nx.flat_size(t)))

  defp read_binary(%T{type: {_, bits}} = t, limit, reason) do
    limit = min(limit, Nx.flat_size(t))
    binary = Native.download(ref!(t), div(limit * bits + 7, 8), reason) |> Native.unwrap!()

    if rem(bits, 8) == 0 do
      binary
    else
      keep = min(limit, div(bit_size(binary), bits)) * bits
      <<kept::bitstring-size(keep), _::bitstring>> = binary
      kept
    end
  end

  # Nx.Defn.Evaluator reads each `while` condition and `cond` predicate with Nx.to_number: those
  # host syncs are the Evaluator's control flow, not an op's, and are counted apart. The caller's
  # frames tell (a few microseconds, against a read's flush and fence wait).
  defp read_reason do
    {:current_stacktrace, frames} = Process.info(self(), :current_stacktrace)

    if evaluator_read?(frames), do: :defn_control, else: :download
  end

  defp evaluator_read?([{Nx, :to_number, _, _}, {Nx.Defn.Evaluator, fun, _, _} | _])
       when fun in [:while, :cond_clause],
       do: true

  defp evaluator_read?([_ | rest]), do: evaluator_read?(rest)
  defp evaluator_read?([]), do: false

  @doc false
  def to_binary(t), do: read_binary(t, :download)

  # To another device of this backend, through the host (a download and an upload).
  @impl true
  def backend_copy(%T{} = t, __MODULE__, opts) do
    device = device!(opts)

    if on_device?(t, device),
      do: copy(t),
      else: from_binary(t, to_binary(t), device: device)
  end

  def backend_copy(%T{} = t, backend, opts), do: backend.from_binary(t, to_binary(t), opts)

  # Nx documents a transfer as a copy and a deallocation: transferred away (to another backend
  # or device), the tensor frees its device memory (the copy has been downloaded by then) and
  # later use raises, as on EXLA. Shared constants ignore the deallocation, so their other users
  # are unaffected.
  @impl true
  def backend_transfer(%T{} = t, __MODULE__, opts) do
    if on_device?(t, device!(opts)) do
      t
    else
      copy = backend_copy(t, __MODULE__, opts)
      backend_deallocate(t)
      copy
    end
  end

  def backend_transfer(%T{} = t, backend, opts) do
    copy = backend_copy(t, backend, opts)
    backend_deallocate(t)
    copy
  end

  # Frees the device memory now (back to the pool; work already queued is unaffected). Views of
  # the same buffer (reshape, squeeze, bitcast) go with it; cached constants are never freed.
  @impl true
  def backend_deallocate(%T{data: %__MODULE__{ref: ref}}) when node(ref) == node(),
    do: Native.deallocate(ref)

  # Another node's tensor is its owner's to free.
  def backend_deallocate(%T{data: %__MODULE__{}}), do: :ok

  # A Stream, as Nx documents and the BinaryBackend returns: each batch is sliced on the device
  # when the stream reaches it. With leftover: :repeat the last batch wraps around (the tail of
  # t, then its head); with :discard the rows past the last full batch are dropped.
  @impl true
  def to_batched(%T{shape: out_shape} = out, %T{shape: shape} = t, opts) do
    batch = elem(out_shape, 0)
    full = div(elem(shape, 0), batch)
    leftover = rem(elem(shape, 0), batch)
    batches = if leftover != 0 and opts[:leftover] == :repeat, do: full + 1, else: full

    Stream.map(0..(batches - 1)//1, fn
      ^full ->
        tail = rows(out, t, full * batch, leftover)
        head = rows(out, t, 0, batch - leftover)
        concatenate(out, [tail, head], 0)

      i ->
        rows(out, t, i * batch, batch)
    end)
  end

  # Rows first..first + count - 1 of t (along axis 0), as a tensor shaped like `out` otherwise.
  defp rows(%T{shape: out_shape} = out, %T{shape: shape} = t, first, count) do
    lengths = [count | tl(Tuple.to_list(out_shape))]

    slice(
      %{out | shape: put_elem(out_shape, 0, count)},
      t,
      [first | zeros(shape)],
      lengths,
      ones(shape)
    )
  end

  @impl true
  def inspect(%T{} = t, inspect_opts) do
    limit = if inspect_opts.limit == :infinity, do: Nx.flat_size(t), else: inspect_opts.limit + 1
    doc = Nx.Backend.inspect(t, to_binary(t, limit), inspect_opts)

    if Application.get_env(:nx_vulkan, :add_backend_on_inspect, true) do
      Inspect.Algebra.concat(["Nx.Vulkan.Backend", Inspect.Algebra.line(), doc])
    else
      doc
    end
  end

  @impl true
  def from_pointer(_, _, _, _, _),
    do: raise(ArgumentError, "Nx.Vulkan.Backend does not support pointer manipulation")

  @impl true
  def to_pointer(_, _),
    do: raise(ArgumentError, "Nx.Vulkan.Backend does not support pointer manipulation")

  ## Shape: metadata only

  @impl true
  def reshape(out, %T{data: data}), do: %{out | data: data}

  @impl true
  def squeeze(out, %T{data: data}, _axes), do: %{out | data: data}

  @impl true
  def bitcast(out, %T{data: data}), do: %{out | data: %{data | constant: nil}}

  ## Shape: strided copies

  @impl true
  def transpose(out, %T{data: %__MODULE__{constant: value}} = t, _axes) when value != nil,
    do: constant(out, value, device: device_of(t))

  def transpose(%T{} = out, %T{shape: shape} = t, axes) do
    strides = contiguous_strides(shape)
    strides = Enum.map(axes, &elem(strides, &1))

    same_layout(out, t, strides) || lazy_view(out, t, strides) ||
      fallback(:transpose, [out, t, axes])
  end

  @impl true
  def broadcast(out, %T{data: %__MODULE__{constant: value}} = t, _shape, _axes)
      when value != nil,
      do: constant(out, value, device: device_of(t))

  def broadcast(%T{shape: out_shape} = out, %T{shape: shape} = t, _shape, axes) do
    strides = contiguous_strides(shape)
    axis_of = axes |> Enum.with_index() |> Map.new()

    out_strides =
      for d <- 0..(tuple_size(out_shape) - 1)//1 do
        case axis_of do
          %{^d => i} -> if elem(shape, i) == elem(out_shape, d), do: elem(strides, i), else: 0
          _ -> 0
        end
      end

    same_layout(out, t, out_strides) || lazy_view(out, t, out_strides) ||
      fallback(:broadcast, [out, t, out_shape, axes])
  end

  # `t`'s data as `out` when reading `t` through `strides` visits its elements in their own
  # order, every element once: a transpose that moves only axes of size 1, a broadcast that only
  # adds them (the Evaluator's gradients ask for both). Tensors are immutable, so the two share
  # the buffer as a reshape does; anything else is nil (a strided copy).
  defp same_layout(%T{shape: out_shape} = out, %T{data: data} = t, strides) do
    non_unit = fn strides ->
      out_shape |> Tuple.to_list() |> Enum.zip(strides) |> Enum.reject(&(elem(&1, 0) == 1))
    end

    if Nx.size(out_shape) == Nx.size(t) and
         non_unit.(strides) == non_unit.(Tuple.to_list(contiguous_strides(out_shape))),
       do: %{out | data: data}
  end

  # Integer starts (and tensor starts whose value the host knows) make a strided view; other
  # tensor starts are read and clamped by the kernel on the device, never on the host.
  @impl true
  def slice(%T{} = out, %T{shape: shape} = t, starts, lengths, steps) do
    strides = contiguous_strides(shape)
    view_strides = Enum.with_index(steps, fn step, d -> step * elem(strides, d) end)

    case split_starts(starts, shape, lengths, strides) do
      {offset, []} ->
        view(out, t, offset, view_strides) || fallback(:slice, [out, t, starts, lengths, steps])

      {offset, dynamic} ->
        with bytes when bytes != nil <- move_bytes(out.type),
             {:ok, ref} <-
               Native.dynamic_slice(
                 bytes,
                 ref!(t),
                 offset,
                 shape_list(out),
                 view_strides,
                 dynamic_refs(dynamic),
                 Enum.map(dynamic, &elem(&1, 1)),
                 Enum.map(dynamic, &elem(&1, 2))
               ) do
          wrap(ref, out)
        else
          error -> fallback_unless_error(error, :slice, [out, t, starts, lengths, steps])
        end
    end
  end

  @impl true
  def reverse(%T{} = out, %T{shape: shape} = t, axes) do
    strides = contiguous_strides(shape)

    {offset, view_strides} =
      Enum.reduce(0..(tuple_size(shape) - 1)//1, {0, []}, fn d, {offset, acc} ->
        stride = elem(strides, d)

        if d in axes,
          do: {offset + (elem(shape, d) - 1) * stride, [-stride | acc]},
          else: {offset, [stride | acc]}
      end)

    view(out, t, offset, Enum.reverse(view_strides)) || fallback(:reverse, [out, t, axes])
  end

  @impl true
  def concatenate(%T{shape: out_shape, type: type} = out, tensors, axis) do
    with bytes when bytes != nil <- move_bytes(type),
         tensors = Enum.map(tensors, &cast(&1, type)),
         {:ok, dst} <- Native.alloc_buffer(Nx.size(out) * bytes, tensors_device(tensors)) do
      out_strides = contiguous_strides(out_shape)

      # An empty input (0 along the axis) has nothing to copy.
      for %T{} = t <- tensors, reduce: 0 do
        position ->
          unless zero_size?(t) do
            dst_offset = position * elem(out_strides, axis)
            copy_into!(bytes, dst, dst_offset, Tuple.to_list(out_strides), t)
          end

          position + elem(t.shape, axis)
      end

      wrap(dst, out)
    else
      _ -> fallback(:concatenate, [out, tensors, axis])
    end
  end

  @impl true
  def stack(%T{shape: out_shape, type: type} = out, tensors, axis) do
    with bytes when bytes != nil <- move_bytes(type),
         tensors = Enum.map(tensors, &cast(&1, type)),
         {:ok, dst} <- Native.alloc_buffer(Nx.size(out) * bytes, tensors_device(tensors)) do
      out_strides = contiguous_strides(out_shape)
      # Each input fills one index of the new axis: skip that axis in the output strides.
      dst_strides = out_strides |> Tuple.delete_at(axis) |> Tuple.to_list()

      tensors
      |> Enum.with_index()
      |> Enum.each(fn {t, i} ->
        copy_into!(bytes, dst, i * elem(out_strides, axis), dst_strides, t)
      end)

      wrap(dst, out)
    else
      _ -> fallback(:stack, [out, tensors, axis])
    end
  end

  @impl true
  def put_slice(%T{shape: shape, type: type} = out, t, starts, slice) do
    slice = cast(slice, type)

    with bytes when bytes != nil <- move_bytes(type),
         %T{data: %__MODULE__{ref: dst}} <- copy(cast(t, type)),
         :ok <- put_slice_into(bytes, dst, shape, starts, slice) do
      wrap(dst, out)
    else
      error -> fallback_unless_error(error, :put_slice, [out, t, starts, slice])
    end
  end

  # An empty slice puts nothing: the result is the copy of t.
  defp put_slice_into(bytes, dst, shape, starts, %T{shape: slice_shape} = slice) do
    strides = contiguous_strides(shape)
    dst_strides = Tuple.to_list(strides)
    {offset, dynamic} = split_starts(starts, shape, Tuple.to_list(slice_shape), strides)

    cond do
      zero_size?(slice) ->
        :ok

      dynamic == [] ->
        copy_into!(bytes, dst, offset, dst_strides, slice)
        :ok

      true ->
        Native.dynamic_put_slice(
          bytes,
          dst,
          offset,
          dst_strides,
          ref!(slice),
          Tuple.to_list(slice_shape),
          dynamic_refs(dynamic),
          Enum.map(dynamic, &elem(&1, 1)),
          Enum.map(dynamic, &elem(&1, 2))
        )
        |> case do
          {:ok, _} -> :ok
          error -> error
        end
    end
  end

  # Start indices: integers, or scalar integer tensors of any integer type (Nx's dynamic
  # slicing; Nx turns integers mixed with tensors into constants). Nx clamps each start to
  # [0, dim - length]. Starts the host knows (integers, constants, host tensors) are clamped here
  # and folded into one element offset; the others are returned as {tensor, dim - length,
  # stride} for the kernel to read and clamp on the device. A slice that spans its axis has only
  # one valid start, 0.
  defp split_starts(starts, shape, lengths, strides) do
    [Tuple.to_list(shape), starts, lengths, Tuple.to_list(strides)]
    |> Enum.zip_with(fn [dim, start, length, stride] -> {start, dim - length, stride} end)
    |> Enum.reduce({0, []}, fn {start, max_start, stride}, {offset, dynamic} ->
      case host_start(start) do
        nil when max_start > 0 -> {offset, [{start, max_start, stride} | dynamic]}
        nil -> {offset, dynamic}
        value -> {offset + min(max(value, 0), max_start) * stride, dynamic}
      end
    end)
    |> then(fn {offset, dynamic} -> {offset, Enum.reverse(dynamic)} end)
  end

  defp host_start(start) when is_integer(start), do: start
  defp host_start(%T{data: %__MODULE__{constant: value}}) when is_integer(value), do: value
  defp host_start(%T{data: %__MODULE__{}}), do: nil
  # A tensor of another backend is read where it lives, without touching the device.
  defp host_start(%T{} = start), do: Nx.to_number(start)

  defp dynamic_refs(dynamic),
    do: Enum.map(dynamic, fn {%T{type: type} = t, _, _} -> {ref!(t), type} end)

  # What the kernels cannot express (sub-byte types, more than 8 tensor starts, ranks beyond the
  # copy kernel's) goes to the host; other errors raise.
  defp fallback_unless_error(nil, op, args), do: fallback(op, args)
  defp fallback_unless_error({:error, {:unsupported, _}}, op, args), do: fallback(op, args)
  defp fallback_unless_error(error, _op, _args), do: Native.unwrap!(error)

  # The padded tensor's initial contents: the pad value everywhere, on `t`'s device (a number's
  # constant, or a scalar of another backend, is filled there; a device scalar is broadcast by a
  # view: its own device).
  defp pad_fill(out, %T{data: %__MODULE__{constant: value}}, t) when value != nil,
    do: fill_constant(out, value, [], device_of(t))

  defp pad_fill(%T{shape: out_shape} = out, %T{data: %__MODULE__{}} = pad_value, _t),
    do: view(out, pad_value, 0, List.duplicate(0, tuple_size(out_shape)))

  defp pad_fill(out, pad_value, t),
    do: fill_constant(out, Nx.to_number(pad_value), [], device_of(t))

  @impl true
  def pad(%T{shape: out_shape, type: type} = out, %T{shape: shape} = t, pad_value, config) do
    check_padded_shape!(out_shape, shape, config)

    with false <- zero_size?(out),
         bytes when bytes != nil <- move_bytes(type),
         # Fill by broadcasting the scalar pad value (stride 0 everywhere): no host round trip.
         %T{data: %__MODULE__{ref: dst}} <-
           pad_fill(out, cast(pad_value, type), t) do
      out_strides = contiguous_strides(out_shape)
      in_strides = contiguous_strides(shape)

      # Per axis: the input indices that land inside the output, and where they land.
      axes =
        for {{lo, _hi, interior}, d} <- Enum.with_index(config) do
          n = elem(shape, d)
          step = interior + 1
          first = if lo < 0, do: div(-lo + step - 1, step), else: 0
          last = min(n - 1, Integer.floor_div(elem(out_shape, d) - 1 - lo, step))
          {first, last - first + 1, lo + first * step, step, d}
        end

      if Enum.all?(axes, fn {_, count, _, _, _} -> count > 0 end) do
        src_offset =
          axes |> Enum.map(fn {first, _, _, _, d} -> first * elem(in_strides, d) end) |> Enum.sum()

        dst_offset =
          axes |> Enum.map(fn {_, _, pos, _, d} -> pos * elem(out_strides, d) end) |> Enum.sum()

        dims = Enum.map(axes, &elem(&1, 1))
        dst_strides = Enum.map(axes, fn {_, _, _, step, d} -> step * elem(out_strides, d) end)
        src_strides = Enum.map(axes, fn {_, _, _, _, d} -> elem(in_strides, d) end)

        Native.copy_into(
          bytes,
          dst,
          dst_offset,
          dst_strides,
          ref!(t),
          src_offset,
          src_strides,
          dims
        )
        |> Native.unwrap!()
      end

      wrap(dst, out)
    else
      true -> empty(out, tensors_device([t]))
      _ -> fallback(:pad, [out, t, pad_value, config])
    end
  end

  # Nx computes the padded shape without checking it: padding that removes more than an axis
  # holds leaves a negative size, which no backend can build (the BinaryBackend fails inside).
  defp check_padded_shape!(out_shape, shape, config) do
    case Enum.find_index(Tuple.to_list(out_shape), &(&1 < 0)) do
      nil ->
        :ok

      axis ->
        raise ArgumentError,
              "pad: the padding configuration #{inspect(config)} leaves axis #{axis} of shape " <>
                "#{inspect(shape)} with #{elem(out_shape, axis)} elements (negative padding " <>
                "can shrink an axis to 0 elements, not below)"
    end
  end

  @impl true
  def as_type(%T{type: type} = out, %T{type: type} = t), do: %{out | data: t.data}

  def as_type(%T{type: to} = out, %T{type: from, data: %__MODULE__{constant: value}} = t)
      when value != nil do
    if constant_cast?(from, to),
      do: constant(out, value, device: device_of(t)),
      else: as_type(out, %{t | data: %{t.data | constant: nil}})
  end

  def as_type(%T{type: to} = out, %T{type: from} = t) do
    Native.as_type(from, to, ref!(t), Nx.size(t)) |> result(out, :as_type, [out, t])
  end

  # Indices go to the device as s32 (s32 and narrower types; one cast fewer and half the index
  # traffic for a take with s32 indices) or s64; out-of-range indices are clamped (the
  # BinaryBackend raises).
  @impl true
  def gather(%T{type: type} = out, %T{} = t, %T{} = indices, opts) do
    if zero_size?(t) do
      raise ArgumentError,
            "gather: indices into a tensor of shape #{inspect(t.shape)}, which has no elements"
    end

    case move_bytes(type) do
      nil ->
        fallback(:gather, [out, t, indices, opts])

      bytes ->
        {indices, index_bytes} = gather_indices(indices)
        t = cast(t, type)

        Native.gather(
          bytes,
          ref!(t),
          shape_list(t),
          ref!(indices),
          index_bytes,
          shape_list(indices),
          opts[:axes]
        )
        |> result(out, :gather, [out, t, indices, opts])
    end
  end

  defp gather_indices(%T{type: {kind, bits}} = indices) when kind in [:s, :u] and bits < 32,
    do: {cast(indices, {:s, 32}), 4}

  defp gather_indices(%T{type: {:s, 32}} = indices), do: {indices, 4}

  # u64 values past s64's range would wrap to negatives (index 0) in the cast; they clamp to the
  # last index, as any value past it does.
  defp gather_indices(%T{type: {:u, 64}} = indices) do
    top =
      constant(%{indices | shape: {}}, 9_223_372_036_854_775_807, device: tensors_device([indices]))

    {cast(min(indices, indices, top), {:s, 64}), 8}
  end

  defp gather_indices(indices), do: {cast(indices, {:s, 64}), 8}

  # Deterministic scatters: each output element applies its updates in order (put: last wins).
  # Index tuples outside the target are skipped (the BinaryBackend raises).
  # Complex: indexed_add adds parts; indexed_put moves c64 as 8-byte words, c128 by parts.
  @impl true
  def indexed_add(%T{type: {:c, _}} = out, target, indices, updates, opts),
    do: complex_indexed(:indexed_add, out, target, indices, updates, opts)

  @impl true
  def indexed_put(%T{type: {:c, 64}} = out, target, indices, updates, opts) do
    words = %{out | type: {:u, 64}}
    target = cast(target, {:c, 64})
    updates = cast(updates, {:c, 64})

    indexed_put(words, %{target | type: {:u, 64}}, indices, %{updates | type: {:u, 64}}, opts)
    |> then(&%{out | data: &1.data})
  end

  def indexed_put(%T{type: {:c, 128}} = out, target, indices, updates, opts),
    do: complex_indexed(:indexed_put, out, target, indices, updates, opts)

  for {op, add?} <- [indexed_put: false, indexed_add: true] do
    @impl true
    # No updates (zero-size indices): the target as it is.
    def unquote(op)(%T{type: out_type} = out, target, indices, updates, opts) do
      if zero_size?(indices) or zero_size?(updates),
        do: %{out | data: cast(target, out_type).data},
        else: unquote(:"device_#{op}")(out, target, indices, updates, opts)
    end

    defp unquote(:"device_#{op}")(%T{type: out_type} = out, target, indices, updates, opts) do
      type = compute_type(out_type)
      target = cast(target, type)
      updates = cast(updates, type)
      indices = cast(indices, {:s, 64})

      Native.scatter(
        unquote(add?),
        type,
        ref!(target),
        shape_list(target),
        ref!(indices),
        shape_list(indices),
        ref!(updates),
        opts[:axes] || Nx.axes(target.shape)
      )
      |> result(%{out | type: type}, unquote(op), [out, target, indices, updates, opts])
      |> cast(out_type)
    end
  end

  ## Element-wise

  # The NIF knows which dtypes each op has on the device; the rest fall back with that reason.
  @device_unary [:negate, :abs, :sign, :floor, :ceil, :round, :exp, :expm1, :log, :log1p] ++
                  [:sqrt, :rsqrt, :tanh, :sigmoid, :bitwise_not, :count_leading_zeros] ++
                  [:population_count, :sin, :cos, :tan, :asin, :acos, :atan, :sinh, :cosh] ++
                  [:asinh, :acosh, :atanh, :cbrt, :erf, :erfc, :erf_inv]

  for op <- @device_unary do
    @impl true
    # Complex inputs (abs of c64 is f32, say): casting first would drop the imaginary part;
    # negate has a complex kernel, the others go to the host.
    def unquote(op)(out, %T{type: {:c, _}} = t), do: complex_unary(unquote(op), out, t)

    def unquote(op)(%T{type: type} = out, %T{} = t) do
      ct = compute_type(type)
      t = cast(t, ct)

      Native.unary_op(unquote(op), ct, ref!(t), Nx.size(t))
      |> result(with_type(out, ct), unquote(op), [out, t])
      |> cast(type)
    end
  end

  @device_arithmetic [:add, :subtract, :multiply, :divide, :max, :min, :pow, :quotient] ++
                       [:remainder, :bitwise_and, :bitwise_or, :bitwise_xor, :left_shift] ++
                       [:right_shift, :atan2]

  for op <- @device_arithmetic do
    @impl true
    def unquote(op)(%T{type: type} = out, %T{} = a, %T{} = b) do
      ct = compute_type(type)
      b = cast(b, ct)
      check = integer_operand_check(unquote(op), ct, b)

      binary_op(unquote(op), ct, with_type(out, ct), cast(a, ct), b)
      |> attach_check(check)
      |> cast(type)
    end
  end

  # Integer quotient/remainder by zero, pow with a negative exponent and shifts by a negative
  # amount raise, as in the BinaryBackend, rather than give a made-up value. A constant operand
  # is checked by its value, at once; any other by a reduction on the device, a deferred check
  # that raises at the next read of the result (or of anything computed from it).
  defp integer_operand_check(op, {kind, _}, b)
       when op in [:quotient, :remainder, :pow, :left_shift, :right_shift] and kind in [:s, :u] do
    division? = op in [:quotient, :remainder]

    case b.data do
      %__MODULE__{constant: value} when is_integer(value) ->
        if (division? and value == 0) or (not division? and value < 0) do
          {_, exception, message} = integer_operand_error(op)
          raise exception, String.replace(message, "{value}", Integer.to_string(value))
        end

        nil

      _ when division? ->
        b = on_device(b)
        zero = constant(%{b | shape: {}, names: []}, 0, device: device_of(b))
        {Nx.any(Nx.equal(b, zero)), integer_operand_error(op)}

      _ when kind == :s ->
        {Nx.reduce_min(on_device(b)), integer_operand_error(op)}

      _ ->
        nil
    end
  end

  defp integer_operand_check(_op, _type, _b), do: nil

  # {check's condition, exception, message}: `{value}` is the reduction's value.
  defp integer_operand_error(op) when op in [:quotient, :remainder],
    do: {:nonzero, ArithmeticError, "integer #{op} by zero (a divisor is 0)"}

  defp integer_operand_error(:pow),
    do: {:negative, ArithmeticError, "integer pow with a negative exponent ({value})"}

  defp integer_operand_error(:left_shift),
    do: {:negative, ArgumentError, "cannot left shift by {value}"}

  defp integer_operand_error(:right_shift),
    do: {:negative, ArgumentError, "cannot right shift by {value}"}

  # Deferred checks (checks.rs): `value` (an integer scalar on the device) decides whether the
  # op that made `result` must raise, at the next host read of result or of anything computed
  # from it; with Nx.Vulkan.put_check_mode(:immediate) it is read now (a host sync).
  defp attach_check(result, nil), do: result

  defp attach_check(
         %T{data: %__MODULE__{ref: ref}} = result,
         {value, {condition, exception, message}}
       ) do
    exception = if exception == ArithmeticError, do: :arithmetic, else: :argument

    Native.attach_check(ref, ref!(value), value.type, condition, exception, message)
    |> Native.unwrap!()

    if Nx.Vulkan.check_mode() == :immediate, do: Native.verify_checks(ref) |> Native.unwrap!()
    result
  end

  # A result the host fallback computed raised there already, or is right.
  defp attach_check(result, _check), do: result

  defp on_device(%T{data: %__MODULE__{}} = t), do: t
  defp on_device(%T{} = t), do: %{t | data: %__MODULE__{ref: ref!(t)}}

  @device_predicates [:equal, :not_equal, :greater, :less, :greater_equal, :less_equal] ++
                       [:logical_and, :logical_or, :logical_xor]

  for op <- @device_predicates do
    @impl true
    def unquote(op)(%T{} = out, %T{} = a, %T{} = b) do
      type = comparison_type(a, b)
      binary_op(unquote(op), type, out, cast(a, type), cast(b, type))
    end
  end

  # Comparisons run in the operands' merged type, but a constant that the other operand's type
  # holds exactly is cast to that type instead: `u8 > 100` then compares bytes rather than
  # widening a large tensor to s32 (the same answer, since the widening is exact and keeps order).
  defp comparison_type(%T{type: a_type} = a, %T{type: b_type} = b) do
    cond do
      a_type == b_type -> compute_type(a_type)
      holds_constant?(a_type, b) -> compute_type(a_type)
      holds_constant?(b_type, a) -> compute_type(b_type)
      true -> a_type |> Nx.Type.merge(b_type) |> compute_type()
    end
  end

  defp holds_constant?(type, %T{data: %__MODULE__{constant: value}}) when is_number(value) do
    case type do
      {:s, bits} ->
        is_integer(value) and value >= -Bitwise.bsl(1, bits - 1) and
          value < Bitwise.bsl(1, bits - 1)

      {:u, bits} ->
        is_integer(value) and value >= 0 and value < Bitwise.bsl(1, bits)

      {:f, 64} ->
        abs(value) <= 9_007_199_254_740_992 or is_float(value)

      {:f, 32} ->
        f32_exact?(value)

      _ ->
        false
    end
  end

  defp holds_constant?(_type, _t), do: false

  defp f32_exact?(value) do
    <<narrowed::float-32>> = <<value::float-32>>
    narrowed == value
  rescue
    _ -> false
  end

  defp binary_op(op, type, out, a, b) do
    Native.binary_op(op, type, ref!(a), a.shape, ref!(b), b.shape, out.shape)
    |> result(out, op, [out, a, b])
  end

  @impl true
  def select(%T{type: type} = out, %T{type: {:u, 8}} = pred, on_true, on_false) do
    on_true = cast(on_true, type)
    on_false = cast(on_false, type)

    case move_bytes(type) do
      nil ->
        fallback(:select, [out, pred, on_true, on_false])

      bytes ->
        Native.select(
          bytes,
          ref!(pred),
          shape_list(pred),
          ref!(on_true),
          shape_list(on_true),
          ref!(on_false),
          shape_list(on_false),
          shape_list(out)
        )
        |> result(out, :select, [out, pred, on_true, on_false])
    end
  end

  def select(out, pred, on_true, on_false) do
    # Any other predicate type: compare with zero on the device first.
    zero = constant(%{pred | shape: {}}, 0, device: tensors_device([pred]))
    select(out, not_equal(%{pred | type: {:u, 8}}, pred, zero), on_true, on_false)
  end

  @impl true
  def clip(%T{} = out, t, min, max) do
    max(out, min(out, t, max), min)
  end

  ## Aggregates

  @impl true
  def sum(%T{type: {:c, _}} = out, t, opts), do: complex_sum(out, t, opts)

  @impl true
  def product(%T{type: {:c, _}} = out, t, opts), do: complex_product(out, t, opts)

  # Over an empty axis (a zero-size input, a non-empty output) a reduction is its identity, as
  # in XLA: 0, 1, the type's lowest and highest value (the BinaryBackend fails inside).
  defp reduction_identity(:sum, _type), do: 0
  defp reduction_identity(:product, _type), do: 1

  defp reduction_identity(:reduce_max, type),
    do: type |> Nx.Constants.min(backend: Nx.BinaryBackend) |> Nx.to_number()

  defp reduction_identity(:reduce_min, type),
    do: type |> Nx.Constants.max(backend: Nx.BinaryBackend) |> Nx.to_number()

  for op <- [:sum, :product, :reduce_max, :reduce_min] do
    @impl true
    def unquote(op)(%T{type: type} = out, %T{} = t, opts) do
      if zero_size?(t),
        do: constant(out, reduction_identity(unquote(op), type), device: tensors_device([t])),
        else: reduce_on_device(unquote(op), out, t, opts)
    end
  end

  defp reduce_on_device(op, %T{type: type} = out, %T{shape: shape} = t, opts) do
    axes = opts[:axes] || Nx.axes(shape)
    ct = compute_type(type)

    if axes != [] and widened_bytes(t, ct) > binding_limit(),
      do: blocked_reduce(op, out, t, axes, ct),
      else: widen_and_reduce(op, out, t, axes, ct)
  end

  defp widen_and_reduce(op, %T{type: type} = out, t, axes, ct) do
    t = cast(t, ct)

    Native.reduce(op, ct, ref!(t), shape_list(t), axes)
    |> result(with_type(out, ct), op, [out, t, [axes: axes]])
    |> cast(type)
  end

  defp widened_bytes(%T{type: type} = t, {_, bits} = ct),
    do: if(type == ct, do: 0, else: Nx.size(t) * div(bits, 8))

  defp binding_limit, do: Nx.Vulkan.Device.info().max_storage_buffer_range

  # An operand whose copy widened to the result type would not fit one binding (the sum of a u8
  # tensor is u32: 4x its size) is reduced in blocks of rows and columns of its
  # [kept, reduced] matrix, each widened on its own; the column blocks' partial results are then
  # combined. Integer sums and products wrap the same in any order; float ones (f16 to f32) take
  # an order fixed by the shape and the device's binding limit.
  defp blocked_reduce(op, %T{shape: out_shape, type: type} = out, %T{shape: shape} = t, axes, ct) do
    {_, bits} = ct
    len = reduced_length(shape, axes)
    rows = div(Nx.size(shape), len)
    fit = max(div(binding_limit(), div(bits, 8)), 1)
    row_block = min(rows, fit)
    column_block = max(div(fit, row_block), 1)
    combine = if op == :sum, do: &Nx.add/2, else: &Nx.multiply/2

    with_device_of([t], fn ->
      matrix = kept_by_reduced(t, axes)

      row_results =
        for row <- 0..(rows - 1)//row_block do
          block = Nx.slice_along_axis(matrix, row, min(row_block, rows - row), axis: 0)

          for column <- 0..(len - 1)//column_block do
            part = Nx.slice_along_axis(block, column, min(column_block, len - column), axis: 1)
            part_out = %{out | shape: {Nx.axis_size(part, 0)}, names: [nil], type: ct}
            widen_and_reduce(op, part_out, part, [1], ct)
          end
          |> Enum.reduce(&combine.(&2, &1))
        end

      reduced = if length(row_results) == 1, do: hd(row_results), else: Nx.concatenate(row_results)
      %{out | data: reduced |> Nx.reshape(out_shape) |> cast(type) |> Map.fetch!(:data)}
    end)
  end

  # A zero-size input with padding: every window holds padding only, the reduction's identity.
  for {op, reduction} <-
        [window_sum: :sum, window_product: :product] ++
          [window_max: :reduce_max, window_min: :reduce_min] do
    @impl true
    def unquote(op)(%T{type: type} = out, %T{} = t, window, opts) do
      if zero_size?(t),
        do:
          constant(out, reduction_identity(unquote(reduction), type), device: tensors_device([t])),
        else: unquote(:"device_#{op}")(out, t, window, opts)
    end

    defp unquote(:"device_#{op}")(%T{type: type} = out, %T{} = t, window, opts) do
      ct = compute_type(type)
      t = cast(t, ct)
      rank = tuple_size(window)
      pad_low = Enum.map(opts[:padding] || List.duplicate({0, 0}, rank), &elem(&1, 0))
      strides = opts[:strides] || List.duplicate(1, rank)
      dilations = opts[:window_dilations] || List.duplicate(1, rank)

      Native.window_reduce(
        unquote(op),
        ct,
        ref!(t),
        shape_list(t),
        shape_list(out),
        Tuple.to_list(window),
        strides,
        pad_low,
        dilations
      )
      |> result(with_type(out, ct), unquote(op), [out, t, window, opts])
      |> cast(type)
    end
  end

  for {op, min?} <- [window_scatter_max: false, window_scatter_min: true] do
    @impl true
    def unquote(op)(%T{type: type} = out, t, source, init_value, window, opts) do
      ct = compute_type(type)
      t = cast(t, ct)
      source = cast(source, ct)
      init_value = cast(init_value, ct)
      pad_low = Enum.map(opts[:padding], &elem(&1, 0))

      Native.window_scatter(
        unquote(min?),
        ct,
        ref!(t),
        shape_list(t),
        ref!(source),
        shape_list(source),
        ref!(init_value),
        Tuple.to_list(window),
        opts[:strides],
        pad_low
      )
      |> result(with_type(out, ct), unquote(op), [out, t, source, init_value, window, opts])
      |> cast(type)
    end
  end

  # all/any: a comparison with zero (NaN counts as true), then min/max over the same axes, in u8.
  @impl true
  def all(out, t, opts), do: logical_reduce(:reduce_min, out, t, opts)

  @impl true
  def any(out, t, opts), do: logical_reduce(:reduce_max, out, t, opts)

  # Over an empty axis: all is true, any false.
  defp logical_reduce(op, %T{} = out, %T{shape: shape} = t, opts) do
    if zero_size?(t),
      do: constant(out, if(op == :reduce_min, do: 1, else: 0), device: tensors_device([t])),
      else: logical_reduce_on_device(op, out, t, shape, opts)
  end

  defp logical_reduce_on_device(op, out, t, shape, opts) do
    zero = constant(%{t | shape: {}}, 0, device: tensors_device([t]))
    nonzero = not_equal(%{t | type: {:u, 8}}, t, zero)
    apply(__MODULE__, op, [%{out | type: {:u, 8}}, nonzero, [axes: opts[:axes] || Nx.axes(shape)]])
  end

  for op <- [:argmax, :argmin] do
    @impl true
    def unquote(op)(%T{type: {_, bits} = out_type} = out, %T{shape: shape, type: type} = t, opts) do
      if zero_size?(t) do
        raise ArgumentError,
              "#{unquote(op)} of a tensor of shape #{inspect(shape)}: an empty axis has no index"
      end

      type = compute_type(type)
      t = cast(t, type)
      axes = if opts[:axis], do: [opts[:axis]], else: Nx.axes(shape)
      index_bytes = if bits == 64, do: 8, else: 4
      index_type = if bits == 64, do: out_type, else: {:s, 32}

      Native.arg_reduce(
        unquote(op),
        type,
        ref!(t),
        shape_list(t),
        axes,
        opts[:tie_break] == :high,
        index_bytes
      )
      |> result(%{out | type: index_type}, unquote(op), [out, t, opts])
      |> cast(out_type)
    end
  end

  # Stable; NaN sorts as the largest value, as in the BinaryBackend.
  @impl true
  def sort(%T{} = out, %T{shape: shape, type: type} = t, opts) do
    ct = compute_type(type)
    t = cast(t, ct)

    Native.sort(
      ct,
      ref!(t),
      shape_list(t),
      opts[:axis] || max(tuple_size(shape) - 1, 0),
      opts[:direction] == :desc,
      false,
      0
    )
    |> result(with_type(out, ct), :sort, [out, t, opts])
    |> cast(type)
  end

  @impl true
  def argsort(%T{type: {_, bits} = out_type} = out, %T{shape: shape, type: type} = t, opts) do
    type = compute_type(type)
    t = cast(t, type)
    {index_bytes, index_type} = if bits == 64, do: {8, out_type}, else: {4, {:s, 32}}
    axis = opts[:axis] || max(tuple_size(shape) - 1, 0)

    Native.sort(type, ref!(t), shape_list(t), axis, opts[:direction] == :desc, true, index_bytes)
    |> result(%{out | type: index_type}, :argsort, [out, t, opts])
    |> cast(out_type)
  end

  # Complex inputs: every unary op Nx allows on complex numbers has a kernel (erf, erfc and
  # erf_inv are real-only in Nx).
  @complex_unary [:negate, :conjugate, :sqrt, :exp, :log, :expm1, :log1p, :sigmoid, :sin] ++
                   [:cos, :tan, :sinh, :cosh, :tanh, :asin, :acos, :atan, :asinh, :acosh] ++
                   [:atanh, :rsqrt, :cbrt]

  defp complex_unary(op, %T{type: {:c, _}} = out, %T{type: type} = t)
       when op in @complex_unary do
    Native.complex_unary(op, type, ref!(t), Nx.size(t)) |> result(out, op, [out, t])
  end

  defp complex_unary(:abs, out, %T{type: type} = t) do
    Native.complex_real(:abs, type, ref!(t), Nx.size(t)) |> result(out, :abs, [out, t])
  end

  defp complex_unary(op, out, t), do: Fallback.run(op, "complex input", [out, t])

  @impl true
  def conjugate(%T{type: {:c, _}} = out, %T{type: {:c, _}} = t),
    do: complex_unary(:conjugate, out, t)

  # A real input becomes (x, -0.0), as on the BinaryBackend.
  def conjugate(out, t), do: complex_unary(:conjugate, out, as_type(out, t))

  # real/imag of complex tensors are strided views of their float halves.
  @impl true
  def real(out, %T{type: {:c, _}} = t), do: complex_part(out, t, 0, :real)
  def real(out, t), do: cast(t, out.type) |> then(&%{out | data: &1.data})

  @impl true
  def imag(out, %T{type: {:c, _}} = t), do: complex_part(out, t, 1, :imag)
  def imag(out, t), do: constant(out, 0, device: tensors_device([t]))

  defp complex_part(out, %T{shape: shape} = t, offset, op) do
    strides = shape |> contiguous_strides() |> Tuple.to_list() |> Enum.map(&(&1 * 2))
    view(out, t, offset, strides) || fallback(op, [out, t])
  end

  @impl true
  def is_nan(out, t), do: classify(:is_nan, out, t)

  @impl true
  def is_infinity(out, t), do: classify(:is_infinity, out, t)

  # Integers are never NaN or infinite; complex inputs go to the host.
  defp classify(_op, out, %T{type: {kind, _}} = t) when kind in [:s, :u],
    do: constant(out, 0, device: tensors_device([t]))

  defp classify(op, out, %T{type: {:c, _} = type} = t) do
    Native.complex_real(op, type, ref!(t), Nx.size(t)) |> result(out, op, [out, t])
  end

  defp classify(op, out, %T{type: type} = t) do
    type = compute_type(type)
    t = cast(t, type)
    Native.classify(op, type, ref!(t), Nx.size(t)) |> result(out, op, [out, t])
  end

  @impl true
  def dot(%T{type: {:c, _}} = out, a, a_contract, a_batch, b, b_contract, b_batch) do
    with_device_of([a, b], fn ->
      real = part_type(out)
      {ar, ai} = parts(a, real)
      {br, bi} = parts(b, real)
      d = &Nx.dot(&1, a_contract, a_batch, &2, b_contract, b_batch)
      join(out, Nx.subtract(d.(ar, br), d.(ai, bi)), Nx.add(d.(ar, bi), d.(ai, br)))
    end)
  end

  # Contracting an empty axis (zero-size operands, a non-empty result) sums nothing: zeros.
  def dot(out, a, a_contract, a_batch, b, b_contract, b_batch) do
    if zero_size?(a) or zero_size?(b),
      do: constant(out, 0, device: tensors_device([a, b])),
      else: device_dot(out, a, a_contract, a_batch, b, b_contract, b_batch)
  end

  # bf16 by bf16 goes to the device as bf16 (ops/matmul.rs: the f16 tensor cores where it can,
  # else through f32 there); other bf16 results from their f32 GEMM.
  defp device_dot(%T{type: out_type} = out, a, a_contract, a_batch, b, b_contract, b_batch) do
    type =
      if out_type == {:bf, 16} and a.type == out_type and b.type == out_type,
        do: out_type,
        else: compute_type(out_type)

    a = cast(a, type)
    b = cast(b, type)

    Native.dot(
      type,
      ref!(a),
      shape_list(a),
      a_contract,
      a_batch,
      ref!(b),
      shape_list(b),
      b_contract,
      b_batch
    )
    |> result(%{out | type: type}, :dot, [out, a, a_contract, a_batch, b, b_contract, b_batch])
    |> cast(out_type)
  end

  # The BinaryBackend's formulation (transposes and reversals become strides and the direction
  # of substitution). A zero on the diagonal raises, as there, through a deferred check: at the
  # next read of the result.
  @impl true
  def triangular_solve(
        %T{type: out_type} = out,
        %T{shape: a_shape} = a,
        %T{shape: b_shape} = b,
        opts
      ) do
    type = compute_type(out_type)
    a = cast(a, type)
    b = cast(b, type)
    rank = tuple_size(a_shape)
    n = elem(a_shape, rank - 1)
    batches = div(Nx.size(a_shape), n * n)
    left? = Keyword.get(opts, :left_side, true)
    lower? = Keyword.get(opts, :lower, true)
    transpose? = opts[:transform_a] == :transpose
    a_batch = a_shape |> Tuple.to_list() |> Enum.drop(-2)
    vector? = tuple_size(b_shape) == 1 or Enum.drop(Tuple.to_list(b_shape), -1) == a_batch
    transpose_b? = not left? and not vector?
    per_batch = div(Nx.size(b_shape), batches)
    cols = div(per_batch, n)

    b_strides =
      cond do
        vector? -> {1, 0}
        transpose_b? -> {1, n}
        true -> {cols, 1}
      end

    zero = constant(%{a | shape: {}, names: []}, 0, device: tensors_device([a]))
    singular = a |> Nx.take_diagonal() |> Nx.equal(zero) |> Nx.any()

    Native.triangular_solve(
      type,
      ref!(a),
      ref!(b),
      n,
      cols,
      batches,
      left? == (lower? == transpose?),
      if(left? == transpose?, do: {1, n}, else: {n, 1}),
      b_strides
    )
    |> result(%{out | type: type}, :triangular_solve, [out, a, b, opts])
    |> attach_check({singular, {:nonzero, ArgumentError, "can't solve for singular matrix"}})
    |> cast(out_type)
  end

  # conv as im2col on the device: pad/dilate with pad, gather every window into one patches
  # tensor with a single strided copy, then one batched dot (the feature groups as its batch).
  # Sums run in the dot's order, not the BinaryBackend's.
  @impl true
  def conv(%T{type: {:c, _}} = out, t, k, opts) do
    with_device_of([t, k], fn ->
      real = part_type(out)
      {tr, ti} = parts(t, real)
      {kr, ki} = parts(k, real)

      opts =
        Keyword.take(
          opts,
          [:strides, :padding, :input_dilation, :kernel_dilation] ++
            [:feature_group_size, :batch_group_size, :input_permutation] ++
            [:kernel_permutation, :output_permutation]
        )

      c = &Nx.conv(&1, &2, opts)
      join(out, Nx.subtract(c.(tr, kr), c.(ti, ki)), Nx.add(c.(tr, ki), c.(ti, kr)))
    end)
  end

  def conv(out, t, k, opts) do
    with_device_of([t, k], fn ->
      if opts[:batch_group_size] == 1,
        do: im2col_conv(out, t, k, opts),
        else: batch_grouped_conv(out, t, k, opts)
    end)
  end

  # Batch groups (as XLA and the BinaryBackend define them): group g convolves input batches
  # g * n/G ... with output features g * f/G ..., and output batch i gathers every group's
  # features for batch i of each group. One ungrouped conv per group, joined along features.
  defp batch_grouped_conv(%T{type: type} = out, input, kernel, opts) do
    groups = opts[:batch_group_size]
    t = input |> Nx.rename(nil) |> Nx.transpose(axes: opts[:input_permutation])
    k = kernel |> Nx.rename(nil) |> Nx.transpose(axes: opts[:kernel_permutation])
    n = div(elem(t.shape, 0), groups)
    f = div(elem(k.shape, 0), groups)

    conv_opts =
      Keyword.take(opts, [:strides, :padding, :input_dilation, :kernel_dilation]) ++
        [feature_group_size: opts[:feature_group_size]]

    result =
      for g <- 0..(groups - 1) do
        Nx.conv(
          Nx.slice_along_axis(t, g * n, n, axis: 0),
          Nx.slice_along_axis(k, g * f, f, axis: 0),
          conv_opts
        )
      end
      |> Nx.concatenate(axis: 1)
      |> cast(type)
      |> Nx.transpose(axes: inverse_permutation(opts[:output_permutation]))

    %{out | data: result.data}
  end

  defp inverse_permutation(axes),
    do: axes |> Enum.with_index() |> Enum.sort() |> Enum.map(&elem(&1, 1))

  defp im2col_conv(%T{type: type} = out, input, kernel, opts) do
    t = input |> cast(type) |> Nx.rename(nil) |> Nx.transpose(axes: opts[:input_permutation])
    k = kernel |> cast(type) |> Nx.rename(nil) |> Nx.transpose(axes: opts[:kernel_permutation])

    if implicit_conv?(out, t, k, opts),
      do: implicit_conv(out, t, k, {input, kernel}, opts),
      else: patches_conv(out, t, k, {input, kernel}, opts)
  end

  # The implicit-GEMM kernel takes 2-D f32/f16 convs without input dilation whose groups have
  # at least 32 output features (its blocks are 64 features tall; depthwise convs stay on
  # im2col), where the policy says so (GPUs; see Nx.Vulkan.Device.configure!/0).
  defp implicit_conv?(%T{type: type}, %T{shape: shape} = t, k, opts) do
    type in [{:f, 32}, {:f, 16}] and tuple_size(shape) == 4 and
      Enum.all?(opts[:input_dilation], &(&1 == 1)) and Nx.size(t) > 0 and
      div(elem(k.shape, 0), opts[:feature_group_size]) >= 32 and
      Nx.Vulkan.Device.implicit_conv?()
  end

  defp implicit_conv(%T{type: type} = out, t, k, {input, kernel}, opts) do
    {n, c, h, w} = t.shape
    {f, cg, kh, kw} = k.shape
    [{lo_h, hi_h}, {lo_w, hi_w}] = opts[:padding]
    [dh, dw] = opts[:kernel_dilation]
    [sh, sw] = opts[:strides]
    oh = div(h + lo_h + hi_h - ((kh - 1) * dh + 1), sh) + 1
    ow = div(w + lo_w + hi_w - ((kw - 1) * dw + 1), sw) + 1
    # Each output sums its products in (kh, kw, channel) order: the weights in that order.
    weights = Nx.transpose(k, axes: [0, 2, 3, 1])
    nchw = %T{type: type, shape: {n, f, oh, ow}, names: [nil, nil, nil, nil]}

    result =
      Native.conv2d(
        type,
        ref!(t),
        [n, c, h, w],
        ref!(weights),
        [f, kh, kw],
        div(c, cg),
        [sh, sw],
        [lo_h, lo_w],
        [dh, dw],
        [oh, ow]
      )
      |> result(nchw, :conv, [out, input, kernel, opts])

    result = Nx.transpose(result, axes: inverse_permutation(opts[:output_permutation]))
    %{out | data: result.data}
  end

  defp patches_conv(%T{type: type} = out, t, k, {input, kernel}, opts) do
    zero = constant(%T{type: type, shape: {}, names: []}, 0, device: tensors_device([t, k]))
    k = Nx.pad(k, zero, [{0, 0, 0}, {0, 0, 0} | Enum.map(opts[:kernel_dilation], &{0, 0, &1 - 1})])

    spatial_padding =
      Enum.zip_with(opts[:padding], opts[:input_dilation], fn {lo, hi}, d -> {lo, hi, d - 1} end)

    p = Nx.pad(t, zero, [{0, 0, 0}, {0, 0, 0} | spatial_padding])
    [n, c | spatial] = Tuple.to_list(p.shape)
    [f, cg | kspatial] = Tuple.to_list(k.shape)
    groups = div(c, cg)
    strides = opts[:strides]

    out_spatial =
      Enum.zip_with([spatial, kspatial, strides], fn [s, kd, st] -> div(s - kd, st) + 1 end)

    [s_n, s_c | s_spatial] = p.shape |> contiguous_strides() |> Tuple.to_list()

    # patches[g, n, o..., c, k...] = p[n, g * cg + c, o * stride + k]
    dims = [groups, n | out_spatial] ++ [cg | kspatial]

    view_strides =
      [cg * s_c, s_n | Enum.zip_with(s_spatial, strides, &(&1 * &2))] ++ [s_c | s_spatial]

    os = Enum.product(out_spatial)
    ks = Enum.product(kspatial)

    template = %T{type: type, shape: List.to_tuple(dims), names: List.duplicate(nil, length(dims))}

    case view(template, p, 0, view_strides) do
      nil ->
        Fallback.run(:conv, "its window view exceeds the strided copy's rank", [
          out,
          input,
          kernel,
          opts
        ])

      patches ->
        im2col_dot(out, patches, k, {n, f, groups, cg, out_spatial, os, ks}, opts)
    end
  end

  defp im2col_dot(
         %T{shape: out_shape} = out,
         patches,
         k,
         {n, f, groups, cg, out_spatial, os, ks},
         opts
       ) do
    patches = Nx.reshape(patches, {groups, n * os, cg * ks})
    kernel = Nx.reshape(k, {groups, div(f, groups), cg * ks})
    spatial_axes = Enum.to_list(2..(length(out_spatial) + 1)//1)

    # {groups, n * os, f / groups} -> {n, groups, f / groups, o...} -> {n, f, o...}
    result =
      patches
      |> Nx.dot([2], [0], kernel, [2], [0])
      |> Nx.reshape(List.to_tuple([groups, n | out_spatial] ++ [div(f, groups)]))
      |> Nx.transpose(axes: [1, 0, length(out_spatial) + 2] ++ spatial_axes)
      |> Nx.reshape(List.to_tuple([n, f | out_spatial]))

    result = Nx.transpose(result, axes: inverse_permutation(opts[:output_permutation]))
    %{out | data: result.data, shape: out_shape}
  end

  ## Complex input through real parts

  # Sums, dots, convolutions and indexed updates of complex tensors are real ones of their parts,
  # computed in f64 where the device has it (the BinaryBackend does complex math in f64) and
  # rounded once to the output type; products fold pairwise in c128.
  defp part_type(%T{type: {:c, 128}}), do: {:f, 64}
  defp part_type(_out), do: if(Nx.Vulkan.Device.info().float64, do: {:f, 64}, else: {:f, 32})

  defp parts(%T{type: {:c, bits}, shape: shape} = t, real) do
    part = %T{type: {:f, div(bits, 2)}, shape: shape, names: List.duplicate(nil, tuple_size(shape))}
    {complex_part(part, t, 0, :real) |> cast(real), complex_part(part, t, 1, :imag) |> cast(real)}
  end

  defp parts(%T{} = t, real), do: parts(cast(t, {:c, 128}), real)

  # re and im stacked on a new last axis are complex data of twice their width.
  defp join(%T{type: type, shape: shape} = out, %T{type: {:f, bits}} = re, im) do
    pair = Nx.stack([Nx.rename(re, nil), Nx.rename(im, nil)], axis: -1)

    %{out | data: pair.data, type: {:c, 2 * bits}, shape: shape}
    |> cast(type)
    |> then(&%{out | data: &1.data})
  end

  defp complex_sum(out, t, opts) do
    with_device_of([t], fn ->
      {re, im} = parts(t, part_type(out))
      sum_opts = [axes: opts[:axes], keep_axes: opts[:keep_axes] || false]
      join(out, Nx.sum(re, sum_opts), Nx.sum(im, sum_opts))
    end)
  end

  # Pairwise: each round multiplies the first half of the reduced elements by the second.
  # Over an empty axis: 1.
  defp complex_product(%T{shape: out_shape, type: type} = out, %T{shape: shape} = t, opts) do
    axes = opts[:axes] || Nx.axes(shape)
    len = reduced_length(shape, axes)

    if len == 0 do
      constant(out, 1, device: tensors_device([t]))
    else
      with_device_of([t], fn ->
        result = t |> cast({:c, 128}) |> kept_by_reduced(axes) |> fold_product(len)
        %{out | data: result |> Nx.reshape(out_shape) |> cast(type) |> Map.fetch!(:data)}
      end)
    end
  end

  defp reduced_length(shape, axes), do: axes |> Enum.map(&elem(shape, &1)) |> Enum.product()

  # `t` as a [kept, reduced] matrix: one row per output of a reduction over `axes` (called with
  # this backend as the default).
  defp kept_by_reduced(%T{shape: shape} = t, axes) do
    kept = Enum.reject(Nx.axes(shape), &(&1 in axes))
    len = reduced_length(shape, axes)

    t
    |> Nx.rename(nil)
    |> Nx.transpose(axes: kept ++ axes)
    |> Nx.reshape({div(Nx.size(shape), len), len})
  end

  # The BinaryBackend folds from the identity: 1 * z1 first, which turns an infinite part of z1
  # into NaN (0 * Inf) and can flip a zero's sign, so the first factor takes that step too.
  defp fold_product(x, len) do
    one = Nx.tensor(1, type: x.type)
    first = Nx.multiply(one, Nx.slice_along_axis(x, 0, 1, axis: 1))

    x =
      if len == 1,
        do: first,
        else: Nx.concatenate([first, Nx.slice_along_axis(x, 1, len - 1, axis: 1)], axis: 1)

    fold_pairs(x, len)
  end

  defp fold_pairs(x, 1), do: x

  defp fold_pairs(x, len) do
    half = div(len, 2)

    paired =
      Nx.multiply(
        Nx.slice_along_axis(x, 0, half, axis: 1),
        Nx.slice_along_axis(x, half, half, axis: 1)
      )

    if rem(len, 2) == 1,
      do:
        fold_pairs(
          Nx.concatenate([paired, Nx.slice_along_axis(x, len - 1, 1, axis: 1)], axis: 1),
          half + 1
        ),
      else: fold_pairs(paired, half)
  end

  defp complex_indexed(op, out, target, indices, updates, opts) do
    with_device_of([target, indices, updates], fn ->
      real = part_type(out)
      {tr, ti} = parts(target, real)
      {ur, ui} = parts(updates, real)
      apply_opts = [axes: opts[:axes] || Nx.axes(target.shape)]
      f = &apply(Nx, op, [&1, indices, &2, apply_opts])
      join(out, f.(tr, ur), f.(ti, ui))
    end)
  end

  ## reduce and window_reduce with Elixir functions

  # The function is folded over the reduced elements in the BinaryBackend's order, one element
  # position at a time, and applied to every output position at once: its arguments are
  # vectorized scalars (Nx.vectorize), so it sees per position exactly what it sees on the host,
  # one scalar. The host keeps functions compiled by Nx.Defn (the Evaluator's closures call
  # backend callbacks directly, which vectorization does not reach), folds longer than
  # @max_fold steps (one step is a dispatch or more), and any function that fails on tensors or
  # leaves the device (then it runs again, on the host).
  @max_fold 256
  @fold_axis :nx_vulkan_fold

  @impl true
  def reduce(%T{} = out, %T{shape: shape} = t, acc, opts, fun) do
    # Row-major over the reduced axes in ascending order, as the BinaryBackend walks them.
    axes = Enum.sort(opts[:axes] || Nx.axes(shape))
    kept = Enum.reject(Nx.axes(shape), &(&1 in axes))
    len = axes |> Enum.map(&elem(shape, &1)) |> Enum.product()

    device_fold(out, len, acc, fun, [out, t, acc, opts, fun], :reduce, fn positions ->
      x = t |> Nx.rename(nil) |> Nx.transpose(axes: axes ++ kept) |> Nx.reshape({len, positions})
      fn i -> x |> Nx.slice_along_axis(i, 1, axis: 0) |> Nx.reshape({positions}) end
    end)
  end

  @impl true
  def window_reduce(%T{shape: out_shape} = out, %T{} = t, acc, window, opts, fun) do
    offsets = window |> Tuple.to_list() |> Enum.map(&Enum.to_list(0..(&1 - 1)//1)) |> cartesian()
    dilations = opts[:window_dilations]

    device_fold(
      out,
      length(offsets),
      acc,
      fun,
      [out, t, acc, window, opts, fun],
      :window_reduce,
      fn positions ->
        padded =
          t
          |> Nx.rename(nil)
          |> Nx.pad(acc, Enum.map(opts[:padding], fn {lo, hi} -> {lo, hi, 0} end))

        # Offset i of every window: a strided slice spanning (out - 1) strides per axis.
        spans = out_shape |> Tuple.to_list() |> Enum.zip_with(opts[:strides], &((&1 - 1) * &2 + 1))

        fn i ->
          starts = offsets |> Enum.at(i) |> Enum.zip_with(dilations, &(&1 * &2))

          padded
          |> Nx.slice(starts, spans, strides: opts[:strides])
          |> Nx.reshape({positions})
        end
      end
    )
  end

  defp cartesian([]), do: [[]]
  defp cartesian([values | rest]), do: for(v <- values, tail <- cartesian(rest), do: [v | tail])

  # `columns.(positions)` returns `column.(i)`, the i-th folded element of every output position.
  defp device_fold(out, steps, acc, fun, args, op, columns) do
    reason =
      cond do
        not elixir_fun?(fun) ->
          "the reduction function is compiled by Nx.Defn (it calls backend callbacks directly)"

        steps > @max_fold ->
          "a fold of #{steps} steps (more than #{@max_fold}, each a dispatch or more)"

        true ->
          nil
      end

    case reason || fold(out, steps, acc, fun, columns, tensors_device(args)) do
      %T{} = result -> result
      reason -> Fallback.run(op, reason, args)
    end
  end

  defp fold(%T{shape: out_shape, type: type} = out, steps, acc, fun, columns, device) do
    positions = Nx.size(out_shape)

    Nx.with_default_backend({__MODULE__, device: device}, fn ->
      acc = Nx.backend_transfer(acc, {__MODULE__, device: device})
      column = columns.(positions)

      folded =
        Enum.reduce(0..(steps - 1)//1, acc, fn i, acc ->
          fun.(Nx.vectorize(column.(i), @fold_axis), acc)
        end)

      case Nx.to_tensor(folded) do
        %T{shape: {}, vectorized_axes: axes, data: %__MODULE__{}} = folded
        when axes in [[], [{@fold_axis, positions}]] ->
          folded
          |> Nx.devectorize(keep_names: false)
          |> Nx.broadcast({positions})
          |> cast(type)
          |> Nx.reshape(out_shape)
          |> then(&%{out | data: &1.data})

        _ ->
          "the reduction function does not return a scalar on the device"
      end
    end)
  rescue
    _ -> "the reduction function does not take vectorized tensors"
  end

  defp elixir_fun?(fun) do
    {:module, module} = Function.info(fun, :module)
    not String.starts_with?(Atom.to_string(module), "Elixir.Nx.Defn")
  end

  ## Fourier transforms

  # Along `axis`: moved last, padded or sliced to `length`, cast to c128; the NIF computes as
  # the BinaryBackend does (radix-2 with DFT leaves, Bluestein beyond) in f64, and the result is
  # rounded to the output type once, as there.
  for {op, inverse?} <- [fft: false, ifft: true] do
    @impl true
    def unquote(op)(%T{type: type, shape: out_shape} = out, %T{shape: shape} = t, opts) do
      n = opts[:length]
      axis = opts[:axis]
      last = tuple_size(shape) - 1

      perm =
        Enum.map(0..last, fn
          ^axis -> last
          ^last -> axis
          ax -> ax
        end)

      with_device_of([t], fn ->
        x = t |> cast({:c, 128}) |> Nx.rename(nil) |> Nx.transpose(axes: perm)
        len = elem(x.shape, last)

        x =
          cond do
            len < n -> Nx.pad(x, 0, List.duplicate({0, 0, 0}, last) ++ [{0, n - len, 0}])
            len > n -> Nx.slice_along_axis(x, 0, n, axis: last)
            true -> x
          end

        rows = div(Nx.size(x), n)

        with true <- rows > 0,
             {:ok, ref} <- Native.fft(unquote(inverse?), rows, n, ref!(x), opts[:eps] * 1.0) do
          result = ref |> wrap(x) |> cast(type) |> Nx.transpose(axes: perm)
          %{out | data: result.data, shape: out_shape}
        else
          false -> constant(out, 0, device: tensors_device([t]))
          error -> result(error, out, unquote(op), [out, t, opts])
        end
      end)
    end
  end

  ## Block

  # Nx's default implementations (defn functions: cumulative ops, linear algebra...) make tensors
  # with the process's default backend: on the device of the block's tensors.
  @impl true
  def block(struct, _output, args, fun) do
    device = tensors_device(args)

    if device == Nx.Vulkan.Device.default_index(),
      do: apply(fun, [struct | args]),
      else:
        Nx.with_default_backend({__MODULE__, device: device}, fn -> apply(fun, [struct | args]) end)
  end

  ## Everything else: the host fallback (listed in the README's coverage table)

  device_unary = @device_unary

  host_unary =
    (Enum.map(Nx.Shared.unary_math_funs(), &elem(&1, 0)) ++
       [:abs, :bitwise_not, :ceil, :conjugate, :floor, :negate, :round, :sign] ++
       [:count_leading_zeros, :population_count, :real, :imag])
    |> Enum.uniq()
    |> Kernel.--(device_unary ++ [:real, :imag, :conjugate])

  host_ops = Enum.map(host_unary, &{&1, 2, "no device kernel yet"})

  for {op, arity, reason} <- host_ops do
    args = Macro.generate_arguments(arity, __MODULE__)

    @impl true
    def unquote(op)(unquote_splicing(args)) do
      Fallback.run(unquote(op), unquote(reason), unquote(args))
    end
  end

  ## Zero-size results

  # Nx.pad with negative padding can leave an axis of size 0 (the one way Nx builds such
  # tensors), and ops on them have zero-size results too: no kernel runs (the NIFs refuse empty
  # shapes), the result is an empty buffer, as the BinaryBackend's is an empty binary. Guarded:
  # every callback above whose first argument is the output, but for the creation functions
  # (Nx refuses empty shapes there), the metadata-only ones, to_batched (its batches are slices)
  # and pad (which checks its shape first).
  @not_guarded [:init, :constant, :from_binary, :eye, :iota, :to_binary, :inspect, :block] ++
                 [:backend_copy, :backend_transfer, :backend_deallocate, :from_pointer] ++
                 [:to_pointer, :to_batched, :reshape, :squeeze, :bitcast, :pad]

  zero_size_guarded =
    for {name, arity} <- Nx.Backend.behaviour_info(:callbacks),
        name not in @not_guarded and Module.defines?(__MODULE__, {name, arity}, :def),
        do: {name, arity}

  for {name, arity} <- zero_size_guarded do
    defoverridable [{name, arity}]
    args = Macro.generate_arguments(arity - 1, __MODULE__)

    @impl true
    def unquote(name)(%T{} = out, unquote_splicing(args)) do
      if zero_size?(out),
        do: empty(out, tensors_device(unquote(args))),
        else: super(out, unquote_splicing(args))
    end
  end

  defp zero_size?(%T{shape: shape}), do: Nx.size(shape) == 0

  defp empty(out, device), do: Native.alloc_buffer(0, device) |> Native.unwrap!() |> wrap(out)

  # Runs `fun` with this backend, on the device of `tensors`, as the process default (what the
  # sub-computations of an op build their constants with).
  defp with_device_of(tensors, fun),
    do: Nx.with_default_backend({__MODULE__, device: tensors_device(tensors)}, fun)

  # The device of the first tensor of this backend among `args` (a list of an op's arguments,
  # lists of tensors inside), else where uploads go.
  defp tensors_device(args) do
    Enum.find_value(List.flatten(args), &(match?(%T{data: %__MODULE__{}}, &1) && device_of(&1))) ||
      upload_device()
  end

  ## Helpers

  defp fallback(op, args), do: Fallback.run(op, "not expressible with the device's kernels", args)

  # The one place a NIF result becomes a tensor: unsupported work goes to the host fallback.
  defp result({:ok, ref}, out, _op, _args), do: wrap(ref, out)
  defp result({:error, {:unsupported, reason}}, _out, op, args), do: Fallback.run(op, reason, args)
  defp result(error, _out, _op, _args), do: Native.unwrap!(error)

  defp wrap(ref, %T{} = out) do
    account_result(out)
    %{out | data: %__MODULE__{ref: ref}}
  end

  # Each process keeps one counter of the results it made: {results mod 16, bytes left before its
  # next collection} (one process-dictionary read and write per result, on every op's path; the
  # threshold is read only when the countdown starts again, not at every result).
  #
  # Backpressure (Nx.Vulkan.set_pending_limits/1): op NIFs run on normal schedulers and never
  # wait, so every 16 results a process asks whether the pending queue is past its bound (a
  # sub-microsecond NIF) and, if it is, waits in a dirty NIF until the GPU has caught up.
  #
  # Collection: the BEAM does not see device memory; a tensor is a small term, so a loop that
  # makes and drops device tensors can run for long without a garbage collection, and the buffers
  # of its dead tensors stay out of the pool (each new result is then a fresh device allocation).
  # So a process collects itself once the bytes of its results pass a threshold (a quarter of the
  # pool's cap by default, NXV_COLLECT_BYTES; see Nx.Vulkan.Device): its dead tensors' buffers
  # then return to the pool, and the next cycle of the loop reuses them.
  @doc false
  def account_result(%T{shape: shape, type: {_, bits}}) do
    {results, left} =
      case Process.get(:nx_vulkan_results) do
        nil -> {0, collect_budget()}
        counts -> counts
      end

    left = left - div(Tuple.product(shape) * bits, 8)

    left =
      if left <= 0 do
        :erlang.garbage_collect()
        collect_budget()
      else
        left
      end

    if results == 15 do
      Process.put(:nx_vulkan_results, {0, left})
      if Native.queue_full(), do: Native.throttle() |> Native.unwrap!()
    else
      Process.put(:nx_vulkan_results, {results + 1, left})
    end
  end

  # Bytes of results a process makes between collections (Nx.Vulkan.Device.collect_bytes/0; with
  # collection off, more than any process makes).
  defp collect_budget do
    case Nx.Vulkan.Device.collect_bytes() do
      :infinity -> Bitwise.bsl(1, 62)
      n -> n
    end
  end

  # The device buffer of a tensor; tensors of other backends are uploaded first.
  defp ref!(%T{data: %__MODULE__{ref: ref}}) when node(ref) == node(), do: ref

  defp ref!(%T{} = t) do
    t |> Nx.to_binary() |> pad_to_bytes() |> Native.upload(upload_device()) |> Native.unwrap!()
  end

  # bf16 has no arithmetic kernels: it computes as f32 (an exact widening) and narrows once at
  # the end, as the BinaryBackend does (f64 math, rounded to f32, truncated to bf16).
  defp compute_type({:bf, 16}), do: {:f, 32}
  defp compute_type(type), do: type

  # iota and eye: bf16 through f32, complex through its real part's type (then cast).
  defp index_type({:c, bits}), do: {:f, div(bits, 2)}
  defp index_type(type), do: compute_type(type)

  # `out` as a result of `type`: the same term when it already is one (the common case, no map
  # copied on every op).
  defp with_type(%T{type: type} = out, type), do: out
  defp with_type(%T{} = out, type), do: %{out | type: type}

  defp cast(%T{type: type} = t, type), do: t
  defp cast(%T{} = t, type), do: as_type(%{t | type: type}, t)

  defp copy(%T{shape: shape} = t), do: view(t, t, 0, contiguous_strides(shape) |> Tuple.to_list())

  # A new contiguous tensor `out` read from `t` at `offset` through `strides`; nil when the kernel
  # cannot express it (sub-byte types, rank beyond the kernels' limit).
  defp view(%T{shape: out_shape} = out, %T{} = t, offset, strides) do
    strides = if is_tuple(strides), do: Tuple.to_list(strides), else: strides
    moved(out, t, &Native.view_copy(&1, ref!(t), offset, Tuple.to_list(out_shape), strides))
  end

  # A transpose or broadcast: a lazy view (ops/layout.rs lazy_view), which binary ops read in
  # place and any other op copies once, when it first needs it; nil where no kernel moves the type.
  defp lazy_view(%T{shape: out_shape} = out, %T{} = t, strides),
    do: moved(out, t, &Native.lazy_view(&1, ref!(t), Tuple.to_list(out_shape), strides))

  # `out` made from `t` by `native` (given the element's bytes); empty for zero elements, nil
  # where no kernel moves the type or the layout.
  defp moved(%T{type: type} = out, t, native) do
    with false <- zero_size?(out),
         bytes when bytes != nil <- move_bytes(type),
         {:ok, ref} <- native.(bytes) do
      wrap(ref, out)
    else
      true -> empty(out, tensors_device([t]))
      nil -> nil
      {:error, {:unsupported, _}} -> nil
      error -> Native.unwrap!(error)
    end
  end

  defp copy_into!(bytes, dst, dst_offset, dst_strides, %T{shape: shape} = src) do
    src_strides = contiguous_strides(shape) |> Tuple.to_list()

    Native.copy_into(
      bytes,
      dst,
      dst_offset,
      dst_strides,
      ref!(src),
      0,
      src_strides,
      Tuple.to_list(shape)
    )
    |> Native.unwrap!()
  end

  defp elem_bytes({_, bits}) when bits >= 8 and bits <= 64, do: div(bits, 8)
  defp elem_bytes(_), do: nil

  # Kernels that only move whole elements (strided copies, gather, select) also take c128: the
  # NIFs treat it as pairs of 8-byte halves.
  defp move_bytes({:c, 128}), do: 16
  defp move_bytes(type), do: elem_bytes(type)

  defp shape_list(%T{shape: shape}), do: Tuple.to_list(shape)

  defp contiguous_strides(shape) do
    shape
    |> Tuple.to_list()
    |> Enum.reverse()
    |> Enum.map_reduce(1, fn dim, acc -> {acc, acc * dim} end)
    |> elem(0)
    |> Enum.reverse()
    |> List.to_tuple()
  end

  defp zeros(shape), do: List.duplicate(0, tuple_size(shape) - 1)
  defp ones(shape), do: List.duplicate(1, tuple_size(shape))
end
