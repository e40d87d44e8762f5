defmodule Nx.Vulkan.LayoutTest do
  use Nx.Vulkan.DeviceCase, async: true

  setup do
    {:ok,
     t: random({2, 3, 4}, :f32, 10.0, 1),
     i: dev(Enum.to_list(0..23), type: :s64) |> Nx.reshape({2, 3, 4})}
  end

  test "reshape, squeeze and bitcast change metadata only", %{t: t} do
    r = Nx.reshape(t, {6, 4})
    assert r.data.ref == t.data.ref
    assert Nx.squeeze(Nx.reshape(t, {1, 2, 3, 4})).data.ref == t.data.ref
    assert Nx.bitcast(t, :u32).data.ref == t.data.ref
    assert_device(&Nx.bitcast(&1, :s32), [t])
  end

  test "transpose", %{t: t, i: i} do
    for axes <- [[2, 1, 0], [1, 0, 2], [0, 2, 1]] do
      assert_device(&Nx.transpose(&1, axes: axes), [t])
      assert_device(&Nx.transpose(&1, axes: axes), [i])
    end
  end

  # GPUs decode a copy's index with per-dim multipliers instead of divisions (copy.comp): odd
  # dims at rank 6, a prime dim past 2^16, reversed and strided views.
  test "strided copies with odd dims decode every index" do
    t = Nx.iota({5, 7, 11, 13, 17, 3}, type: :s32, backend: Nx.Vulkan.Backend)
    assert_device(&Nx.transpose(&1, axes: [5, 3, 1, 4, 0, 2]), [t])
    assert_device(&Nx.reverse(&1, axes: [1, 4]), [t])
    long = Nx.iota({3, 100_003}, type: :s32, backend: Nx.Vulkan.Backend)
    assert_device(&Nx.transpose/1, [long])
    assert_device(&Nx.slice(&1, [1, 7], [2, 65_537], strides: [1, 3]), [long])
  end

  # CPU devices copy rows of 32+ elements by rows (a workgroup row per row, the innermost index
  # the invocation's own, ops/layout.rs rows_grid): rank 2 and 3, more rows than one grid
  # dimension holds, rows that do not fill a workgroup, 1- to 8-byte elements.
  test "strided copies by rows: ranks 2 and 3, past 65535 rows, ragged rows, every width" do
    rows = Nx.iota({40, 70_001}, type: :s32, backend: Nx.Vulkan.Backend)
    assert_device(&Nx.transpose/1, [rows])
    cube = Nx.iota({7, 45, 33}, type: :f32, backend: Nx.Vulkan.Backend)

    for axes <- [[1, 0, 2], [2, 0, 1], [0, 2, 1]], type <- [:u8, :s16, :f32, :f64] do
      assert_device(&Nx.transpose(&1, axes: axes), [Nx.as_type(cube, type)])
    end

    assert_device(&Nx.broadcast(&1, {3, 50, 97}, axes: [1, 2]), [
      Nx.iota({50, 1}, backend: Nx.Vulkan.Backend)
    ])

    # Rows needing more workgroups than a grid dimension is sure to hold (65535) go by element.
    wide = Nx.iota({2, 4_200_000}, type: :u8, backend: Nx.Vulkan.Backend)
    assert_device(&Nx.slice(&1, [0, 1], [2, 4_194_305]), [wide])
  end

  test "transposes and broadcasts that keep the elements' order share the input's buffer", %{t: t} do
    # Moving or adding axes of size 1 only: the same buffer (no copy), the BinaryBackend's values.
    unit = Nx.reshape(t, {2, 1, 3, 4})
    bytes = dev([1, 2, 3], type: :u8)

    for {result, input} <- [
          {Nx.transpose(unit, axes: [1, 0, 2, 3]), t},
          {Nx.transpose(unit, axes: [0, 2, 1, 3]), t},
          {Nx.broadcast(t, {1, 2, 3, 4}), t},
          {Nx.broadcast(t, {2, 1, 3, 1, 4}, axes: [0, 2, 4]), t},
          {Nx.broadcast(bytes, {3, 1}, axes: [0]), bytes}
        ] do
      assert result.data.ref == input.data.ref
    end

    assert_device(&Nx.transpose(&1, axes: [1, 0, 2, 3]), [unit])
    assert_device(&Nx.transpose(&1, axes: [0, 2, 1, 3]), [unit])
    assert_device(&Nx.broadcast(&1, {2, 1, 3, 1, 4}, axes: [0, 2, 4]), [t])
    # The order changes (a real transpose, a broadcast that repeats): a copy of its own.
    refute Nx.transpose(unit, axes: [2, 1, 0, 3]).data.ref == t.data.ref
    refute Nx.broadcast(unit, {2, 5, 3, 4}).data.ref == t.data.ref
  end

  test "broadcast", %{t: t} do
    assert_device(&Nx.broadcast(&1, {5, 2, 3, 4}), [t])
    assert_device(&Nx.broadcast(&1, {3, 2}, axes: [0]), [dev([1, 2, 3], type: :u8)])
  end

  test "slice, static and dynamic starts, with strides", %{t: t, i: i} do
    assert_device(&Nx.slice(&1, [0, 1, 1], [2, 2, 3]), [t])
    assert_device(&Nx.slice(&1, [0, 0, 0], [2, 3, 2], strides: [1, 2, 3]), [i])
    assert_device(&Nx.slice(&1, [&2, &3, 0], [1, 2, 4]), [t, dev(1), dev(5)])
    assert_device(&Nx.slice_along_axis(&1, 1, 2, axis: 2), [i])
  end

  test "reverse", %{t: t, i: i} do
    assert_device(&Nx.reverse(&1, axes: [0, 2]), [t])
    assert_device(&Nx.reverse/1, [i])
  end

  test "concatenate and stack", %{t: t} do
    u = random({2, 1, 4}, :f32, 1.0, 2)
    assert_device(&Nx.concatenate([&1, &2], axis: 1), [t, u])
    assert_device(&Nx.concatenate([&1, &2, &1], axis: 0), [t, t])
    assert_device(&Nx.stack([&1, &2], axis: 1), [t, t])
    assert_device(&Nx.stack([&1, &2]), [dev([1, 2], type: :s16), dev([3, 4], type: :s16)])
  end

  test "pad with positive, negative and interior padding", %{t: t} do
    assert_device(&Nx.pad(&1, 0.5, [{1, 2, 0}, {0, 1, 1}, {2, 0, 0}]), [t])
    assert_device(&Nx.pad(&1, -1.0, [{-1, 0, 0}, {1, -1, 2}, {-2, 3, 1}]), [t])
    assert_device(&Nx.pad(&1, 0, [{0, 0, 1}]), [dev([1, 2, 3], type: :s32)])
  end

  test "put_slice", %{t: t} do
    assert_device(&Nx.put_slice(&1, [1, 1, 2], &2), [t, dev([[[9.0, 8.0]]])])

    assert_device(&Nx.put_slice(&1, [&3, &4], &2), [
      dev([[1, 2, 3], [4, 5, 6]]),
      dev([[10, 11]]),
      dev(0),
      dev(7)
    ])
  end

  test "iota, eye and constants for every real type" do
    for type <- [:f32, :f64, :f16, :s8, :s16, :s32, :s64, :u8, :u16, :u32, :u64] do
      assert_device(fn -> Nx.iota({3, 4}, type: type, axis: 1) end, [])
      assert_device(fn -> Nx.iota({2, 3}, type: type) end, [])
      assert_device(fn -> Nx.eye({2, 3, 3}, type: type) end, [])
      assert_device(fn -> Nx.broadcast(Nx.tensor(3, type: type), {2, 2}) end, [])
    end
  end

  # Nx documents to_batched as returning a Stream (the BinaryBackend's does): compared batch by
  # batch with the BinaryBackend's, each on the device, without a fallback.
  test "to_batched is a stream of device batches, with leftover :repeat and :discard", %{t: t} do
    host = Nx.backend_copy(t, Nx.BinaryBackend)
    even = dev(Enum.to_list(1..12), type: :u8) |> Nx.reshape({6, 2})
    before = Nx.Vulkan.Fallback.tagged(Process.get(:nx_vulkan_fallback_tag))

    for {tensor, batch} <- [{t, 1}, {t, 2}, {Nx.transpose(t), 3}, {Nx.transpose(t), 4}, {even, 3}],
        leftover <- [:repeat, :discard] do
      stream = Nx.to_batched(tensor, batch, leftover: leftover)
      assert %Stream{} = stream
      batches = Enum.to_list(stream)

      expected =
        tensor
        |> Nx.backend_copy(Nx.BinaryBackend)
        |> Nx.to_batched(batch, leftover: leftover)
        |> Enum.to_list()

      assert length(batches) == length(expected)

      for {actual, wanted} <- Enum.zip(batches, expected) do
        assert %Nx.Vulkan.Backend{} = actual.data
        assert actual.shape == wanted.shape and actual.type == wanted.type
        assert Nx.to_binary(actual) == Nx.to_binary(wanted)
      end
    end

    assert Nx.Vulkan.Fallback.tagged(Process.get(:nx_vulkan_fallback_tag)) == before

    # The default leftover is :repeat: 4 rows in batches of 3, the second is rows 3, 0 and 1.
    rows = Nx.transpose(host)
    assert [first, second] = Nx.to_batched(Nx.transpose(t), 3) |> Enum.to_list()
    assert Nx.to_binary(first) == Nx.to_binary(rows[0..2])
    assert Nx.to_binary(second) == Nx.to_binary(Nx.concatenate([rows[3..3], rows[0..1]]))
  end

  test "transfers between backends" do
    t = dev([1.0, 2.0])
    host = Nx.backend_transfer(t, Nx.BinaryBackend)
    assert %Nx.BinaryBackend{} = host.data
    back = Nx.backend_transfer(host, Nx.Vulkan.Backend)
    assert %Nx.Vulkan.Backend{} = back.data
    copy = Nx.backend_copy(back, Nx.Vulkan.Backend)
    assert copy.data.ref != back.data.ref
    assert Nx.to_flat_list(copy) == [1.0, 2.0]
    assert Nx.backend_deallocate(copy) == :ok
  end

  test "backend_deallocate frees at once; later use raises; queued work is unaffected" do
    t = random({1000}, :f32, 1.0, 81)
    pending = Nx.exp(t)
    assert Nx.backend_deallocate(t) == :ok
    assert Nx.backend_deallocate(t) == :already_deallocated
    assert_raise ArgumentError, ~r/deallocated/, fn -> Nx.add(t, 1.0) end
    assert_raise ArgumentError, ~r/deallocated/, fn -> Nx.to_binary(Nx.reshape(t, {10, 100})) end
    # The exp recorded before the deallocation still reads the original data.
    expected = Nx.exp(Nx.backend_copy(random({1000}, :f32, 1.0, 81), Nx.BinaryBackend))
    assert Nx.to_binary(pending) == Nx.to_binary(expected)
  end

  test "cached constants survive a deallocation" do
    c = Nx.Vulkan.Backend.constant(%Nx.Tensor{shape: {}, type: {:f, 32}, names: []}, 12.5, [])
    assert Nx.backend_deallocate(c) == :ok
    again = Nx.Vulkan.Backend.constant(%Nx.Tensor{shape: {}, type: {:f, 32}, names: []}, 12.5, [])
    assert Nx.to_number(again) == 12.5
  end

  test "inputs from other backends are uploaded" do
    host = Nx.tensor([1.0, 2.0], backend: Nx.BinaryBackend)
    result = Nx.Vulkan.Backend.add(%{host | data: nil}, dev([10.0, 20.0]), host)
    assert Nx.to_flat_list(result) == [11.0, 22.0]
  end

  test "sub-byte and 8-bit float types survive a round trip" do
    for type <- [{:u, 4}, {:s, 2}, {:f, 8}] do
      host = Nx.tensor([1, 0, 1], type: type, backend: Nx.BinaryBackend)
      assert Nx.to_binary(Nx.backend_transfer(host, Nx.Vulkan.Backend)) == Nx.to_binary(host)
    end
  end
