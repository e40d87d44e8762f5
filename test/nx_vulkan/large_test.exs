defmodule Nx.Vulkan.LargeTest do
  # Every kernel family at sizes past one row of workgroups (65535 x 256 = 16,776,960
  # invocations on GPUs, 65535 x 64 on CPU devices: NXV_WORKGROUP_SIZE) and near the binding limit (128 MiB on lavapipe), for 1-, 2-, 4- and 8-byte
  # types. Output buffers come from a pool primed with 0xFF bytes, so an element a kernel skips
  # shows up as a wrong value; values are checked at the row boundary and the end of the tensor
  # against Nx.BinaryBackend applied to the same inputs.
  use Nx.Vulkan.DeviceCase, async: false

  # Where a row of workgroups ends for each workgroup size a run may configure (32 to 256).
  @rows for size <- [32, 64, 128, 256], do: 65_535 * size
  @above 16_777_000
  @limit min(128 * 1024 * 1024, Nx.Vulkan.Device.info().max_storage_buffer_range)

  # Positions where a wrong grid shows: the first row's end, the second row's start, 2^24, the end.
  defp positions(n) do
    rows = Enum.flat_map(@rows, &[&1 - 1, &1, &1 + 1])

    ([0, 16_777_215, 16_777_216] ++ rows ++ Enum.to_list((n - 48)..(n - 1)))
    |> Enum.filter(&(&1 >= 0 and &1 < n))
    |> Enum.uniq()
  end

  # Leaves a dirty buffer (bytes 0, 1, ..., 255, 0, ...) of the given size class in the pool for
  # the next allocation.
  defp prime_pool(bytes) do
    junk = Nx.iota({bytes}, type: :u8)
    Nx.Vulkan.flush()
    Nx.backend_deallocate(junk)
  end

  defp at(t, positions) do
    flat = Nx.reshape(t, {Nx.size(t)})
    Nx.take(flat, Nx.tensor(positions, type: :s64)) |> Nx.backend_copy(Nx.BinaryBackend)
  end

  defp host(t), do: Nx.backend_copy(t, Nx.BinaryBackend)

  # Checks fun(inputs) at `positions` against the BinaryBackend on the inputs' values there
  # (element-wise functions only: each output depends on the same position of each input).
  defp assert_elementwise(fun, inputs) do
    %{shape: shape} = hd(inputs)
    n = Nx.size(shape)
    out = apply(fun, inputs)
    assert %Nx.Vulkan.Backend{} = out.data
    pos = positions(n)

    expected =
      Nx.with_default_backend(Nx.BinaryBackend, fn -> apply(fun, Enum.map(inputs, &at(&1, pos))) end)

    Nx.Testing.assert_equal(at(out, pos), expected)
    out
  end

  defp near_limit(type) do
    {_, bits} = type
    div(@limit, div(bits, 8)) - 7
  end

  for type <- [:u8, :s16, :f16, :s32, :f32, :f64, :s64] do
    test "iota, unary, binary, casts and select near the binding limit, #{type}" do
      type = unquote(type)
      n = near_limit(Nx.Type.normalize!(type))
      bytes = n * div(elem(Nx.Type.normalize!(type), 1), 8)
      before = Nx.Vulkan.Fallback.count()
      prime_pool(bytes)
      x = Nx.iota({n}, type: type)

      expected = Nx.tensor(positions(n), type: :s64, backend: Nx.BinaryBackend) |> Nx.as_type(type)
      Nx.Testing.assert_equal(at(x, positions(n)), expected)

      # Unary, binary and select kernels; the pool holds x's size class after each deallocate.
      prime_pool(bytes)
      y = assert_elementwise(&Nx.negate/1, [x])
      prime_pool(bytes)
      assert_elementwise(&Nx.select(Nx.greater(&1, 100), &1, &2), [x, y])
      prime_pool(div(bytes, div(elem(Nx.Type.normalize!(type), 1), 8)))
      assert_elementwise(&Nx.as_type(&1, :u8), [x])
      assert Nx.Vulkan.Fallback.count() == before
    end
  end

  test "float math and f64 past one row of workgroups" do
    x = Nx.iota({@above}, type: :f64) |> Nx.divide(1.0e6)
    prime_pool(@above * 8)
    assert_elementwise(&Nx.exp/1, [x])
    x32 = Nx.as_type(x, :f32)
    prime_pool(@above * 4)
    assert_elementwise(&Nx.sin/1, [x32])
    prime_pool(@above * 4)
    assert_elementwise(&Nx.remainder(&1, 3.5), [x32])
    prime_pool(@above)
    assert_elementwise(&Nx.is_nan/1, [Nx.log(Nx.subtract(x32, 1.0))])
  end

  test "complex c64 past one row of workgroups" do
    re = Nx.iota({@above}, type: :f32)
    z = Nx.complex(re, Nx.negate(re))
    prime_pool(@above * 8)
    assert_elementwise(&Nx.multiply(&1, Nx.Constants.i()), [z])
  end

  # 4095 x 8192 f32 (just under a 128 MiB binding): on GPUs a split column reduction (rows in
  # chunks, then a pass over the partials) and 16-byte row folds. Row r holds r mod 7, so every
  # column sums to the same exact value and every row to 8192 (r mod 7).
  test "column and row sums of a matrix of more than 2^24 f32 elements" do
    x = Nx.iota({4095, 8192}, axis: 0, type: :f32) |> Nx.remainder(7)
    column = Enum.sum(for r <- 0..4094, do: rem(r, 7)) * 1.0
    assert Nx.to_flat_list(Nx.sum(x, axes: [0])) |> Enum.uniq() == [column]
    rows = Nx.sum(x, axes: [1]) |> Nx.to_flat_list()
    assert rows == for(r <- 0..4094, do: rem(r, 7) * 8192.0)
    assert Nx.to_number(Nx.sum(x)) == column * 8192
  end

  test "full and partial sums over more than 2^24 elements" do
    x = Nx.iota({@above}, type: :s64)
    assert Nx.to_number(Nx.sum(x)) == div(@above * (@above - 1), 2)
    assert Nx.to_number(Nx.sum(Nx.broadcast(1.0, {@above}))) == @above * 1.0
    # One output per row past a row of workgroups: 2 x @above s16 inputs, @above s64 outputs.
    pairs = Nx.iota({@above, 2}, type: :s16)
    prime_pool(@above * 8)
    sums = Nx.sum(pairs, axes: [1])
    pos = positions(@above)

    expected =
      Nx.sum(at(pairs, Enum.flat_map(pos, &[2 * &1, 2 * &1 + 1])) |> Nx.reshape({length(pos), 2}),
        axes: [1]
      )

    Nx.Testing.assert_equal(at(sums, pos), expected)
    prime_pool(@above * 8)
    arg = Nx.argmax(pairs, axis: 1)

    sampled_pairs =
      at(pairs, Enum.flat_map(pos, &[2 * &1, 2 * &1 + 1])) |> Nx.reshape({length(pos), 2})

    Nx.Testing.assert_equal(at(arg, pos), Nx.argmax(sampled_pairs, axis: 1))
  end

  test "layout copies past one row of workgroups: transpose, slice, reverse, pad, concatenate, take" do
    rows = div(@above, 4) + 1
    x = Nx.iota({rows, 4}, type: :s32)
    n = rows * 4

    # The references are built on the host from iota only at the sampled positions' formulas:
    # cheap closed forms, so the BinaryBackend never walks 16.8 M elements.
    prime_pool(n * 4)
    t = Nx.transpose(x)
    pos = positions(n)

    Nx.Testing.assert_equal(
      at(t, pos),
      Nx.tensor(Enum.map(pos, fn p -> rem(p, rows) * 4 + div(p, rows) end),
        type: :s32,
        backend: Nx.BinaryBackend
      )
    )

    prime_pool(n * 4)
    r = Nx.reverse(Nx.reshape(x, {n}))

    Nx.Testing.assert_equal(
      at(r, pos),
      Nx.tensor(Enum.map(pos, &(n - 1 - &1)), type: :s32, backend: Nx.BinaryBackend)
    )

    prime_pool(n * 4)
    s = Nx.slice(Nx.reshape(x, {n}), [3], [n - 3])
    spos = positions(n - 3)

    Nx.Testing.assert_equal(
      at(s, spos),
      Nx.tensor(Enum.map(spos, &(&1 + 3)), type: :s32, backend: Nx.BinaryBackend)
    )

    prime_pool(n * 4)
    c = Nx.concatenate([Nx.reshape(x, {n}), Nx.tensor([-1, -2], type: :s32)])
    cpos = positions(n + 2)

    Nx.Testing.assert_equal(
      at(c, cpos),
      Nx.tensor(Enum.map(cpos, &if(&1 < n, do: &1, else: n - 1 - &1)),
        type: :s32,
        backend: Nx.BinaryBackend
      )
    )

    prime_pool(n * 4)
    g = Nx.take(Nx.reshape(x, {n}), Nx.reverse(Nx.iota({n}, type: :s32)))

    Nx.Testing.assert_equal(
      at(g, pos),
      Nx.tensor(Enum.map(pos, &(n - 1 - &1)), type: :s32, backend: Nx.BinaryBackend)
    )

    prime_pool(n * 4)
    p = Nx.pad(Nx.reshape(x, {n}), 0, [{0, 5, 0}])
    ppos = positions(n + 5)

    Nx.Testing.assert_equal(
      at(p, ppos),
      Nx.tensor(Enum.map(ppos, &if(&1 < n, do: &1, else: 0)), type: :s32, backend: Nx.BinaryBackend)
    )
  end

  # Lazy views (broadcasts, in element order) are read in place by binary, unary and select
  # kernels at any size: their strided paths past 2^24 elements.
  test "binary, unary and select ops reading broadcast views past one row of workgroups" do
    rows = div(@above, 4) + 1
    n = rows * 4
    x = Nx.iota({rows, 4}, type: :s32)
    b = Nx.broadcast(Nx.iota({rows, 1}, type: :s32), {rows, 4})
    bt = Nx.transpose(Nx.broadcast(Nx.iota({4}, type: :s32), {rows, 4}))
    pos = positions(n)
    expect = fn f -> Nx.tensor(Enum.map(pos, f), type: :s32, backend: Nx.BinaryBackend) end

    prime_pool(n * 4)
    Nx.Testing.assert_equal(at(Nx.add(b, x), pos), expect.(&(div(&1, 4) + &1)))
    prime_pool(n * 4)
    Nx.Testing.assert_equal(at(Nx.negate(b), pos), expect.(&(-div(&1, 4))))
    prime_pool(n * 4)
    Nx.Testing.assert_equal(at(Nx.negate(bt), pos), expect.(&(-div(&1, rows))))

    prime_pool(n * 4)

    Nx.Testing.assert_equal(
      at(Nx.select(Nx.greater(x, 1000), b, x), pos),
      expect.(&if(&1 > 1000, do: div(&1, 4), else: &1))
    )
  end

  test "slice and put_slice with tensor starts past one row of workgroups" do
    n = @above + 10
    flat = Nx.iota({n}, type: :s32)
    # 9 past the largest valid start: clamped to n - length = 3 on the device (computed there:
    # a scalar made by Nx.tensor/2 is a constant the backend folds on the host).
    start = Nx.iota({1}, type: :u8) |> Nx.add(12) |> Nx.reshape({})
    length = n - 3

    prime_pool(length * 4)
    s = Nx.slice(flat, [start], [length])
    spos = positions(length)

    Nx.Testing.assert_equal(
      at(s, spos),
      Nx.tensor(Enum.map(spos, &(&1 + 3)), type: :s32, backend: Nx.BinaryBackend)
    )

    prime_pool(n * 4)

    put =
      Nx.put_slice(
        flat,
        [Nx.iota({1}, type: :s64) |> Nx.subtract(5) |> Nx.reshape({})],
        Nx.negate(s)
      )

    pos = positions(n)

    Nx.Testing.assert_equal(
      at(put, pos),
      Nx.tensor(Enum.map(pos, &if(&1 < length, do: -(&1 + 3), else: &1)),
        type: :s32,
        backend: Nx.BinaryBackend
      )
    )
  end

  defmodule Loops do
    import Nx.Defn

    defn grow(x, y, n) do
      {x, y, _, _} =
        while {x, y, i = 0, n}, i < n do
          {x + i, y * 0.5, i + 1, n}
        end

      {x, y}
    end
  end

  test "a device loop whose state is at the binding limit and past one row of workgroups" do
    # An s32 state slot of the binding limit's size, and an f32 one past 2^24 elements: the
    # gated copies of both (16-byte units) span more than one row of workgroups.
    x = Nx.iota({near_limit({:s, 32})}, type: :s32)
    y = Nx.iota({@above}, type: :f32)
    before = Nx.Vulkan.compiler_census()
    iterations = Nx.Vulkan.stats().loop_iterations
    prime_pool(Nx.byte_size(x))
    prime_pool(Nx.byte_size(y))
    {gx, gy} = Nx.Defn.jit(&Loops.grow/3, compiler: Nx.Vulkan).(x, y, Nx.tensor(4))
    assert %Nx.Vulkan.Backend{} = gx.data

    {px, py} = {positions(Nx.size(x)), positions(Nx.size(y))}
    # 0 + 1 + 2 + 3, and four halvings (exact).
    Nx.Testing.assert_equal(at(gx, px), Nx.add(at(x, px), 6))
    Nx.Testing.assert_equal(at(gy, py), Nx.multiply(at(y, py), 0.0625))

    # Under the Evaluator it would be a host read per condition: the device ran the loop.
    assert Nx.Vulkan.compiler_census().evaluator == before.evaluator
    assert Nx.Vulkan.stats().loop_iterations >= iterations + 4
  end

  test "sort, cumulative sums, windows and scatter past one row of workgroups" do
    rows = div(@above, 4) + 1
    n = rows * 4
    # Rows of 4 descending values: sorted ascending along axis 1.
    x = Nx.subtract(n, Nx.iota({rows, 4}, type: :s32))
    pos = positions(n)

    by_row = fn fun ->
      Nx.tensor(Enum.map(pos, fn p -> fun.(div(p, 4), rem(p, 4)) end),
        type: :s32,
        backend: Nx.BinaryBackend
      )
    end

    prime_pool(n * 4)

    Nx.Testing.assert_equal(
      at(Nx.sort(x, axis: 1), pos),
      by_row.(fn r, c -> n - (r * 4 + 3 - c) end)
    )

    prime_pool(n * 8)
    cum = Nx.cumulative_sum(Nx.as_type(x, :s64), axis: 1)

    Nx.Testing.assert_equal(
      at(cum, pos),
      by_row.(fn r, c -> Enum.sum(for k <- 0..c, do: n - (r * 4 + k)) end) |> Nx.as_type(:s64)
    )

    prime_pool(n * 4)
    w = Nx.window_max(x, {1, 2}, padding: [{0, 0}, {0, 1}])
    Nx.Testing.assert_equal(at(w, pos), by_row.(fn r, c -> n - (r * 4 + c) end))
    prime_pool(n * 4)
    flat = Nx.reshape(x, {n})
    put = Nx.indexed_put(flat, Nx.tensor([[0], [n - 1]]), Nx.tensor([7, 9], type: :s32))

    Nx.Testing.assert_equal(
      at(put, pos),
      Nx.tensor(
        Enum.map(pos, fn
          0 -> 7
          p when p == n - 1 -> 9
          p -> n - p
        end),
        type: :s32,
        backend: Nx.BinaryBackend
      )
    )
  end

  # fft computes in c128 (16 bytes an element), so on lavapipe its inputs stay below one row of
  # workgroups; it shares element_index with every kernel above.
  test "window_scatter_max past one row of workgroups" do
    rows = div(@above, 2) + 1
    n = rows * 2
    pos = positions(n)
    x = Nx.iota({n}, type: :f32) |> Nx.remainder(7)
    source = Nx.iota({rows}, type: :f32) |> Nx.remainder(5) |> Nx.add(1)
    prime_pool(n * 4)
    w = Nx.window_scatter_max(x, source, 0.0, {2}, strides: [2])
    hx = host(x)
    hs = host(source)

    want =
      Enum.map(pos, fn p ->
        row = div(p, 2)
        a = Nx.to_number(hx[2 * row])
        b = Nx.to_number(hx[2 * row + 1])
        chosen = if b > a, do: 2 * row + 1, else: 2 * row
        if p == chosen, do: Nx.to_number(hs[row]), else: 0.0
      end)

    Nx.Testing.assert_equal(at(w, pos), Nx.tensor(want, backend: Nx.BinaryBackend))
  end

  test "dot with more than 2^24 outputs" do
    k = 3
    m = 4097
    a = Nx.iota({m, k}, type: :s32) |> Nx.remainder(7)
    b = Nx.iota({k, m}, type: :s32) |> Nx.remainder(5)
    prime_pool(m * m * 4)
    out = Nx.dot(a, b)
    pos = positions(m * m)
    ha = host(a)
    hb = host(b)

    expected =
      Enum.map(pos, fn p ->
        i = div(p, m)
        j = rem(p, m)
        Nx.dot(ha[i], hb[[.., j]]) |> Nx.to_number()
      end)

    Nx.Testing.assert_equal(
      at(out, pos),
      Nx.tensor(expected, type: :s32, backend: Nx.BinaryBackend)
    )
  end

  # bf16 by bf16 (the f16 tensor cores on GPUs that have them, f32 elsewhere): small integers,
  # exact in bf16 and in every sum, checked at sampled positions; one row and one column hold a
  # value 2^40 apart from the rest (lines the tensor cores leave to the fix-up kernel).
  test "bf16 dot with more than 2^24 outputs, wide lines among them" do
    k = 16
    m = 4097
    a = Nx.iota({m, k}, type: :s32) |> Nx.remainder(7) |> Nx.as_type(:bf16)
    b = Nx.iota({k, m}, type: :s32) |> Nx.remainder(5) |> Nx.as_type(:bf16)
    big = Nx.tensor([1.099511627776e12], type: :bf16)
    a = Nx.indexed_put(a, Nx.tensor([[5, 3]]), big)
    b = Nx.indexed_put(b, Nx.tensor([[2, 4000]]), big)
    prime_pool(m * m * 4)
    out = Nx.dot(a, b)
    pos = [5 * m + 4000, 5 * m + 17, 99 * m + 4000 | positions(m * m)]
    ha = host(a)
    hb = host(b)

    expected =
      Enum.map(pos, fn p ->
        Nx.dot(ha[div(p, m)], hb[[.., rem(p, m)]]) |> Nx.to_number()
      end)

    Nx.Testing.assert_equal(
      at(out, pos),
      Nx.tensor(expected, type: :bf16, backend: Nx.BinaryBackend)
    )
  end

  test "sums and products whose widened operand exceeds the binding limit, in blocks" do
    # u8 sums and products are u32: 4 bytes per element, so past limit / 4 elements the widened
    # copy would not fit one binding.
    n = div(@limit, 4) + 1000
    x = Nx.iota({n}, type: :u8)
    # Each full cycle of 0..255 sums to 32640.
    cycles = div(n, 256)
    tail = rem(n, 256)

    assert Nx.to_number(Nx.sum(x)) ==
             Integer.mod(cycles * 32_640 + div(tail * (tail - 1), 2), 2 ** 32)

    rows = Nx.reshape(x, {2, div(n, 2)})
    sums = Nx.sum(rows, axes: [1])
    half = div(n, 2)
    expected = for r <- 0..1, do: Integer.mod(closed_sum(r * half, half), 2 ** 32)
    Nx.Testing.assert_equal(host(sums), Nx.tensor(expected, type: :u32, backend: Nx.BinaryBackend))
    cols = Nx.sum(Nx.reshape(x, {div(n, 2), 2}), axes: [0], keep_axes: true)
    assert Nx.shape(cols) == {1, 2}
    assert Nx.to_number(Nx.sum(cols)) == Nx.to_number(Nx.sum(x))
    ones = x |> Nx.remainder(1) |> Nx.add(1)
    assert Nx.to_number(Nx.product(ones)) == 1
    # 2^n wraps to 0 in u32; a block boundary must not change that.
    assert Nx.to_number(Nx.product(Nx.add(ones, 1))) == 0
    assert Nx.to_number(Nx.product(Nx.slice(Nx.add(ones, 1), [0], [31]))) == 2 ** 31
  end

  # The sum of iota values (wrapped to u8) over [start, start + count).
  defp closed_sum(start, count) do
    full = fn m -> div(m, 256) * 32_640 + div(rem(m, 256) * (rem(m, 256) - 1), 2) end
    full.(start + count) - full.(start)
  end
end