end

# Not async: reads the global live-memory figure.
defmodule Nx.Vulkan.TransferTest do
  use Nx.Vulkan.DeviceCase, async: false

  # Nx documents a transfer as a copy and a deallocation.
  test "backend_transfer to another backend frees the device memory; the old tensor raises" do
    # 4096 bytes: buffers come in power-of-two size classes, which the live figure counts.
    values = Enum.map(1..1024, &(&1 * 0.5))
    t = dev(values)
    # Any work before (the upload) is done and its references released.
    Nx.to_binary(t)
    %{live_bytes: live, live_buffers: buffers} = Nx.Vulkan.stats()

    host = Nx.backend_transfer(t, Nx.BinaryBackend)

    assert Nx.Vulkan.memory().live == live - Nx.byte_size(t)
    assert Nx.Vulkan.stats().live_buffers == buffers - 1
    assert %Nx.BinaryBackend{} = host.data
    assert Nx.to_flat_list(host) == values

    message = "this tensor was deallocated (Nx.backend_deallocate/1) and cannot be used"
    assert_raise ArgumentError, message, fn -> Nx.to_binary(t) end
    assert_raise ArgumentError, message, fn -> Nx.add(t, 1.0) end
    assert Nx.backend_deallocate(t) == :already_deallocated

    # To the same backend it is the tensor itself, still usable.
    u = dev([1, 2, 3])
    assert Nx.backend_transfer(u, Nx.Vulkan.Backend) == u
    assert Nx.to_flat_list(u) == [1, 2, 3]
  end

  # The BEAM does not see device memory: a dead tensor that a minor collection has moved to the
  # old heap stays there, holding its buffer, until a full sweep. Each process therefore collects
  # itself once the results it made pass Nx.Vulkan.Device.collect_bytes() (a quarter of the pool's
  # cap). Without that, every result here was a fresh allocation (140 of 140 and 115 of 140 in
  # the first two phases, live memory growing to 700 MB on lavapipe).
  test "a loop that drops its results and never reads reaches steady state without fresh allocations" do
    x = Nx.iota({1024 * 1024}, type: :f32, backend: Nx.Vulkan.Backend)
    y = Nx.iota({1024 * 1024}, type: :f32, backend: Nx.Vulkan.Backend)
    # 4 MiB results, the last few kept (as a loop keeps its state) across minor collections.
    iterations = div(Nx.Vulkan.Device.collect_bytes(), 4 * 1024 * 1024) + 12

    live = Nx.Vulkan.memory().live

    phase = fn ->
      misses = Nx.Vulkan.stats().buffer_pool_misses

      kept =
        Enum.reduce(1..iterations, [], fn _, kept ->
          :erlang.garbage_collect(self(), type: :minor)
          [Nx.add(x, y) | Enum.take(kept, 4)]
        end)

      # Counted before the read below, whose staging buffer is a pool allocation of its own.
      misses = Nx.Vulkan.stats().buffer_pool_misses - misses
      assert Nx.to_number(hd(kept)[12345]) == 24690.0
      # Dead results never pile up beyond one collection's worth.
      assert Nx.Vulkan.memory().live - live <=
               Nx.Vulkan.Device.collect_bytes() + 16 * 4 * 1024 * 1024

      misses
    end

    # Buffers join the circulation until one collection's worth is pooled; from then on, none.
    misses = for _ <- 1..5, do: phase.()
    assert Enum.take(misses, -2) == [0, 0], "fresh allocations per phase: #{inspect(misses)}"
    assert Nx.Vulkan.memory().pooled <= Nx.Vulkan.stats().pool_max_bytes
  end

  test "transferring a shared constant leaves it to its other users" do
    c = Nx.tensor(12.75, backend: Nx.Vulkan.Backend)
    assert c.data.constant == 12.75
    other = Nx.multiply(Nx.tensor(12.75, backend: Nx.Vulkan.Backend), dev([1.0, 2.0]))

    assert Nx.to_number(Nx.backend_transfer(c, Nx.BinaryBackend)) == 12.75

    assert Nx.to_number(c) == 12.75
    assert Nx.to_flat_list(other) == [12.75, 25.5]
    assert Nx.to_number(Nx.tensor(12.75, backend: Nx.Vulkan.Backend)) == 12.75
    assert Nx.to_flat_list(Nx.add(Nx.broadcast(Nx.tensor(12.75), {2}), 1.0)) == [13.75, 13.75]
  end
end

defmodule Nx.Vulkan.GatherTest do
  use Nx.Vulkan.DeviceCase, async: true

  test "gather, take and take_along_axis against the BinaryBackend" do
    t = dev(Enum.to_list(0..23), type: :f32) |> Nx.reshape({2, 3, 4})
    idx = dev([[1, 2], [0, 1], [1, 0]], type: :s32)
    assert_device(&Nx.gather(&1, &2), [t, idx])
    assert_device(&Nx.gather(&1, &2, axes: [1, 2]), [t, idx])
    assert_device(&Nx.gather(&1, &2, axes: [0, 2]), [t, dev([[1, 3], [0, 0]], type: :u8)])
    assert_device(&Nx.take(&1, &2, axis: 2), [t, dev([3, 0, 3], type: :s64)])

    assert_device(&Nx.take_along_axis(&1, &2, axis: 1), [
      t,
      dev([[[0], [2]], [[1], [1]]]) |> Nx.broadcast({2, 2, 4})
    ])
  end

  test "out-of-range gather indices are clamped" do
    t = dev([10, 20, 30])
    assert Nx.to_flat_list(Nx.gather(t, dev([[-5], [1], [9]]))) == [10, 20, 30]
  end
end

# Not async: counts the device's dispatches.
defmodule Nx.Vulkan.GatherIndexTypesTest do
  use Nx.Vulkan.DeviceCase, async: false

  test "every integer index type, out-of-range values clamped as for s64; s32 indices need no cast" do
    t = dev(Enum.to_list(0..299), type: :f32)
    values = [-129, -1, 0, 1, 127, 128, 255, 299, 300, 65_535, 2_147_483_647]

    for type <- [s: 8, u: 8, s: 16, u: 16, s: 32, u: 32, s: 64, u: 64] do
      {min, max} =
        {Nx.Constants.min_finite(type) |> Nx.to_number(),
         Nx.Constants.max_finite(type) |> Nx.to_number()}

      idx = values |> Enum.filter(&(&1 >= min and &1 <= max))
      idx = if elem(type, 0) == :u, do: idx ++ [max], else: idx ++ [min, max]
      expected = Enum.map(idx, &(&1 |> max(0) |> min(299)))
      got = Nx.take(t, dev(idx, type: type)) |> Nx.to_flat_list()
      assert got == Enum.map(expected, &(&1 * 1.0)), "#{inspect(type)}: #{inspect(got)}"
    end

    x = dev(Enum.to_list(0..99), type: :s32)
    i = dev([5, 0, 99], type: :s32)
    Nx.Vulkan.flush()
    before = Nx.Vulkan.stats().recorded
    assert Nx.to_flat_list(Nx.take(x, i)) == [5, 0, 99]
    assert Nx.Vulkan.stats().recorded - before == 1
  end
end

defmodule Nx.Vulkan.ScatterTest do
  use Nx.Vulkan.DeviceCase, async: true

  test "indexed_add and indexed_put, duplicates applied in order" do
    t = random({3, 4}, :f32, 2.0, 31)
    idx = dev([[0, 1], [2, 3], [0, 1], [1, 0]])
    upd = dev([1.5, -2.0, 4.25, 8.0])
    assert_device(&Nx.indexed_add/3, [t, idx, upd])
    assert_device(&Nx.indexed_put/3, [t, idx, upd])

    assert_device(&Nx.indexed_add(&1, &2, &3, axes: [1]), [
      t,
      dev([[3], [0], [3]]),
      random({3, 3}, :f32, 1.0, 32)
    ])

    assert_device(&Nx.indexed_add/3, [
      dev([1, 2, 3], type: :s32),
      dev([[0], [0], [2]]),
      dev([5, 6, 7], type: :s32)
    ])
  end

  test "out-of-range index tuples are skipped" do
    t = dev([1.0, 2.0, 3.0])

    assert Nx.to_flat_list(Nx.indexed_put(t, dev([[5], [-1], [1]]), dev([9.0, 9.0, 7.0]))) == [
             1.0,
             7.0,
             3.0
           ]
  end
end

defmodule Nx.Vulkan.ConstantCacheTest do
  use Nx.Vulkan.DeviceCase, async: true

  test "cached constants keep the sign of zero and their type" do
    assert Nx.to_binary(Nx.broadcast(Nx.tensor(0.0), {2})) ==
             <<0.0::float-32-native, 0.0::float-32-native>>

    assert Nx.to_binary(Nx.broadcast(Nx.tensor(-0.0), {2})) ==
             <<-0.0::float-32-native, -0.0::float-32-native>>

    t = Nx.Vulkan.Backend.constant(%Nx.Tensor{shape: {}, type: {:f, 32}, names: []}, -0.0, [])
    assert Nx.to_binary(t) == <<-0.0::float-32-native>>
    u = Nx.Vulkan.Backend.constant(%Nx.Tensor{shape: {}, type: {:f, 32}, names: []}, 0.0, [])
    assert Nx.to_binary(u) == <<0.0::float-32-native>>

    assert Nx.to_binary(
             Nx.Vulkan.Backend.constant(%Nx.Tensor{shape: {}, type: {:s, 64}, names: []}, 3, [])
           ) == <<3::64-native>>
  end

  defp constant(type, shape, value) do
    names = List.duplicate(nil, tuple_size(shape))

    Nx.Vulkan.Backend.constant(
      %Nx.Tensor{shape: shape, type: Nx.Type.normalize!(type), names: names},
      value,
      []
    )
  end

  # Casts, broadcasts and transposes of a constant become constants (shared, no dispatch) holding
  # the cast value: the stored value, as the kernel would have converted it.
  test "casts, broadcasts and transposes of constants equal the BinaryBackend's" do
    for {from, value, to} <- [
          {:f32, 0.1, :f64},
          {:f64, 0.1, :f32},
          {:f32, 1.0e39, :f16},
          {:f32, 3.3, :bf16},
          {:s32, 300, :u8},
          {:s32, -7, :f32},
          {:u8, 200, :s8},
          {:f32, 2.7, :s32},
          {:f32, -2.7, :u8},
          {:f64, :nan, :f32}
        ] do
      c = constant(from, {2, 3}, value)
      host = Nx.backend_copy(c, Nx.BinaryBackend)

      for {label, fun} <- [
            as_type: &Nx.as_type(&1, to),
            broadcast: &Nx.broadcast(Nx.as_type(&1, to), {4, 2, 3}),
            transpose: &Nx.transpose(Nx.as_type(&1, to))
          ] do
        actual = fun.(c)
        expected = Nx.with_default_backend(Nx.BinaryBackend, fn -> fun.(host) end)

        assert Nx.to_binary(actual) == Nx.to_binary(expected),
               "#{label} #{from} #{inspect(value)} -> #{to}"

        assert %Nx.Vulkan.Backend{} = actual.data
      end
    end

    # bitcast reinterprets the bits: the result is no longer a constant of the same value.
    c = constant(:f32, {3}, 1.0)
    bits = Nx.bitcast(c, :u32)
    assert bits.data.constant == nil
    assert Nx.to_flat_list(Nx.as_type(bits, :f32)) == List.duplicate(1_065_353_216.0, 3)
  end
end

defmodule Nx.Vulkan.ComplexPartsTest do
  use Nx.Vulkan.DeviceCase, async: true

  test "real and imag of complex tensors are strided views" do
    c = Nx.tensor([Complex.new(1, 2), Complex.new(-3, 4.5)], backend: Nx.Vulkan.Backend)
    assert_device(&Nx.real/1, [c])
    assert_device(&Nx.imag/1, [c])

    c128 =
      Nx.as_type(Nx.backend_copy(c, Nx.BinaryBackend), :c128)
      |> Nx.backend_transfer(Nx.Vulkan.Backend)

    assert_device(&Nx.imag/1, [c128])
    assert_device(&Nx.real/1, [dev([1.5, 2.5])])
    assert_device(&Nx.imag/1, [dev([1, 2], type: :s32)])
  end
end

defmodule Nx.Vulkan.ComplexArithmeticTest do
  use Nx.Vulkan.DeviceCase, async: true

  defp c(list, type \\ :c64), do: Nx.tensor(list, type: type, backend: Nx.Vulkan.Backend)

  test "complex add, subtract, multiply, divide, equal, negate, conjugate and casts" do
    for type <- [:c64, :c128] do
      a = c([Complex.new(1, 2), Complex.new(-3.5, 0.25), Complex.new(0, -1)], type)
      b = c([Complex.new(0.5, -1), Complex.new(2, 2), Complex.new(0, -1)], type)

      for op <- [:add, :subtract, :multiply, :divide, :equal, :not_equal] do
        assert_device(&apply(Nx, op, [&1, &2]), [a, b], rtol: 1.0e-6, atol: 1.0e-6)
      end

      assert_device(&Nx.negate/1, [a])
      assert_device(&Nx.conjugate/1, [a])
      assert_device(&Nx.add(&1, &2), [a, dev([1.0, 2.0, 3.0])], rtol: 1.0e-6, atol: 1.0e-6)
      assert_device(&Nx.as_type(&1, :f32), [a])
      assert_device(&Nx.as_type(&1, :s32), [a])
    end

    assert_device(&Nx.as_type(&1, :c64), [dev([1, -2, 3], type: :s64)])
    assert_device(&Nx.as_type(&1, :c128), [c([Complex.new(1.5, -2)])])
    assert_device(&Nx.conjugate/1, [dev([1.0, -0.0])])
  end

  test "abs, is_nan and is_infinity of complex, with the complex library's rules" do
    z =
      c([
        Complex.new(3, 4),
        Complex.new(0, -2),
        Complex.new(-1.5, 0),
        Complex.new(1.0e-30, 2.0e-30)
      ])

    assert_device(&Nx.abs/1, [z], rtol: 1.0e-7, atol: 0.0)

    special =
      Nx.tensor([Complex.new(:nan, 1), Complex.new(1, :infinity), Complex.new(2, 3)],
        backend: Nx.Vulkan.Backend
      )

    assert_device(&Nx.is_nan/1, [special])
    assert_device(&Nx.is_infinity/1, [special])
  end
end

# Nx.pad with negative padding is the one way Nx builds a zero-size axis. The results match the
# BinaryBackend's where it has one (rank 1); it fails inside on the others, so they are checked
# against what they must be: empty, or the reduction's identity over an empty axis.
defmodule Nx.Vulkan.ZeroSizeTest do
  use Nx.Vulkan.DeviceCase, async: true

  defp empty?(t, shape, type \\ {:f, 32}) do
    assert %Nx.Vulkan.Backend{} = t.data
    assert {t.shape, t.type} == {shape, type}
    assert Nx.to_binary(t) == ""
    true
  end

  test "pad that removes every element returns the empty tensor the BinaryBackend returns" do
    for {data, config} <- [
          {[1.0, 2.0], [{-1, -1, 0}]},
          {[1.0], [{-1, 0, 0}]},
          {[1.0], [{0, -1, 0}]},
          {[1.0, 2.0, 3.0], [{-3, -2, 1}]}
        ] do
      result = assert_device(&Nx.pad(&1, 0.0, config), [dev(data)])
      assert empty?(result, {0})
    end

    assert empty?(Nx.pad(dev([[1.0, 2.0]]), 0.0, [{0, 0, 0}, {-2, 0, 0}]), {1, 0})
    assert empty?(Nx.pad(dev([[1, 2]], type: :s64), 0, [{-1, 0, 0}, {1, 1, 1}]), {0, 5}, {:s, 64})

    assert empty?(
             Nx.pad(dev([[1.0, 2.0]], type: :c128), 0, [{1, 0, 0}, {-2, 0, 0}]),
             {2, 0},
             {:c, 128}
           )

    # A zero-size input padded back out is all padding.
    e = Nx.pad(dev([1.0]), 0.0, [{-1, 0, 0}])
    assert Nx.to_flat_list(Nx.pad(e, 7.0, [{1, 2, 0}])) == [7.0, 7.0, 7.0]
  end

  test "padding that would leave a negative size is an ArgumentError naming it" do
    assert_raise ArgumentError,
                 "pad: the padding configuration [{-1, -1, 0}] leaves axis 0 of shape {1} with " <>
                   "-1 elements (negative padding can shrink an axis to 0 elements, not below)",
                 fn -> Nx.pad(dev([1.0]), 0.0, [{-1, -1, 0}]) end

    e = Nx.pad(dev([1.0]), 0.0, [{-1, 0, 0}])

    assert_raise ArgumentError, ~r/leaves axis 0 of shape \{0\} with -1 elements/, fn ->
      Nx.pad(e, 0.0, [{1, 1, 3}])
    end
  end

  test "ops on zero-size tensors: empty results, identities, no kernel and no fallback" do
    before = Nx.Vulkan.Fallback.tagged(Process.get(:nx_vulkan_fallback_tag))
    e = Nx.pad(dev([1.0, 2.0]), 0.0, [{-1, -1, 0}])
    e02 = Nx.pad(dev([[1.0, 2.0]]), 0.0, [{-1, 0, 0}, {0, 0, 0}])
    e20 = Nx.transpose(e02)
    assert empty?(e20, {2, 0})

    # Where the BinaryBackend has an answer (rank 1), the same one.
    for fun <- [
          &Nx.exp/1,
          &Nx.as_type(&1, :s32),
          &Nx.as_type(&1, :c64),
          &Nx.exp(Nx.as_type(&1, :c64)),
          &Nx.bitcast(&1, :s32),
          &Nx.clip(&1, 0, 1),
          &Nx.cumulative_sum/1,
          &Nx.concatenate([&1, &1]),
          &Nx.concatenate([&1, Nx.tensor([1.0, 2.0])]),
          &Nx.stack([&1, &1])
        ] do
      assert_device(fun, [e])
    end

    for t <- [e20, e02] do
      assert empty?(Nx.add(t, t), t.shape)
      assert empty?(Nx.select(Nx.greater(t, t), t, t), t.shape)
      assert empty?(Nx.sort(t, axis: 0), t.shape)
      assert empty?(Nx.argsort(t, axis: 1), t.shape, {:s, 32})
      assert empty?(Nx.reverse(t), t.shape)
      assert empty?(Nx.as_type(t, :f16), t.shape, {:f, 16})
      assert empty?(Nx.fft(t), t.shape, {:c, 64})
    end

    assert [first, second] = Nx.to_batched(e20, 1) |> Enum.to_list()
    assert empty?(first, {1, 0}) and empty?(second, {1, 0})

    # Reductions over an empty axis are their identities, as in XLA.
    assert Nx.to_flat_list(Nx.sum(e02, axes: [0])) == [0.0, 0.0]
    assert Nx.to_flat_list(Nx.product(e02, axes: [0])) == [1.0, 1.0]
    assert Nx.to_flat_list(Nx.reduce_max(e02, axes: [0])) == [:neg_infinity, :neg_infinity]
    assert Nx.to_flat_list(Nx.reduce_min(Nx.as_type(e02, :s8), axes: [0])) == [127, 127]
    assert Nx.to_flat_list(Nx.all(e02, axes: [0])) == [1, 1]
    assert Nx.to_flat_list(Nx.any(e02, axes: [0])) == [0, 0]
    assert empty?(Nx.sum(e20, axes: [1]) |> Nx.slice([0], [2]) |> Nx.pad(0.0, [{-2, 0, 0}]), {0})

    assert Nx.to_flat_list(Nx.sum(Nx.as_type(e02, :c64), axes: [0])) == [
             Complex.new(0.0, 0.0),
             Complex.new(0.0, 0.0)
           ]

    assert Nx.to_flat_list(Nx.product(Nx.as_type(e02, :c64), axes: [0])) == [
             Complex.new(1.0, 0.0),
             Complex.new(1.0, 0.0)
           ]

    assert Nx.to_flat_list(Nx.window_sum(e, {1}, padding: [{1, 1}])) == [0.0, 0.0]
    assert Nx.to_flat_list(Nx.reduce(e02, 5.0, [axes: [0]], &Nx.add/2)) == [5.0, 5.0]

    # Contracting an empty axis: zeros; inserting or scattering nothing leaves the target.
    assert Nx.to_flat_list(Nx.dot(e20, e02)) == [0.0, 0.0, 0.0, 0.0]
    assert Nx.to_flat_list(Nx.put_slice(dev([[1.0, 2.0]]), [0, 0], e02)) == [1.0, 2.0]
    assert Nx.to_flat_list(Nx.concatenate([e02, dev([[1.0, 2.0]])])) == [1.0, 2.0]
    no_indices = Nx.reshape(Nx.as_type(e, :s64), {0, 1})
    assert Nx.to_flat_list(Nx.indexed_add(dev([1.0, 2.0]), no_indices, e)) == [1.0, 2.0]
    assert Nx.to_flat_list(Nx.indexed_put(dev([1.0, 2.0]), no_indices, e)) == [1.0, 2.0]

    assert Nx.Vulkan.Fallback.tagged(Process.get(:nx_vulkan_fallback_tag)) == before

    # No answer: an ArgumentError saying why.
    assert_raise ArgumentError, ~r/argmax of a tensor of shape \{0, 2\}: an empty axis/, fn ->
      Nx.argmax(e02, axis: 0)
    end

    assert_raise ArgumentError, ~r/gather: indices into a tensor of shape \{0, 2\}/, fn ->
      Nx.gather(e02, dev([[0]]))
    end
  end
end

# Not async: counts the device's dispatches.
defmodule Nx.Vulkan.LazyViewTest do
  use Nx.Vulkan.DeviceCase, async: false

  # Commands `fun` queues (the GPU thread's count, once flushed).
  defp dispatches(fun) do
    Nx.Vulkan.flush()
    before = Nx.Vulkan.stats().recorded
    result = fun.()
    Nx.Vulkan.flush()
    {result, Nx.Vulkan.stats().recorded - before}
  end

  defp host(t), do: Nx.backend_copy(t, Nx.BinaryBackend)

  defp assert_all_close(actual, expected, opts),
    do: Nx.Testing.assert_all_close(host(actual), expected, opts)

  test "binary ops read transposes and repeating broadcasts in place: one dispatch, the BinaryBackend's values" do
    x = random({37, 53}, :f32, 4.0, 3)
    y = random({53, 37}, :f32, 4.0, 4)
    row = random({53}, :f32, 4.0, 5)

    for {name, fun} <- [
          {"transpose + add", fn x, _row, y -> Nx.add(Nx.transpose(x), y) end},
          {"broadcast * x", fn x, row, _y -> Nx.multiply(Nx.broadcast(row, {37, 53}), x) end},
          {"compare with a broadcast column",
           fn x, _row, y ->
             Nx.less(
               x,
               Nx.broadcast(Nx.slice(y, [0, 0], [1, 1]) |> Nx.reshape({1}), {37, 53}, axes: [1])
             )
           end},
          {"transpose of a broadcast (composed)",
           fn _x, row, y -> Nx.subtract(y, Nx.transpose(Nx.broadcast(row, {37, 53}))) end},
          {"broadcast of a transpose (composed)",
           fn x, _row, y -> Nx.divide(Nx.broadcast(Nx.transpose(x), {2, 53, 37}), y) end}
        ] do
      # The slice in the compare case is a copy of its own, before the count.
      {actual, n} = dispatches(fn -> fun.(x, row, y) end)
      expected = fun.(host(x), host(row), host(y))
      assert Nx.to_binary(actual) == Nx.to_binary(expected), name
      assert n <= 2 and (n == 1 or name =~ "compare"), "#{name}: #{n} dispatches"
    end
  end

  test "select reads its operands' views in place" do
    x = random({37, 53}, :f32, 4.0, 18)
    y = random({53, 37}, :f32, 4.0, 19)
    row = random({53}, :f32, 4.0, 20)
    pred = Nx.greater(x, 0.0)

    fun = fn pred, x, y, row ->
      Nx.select(
        Nx.transpose(pred),
        Nx.transpose(Nx.broadcast(row, {37, 53})),
        Nx.add(y, Nx.transpose(x))
      )
    end

    {r, n} = dispatches(fn -> fun.(pred, x, y, row) end)
    assert n == 2
    assert Nx.to_binary(r) == Nx.to_binary(fun.(host(pred), host(x), host(y), host(row)))
  end

  test "materialize/1 makes a view's copy once; other tensors pass through" do
    x = random({20, 30}, :f32, 4.0, 21)
    {t, n} = dispatches(fn -> Nx.Vulkan.materialize(Nx.transpose(x)) end)
    assert n == 1
    {_, again} = dispatches(fn -> Nx.Vulkan.materialize(t) end)
    assert again == 0
    assert Nx.to_binary(t) == Nx.to_binary(Nx.transpose(host(x)))
    {_, plain} = dispatches(fn -> Nx.Vulkan.materialize(x) end)
    assert plain == 0
    assert Nx.Vulkan.materialize(host(x)) == host(x)
  end

  test "unary ops read views in place too: one dispatch, the BinaryBackend's values" do
    x = random({64, 48}, :f32, 4.0, 23)
    row = random({48}, :f32, 4.0, 24)

    for {name, fun} <- [
          {"exp of a transpose", fn x, _row -> Nx.exp(Nx.transpose(x)) end},
          {"sigmoid of a broadcast", fn _x, row -> Nx.sigmoid(Nx.broadcast(row, {5, 48})) end},
          {"negate of a transposed broadcast",
           fn _x, row -> Nx.negate(Nx.transpose(Nx.broadcast(row, {7, 48}))) end},
          {"abs of a 3-d transpose",
           fn x, _row -> Nx.abs(Nx.transpose(Nx.reshape(x, {8, 8, 48}), axes: [2, 0, 1])) end}
        ] do
      {actual, n} = dispatches(fn -> fun.(x, row) end)
      assert n == 1, "#{name}: #{n} dispatches"
      assert Nx.to_binary(actual) == Nx.to_binary(fun.(host(x), host(row))), name
    end

    for type <- [:s8, :u16, :s32, :f16, :f64] do
      x = Nx.iota({6, 11}, type: type, backend: Nx.Vulkan.Backend) |> Nx.subtract(30)

      for fun <- [
            &Nx.negate(Nx.transpose(&1)),
            &Nx.abs(Nx.transpose(&1)),
            &Nx.sign(Nx.broadcast(&1, {2, 6, 11}))
          ] do
        assert Nx.to_binary(fun.(x)) == Nx.to_binary(fun.(host(x))), inspect(type)
      end
    end
  end

  test "other ops copy a view once, when they first need it; the copy is kept" do
    x = random({64, 48}, :f32, 4.0, 6)
    t = Nx.transpose(x)
    {_, made} = dispatches(fn -> t end)
    assert made == 0
    {e, n} = dispatches(fn -> Nx.reduce_max(t, axes: [1]) end)
    assert n == 2
    {_, again} = dispatches(fn -> Nx.sum(t) end)
    assert again == 1
    assert Nx.to_binary(e) == Nx.to_binary(Nx.reduce_max(Nx.transpose(host(x)), axes: [1]))
    assert Nx.to_binary(t) == Nx.to_binary(Nx.transpose(host(x)))
    # GPUs accumulate dot in f32 (precise_dot off): close to the BinaryBackend's, not its bits.
    assert_all_close(Nx.dot(t, x), Nx.dot(Nx.transpose(host(x)), host(x)),
      atol: 1.0e-3,
      rtol: 1.0e-5
    )
  end

  test "dot reads a transposed operand from its base; a broadcast one is copied" do
    x = random({48, 33}, :f32, 4.0, 13)
    y = random({48, 20}, :f32, 4.0, 14)
    {r, n} = dispatches(fn -> Nx.dot(Nx.transpose(x), y) end)
    assert n == 1
    assert_all_close(r, Nx.dot(Nx.transpose(host(x)), host(y)), atol: 1.0e-4, rtol: 1.0e-5)
    # Batched, both operands transposed, f16 and f64 too.
    for type <- [:f16, :f32, :f64] do
      a = Nx.as_type(random({3, 40, 24}, :f32, 1.0, 15), type)
      b = Nx.as_type(random({3, 16, 40}, :f32, 1.0, 16), type)

      fun = fn a, b ->
        Nx.dot(Nx.transpose(a, axes: [0, 2, 1]), [2], [0], Nx.transpose(b, axes: [0, 2, 1]), [1], [
          0
        ])
      end

      {r, n} = dispatches(fn -> fun.(a, b) end)
      assert n == 1, inspect(type)
      tol = if type == :f16, do: 2.0e-2, else: 1.0e-4
      assert_all_close(r, fun.(host(a), host(b)), atol: tol, rtol: tol)
    end

    row = random({33}, :f32, 4.0, 17)
    {r, n} = dispatches(fn -> Nx.dot(Nx.broadcast(row, {48, 33}), [0], y, [0]) end)
    assert n == 2

    assert_all_close(r, Nx.dot(Nx.broadcast(host(row), {48, 33}), [0], host(y), [0]),
      atol: 1.0e-4,
      rtol: 1.0e-5
    )
  end

  test "large transposes are copied for binary ops (a tiled copy reads faster than scattered loads)" do
    x = Nx.iota({1100, 1000}, type: :s32, backend: Nx.Vulkan.Backend)
    {r, n} = dispatches(fn -> Nx.add(Nx.transpose(x), 1) end)
    assert n == 2
    assert Nx.to_binary(r) == Nx.to_binary(Nx.add(Nx.transpose(host(x)), 1))
    # An in-order broadcast of the same size is read in place.
    col = Nx.iota({1100, 1}, type: :s32, backend: Nx.Vulkan.Backend)
    {r, n} = dispatches(fn -> Nx.add(Nx.broadcast(col, {1100, 1000}), x) end)
    assert n == 1
    assert Nx.to_binary(r) == Nx.to_binary(Nx.add(Nx.broadcast(host(col), {1100, 1000}), host(x)))
  end

  test "every type and complex, views of views, zero-size views" do
    for type <- [:u8, :s16, :s64, :f16, :bf16, :f64, :c64] do
      x = Nx.iota({5, 7}, type: type, backend: Nx.Vulkan.Backend)
      b = Nx.iota({7}, type: type, backend: Nx.Vulkan.Backend)

      for fun <- [
            &Nx.add(Nx.transpose(&1), Nx.transpose(Nx.broadcast(&2, {5, 7}))),
            &Nx.multiply(Nx.transpose(Nx.transpose(&1)), &2),
            fn x, _b -> Nx.negate(Nx.transpose(x)) end,
            fn _x, b -> Nx.reverse(Nx.broadcast(b, {3, 7}), axes: [1]) end
          ] do
        assert Nx.to_binary(fun.(x, b)) == Nx.to_binary(fun.(host(x), host(b))), inspect(type)
      end
    end

    empty = Nx.pad(dev([[1.0, 2.0, 3.0]]), 0.0, [{-1, 0, 0}, {0, 0, 0}])
    assert Nx.shape(Nx.add(Nx.transpose(empty), Nx.transpose(empty))) == {3, 0}
    assert Nx.byte_size(Nx.transpose(empty)) == 0
  end

  test "a view outlives its base's deallocation; deallocating the view frees only the view" do
    x = random({30, 20}, :f32, 4.0, 8)
    expected = Nx.transpose(host(x))
    t = Nx.transpose(x)
    b = Nx.broadcast(x, {2, 30, 20})
    assert Nx.backend_deallocate(x) == :ok
    assert Nx.to_binary(Nx.add(t, 0.0)) == Nx.to_binary(expected)
    assert Nx.to_binary(t) == Nx.to_binary(expected)
    assert Nx.backend_deallocate(t) == :ok
    assert Nx.backend_deallocate(t) == :already_deallocated
    assert_raise ArgumentError, ~r/deallocated/, fn -> Nx.to_binary(t) end
    assert Nx.to_binary(b[1]) == Nx.to_binary(Nx.transpose(expected))
    # Once a view is copied it lets its base go: the base's deallocation frees it at once.
    y = random({30, 20}, :f32, 4.0, 22)
    ty = Nx.transpose(y)
    Nx.Vulkan.materialize(ty)
    assert Nx.backend_deallocate(y) == :ok
    assert_raise ArgumentError, ~r/deallocated/, fn -> Nx.to_binary(y) end
    assert Nx.to_binary(ty) == Nx.to_binary(Nx.transpose(host(random({30, 20}, :f32, 4.0, 22))))
  end

  test "a view passed to a compiled function is copied on the queue, not into the program" do
    x = random({40, 24}, :f32, 4.0, 9)
    y = random({24, 40}, :f32, 4.0, 10)
    t = Nx.transpose(x)
    f = Nx.Defn.jit(fn a, b -> Nx.add(Nx.exp(a), b) end, compiler: Nx.Vulkan)
    expected = Nx.add(Nx.exp(Nx.transpose(host(x))), host(y))

    for _ <- 1..3 do
      assert Nx.to_binary(f.(t, y)) == Nx.to_binary(expected)
    end

    # A fresh view at each call: each replay's argument is its copy, made on the queue then.
    for seed <- 11..12 do
      z = random({40, 24}, :f32, 4.0, seed)

      assert Nx.to_binary(f.(Nx.transpose(z), y)) ==
               Nx.to_binary(Nx.add(Nx.exp(Nx.transpose(host(z))), host(y)))
    end

    assert Nx.to_binary(t) == Nx.to_binary(Nx.transpose(host(x)))
  end
end
