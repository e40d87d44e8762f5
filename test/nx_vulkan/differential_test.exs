defmodule Nx.Vulkan.DifferentialTest do
  # Every Nx.Backend callback against Nx.BinaryBackend, for every dtype the device has (f32 f64
  # f16 bf16 s8 s16 s32 s64 u8 u16 u32 u64), on generated shapes (rank 0 to 6, size-1 axes, odd
  # sizes that do not divide a workgroup), special values (NaN, +-Inf, -0.0, integer extremes)
  # and options, from fixed seeds. Each case asserts values, the result's backend and that
  # nothing fell back to the host (assert_device).
  #
  # Inputs stay inside what the BinaryBackend itself can compute: it raises for floor(NaN),
  # 1.0 / 0.0, log(-1), integer division by zero, negative shifts and overflowing exp, and it
  # answers sign(NaN) and sign(-Inf) with 1.0, atan2(y, -Inf) with +pi for every y, tanh(+-Inf)
  # with NaN, and rounds f64 window_scatter results to f32; the device follows C's libm and
  # IEEE 754 there (elementwise_test.exs checks those answers).
  use Nx.Vulkan.DeviceCase, async: true

  @floats [:f32, :f64, :f16, :bf16]
  @ints [:s8, :s16, :s32, :s64, :u8, :u16, :u32, :u64]
  @types @floats ++ @ints
  @seeds [5, 41]

  # assert_device, with the case named in the failure message.
  defp check(label, fun, args, opts \\ []) do
    assert_device(fun, args, opts)
  rescue
    e in ExUnit.AssertionError ->
      reraise %{e | message: "#{label}: #{e.message}"}, __STACKTRACE__
  end

  ## Generators (deterministic: :rand seeded per case)

  defp rng(seed), do: :rand.seed_s(:exsss, {seed, seed * 31 + 7, seed * 101 + 3})

  defp take(state, n, fun) do
    Enum.map_reduce(1..n//1, state, fn _, s -> fun.(s) end)
  end

  # A shape of `rank` axes drawn from sizes that include 1 and odd sizes.
  defp shape(seed, rank) do
    sizes = [1, 2, 3, 5, 7, 1, 4]
    {dims, _} = take(rng(seed), rank, fn s -> :rand.uniform_s(length(sizes), s) end)
    dims |> Enum.map(&Enum.at(sizes, &1 - 1)) |> List.to_tuple()
  end

  @int_limits %{
    s8: {-128, 127},
    s16: {-32768, 32767},
    s32: {-2_147_483_648, 2_147_483_647},
    s64: {-9_223_372_036_854_775_808, 9_223_372_036_854_775_807},
    u8: {0, 255},
    u16: {0, 65535},
    u32: {0, 4_294_967_295},
    u64: {0, 18_446_744_073_709_551_615}
  }

  # Values for `type` in `domain`; floats get NaN/+-Inf/-0.0 mixed in when `specials` is true,
  # integers their extremes unless `domain` limits them.
  defp values(type, n, seed, domain, specials) do
    state = rng(seed)

    {list, _} =
      if type in @floats do
        take(state, n, fn s ->
          {u, s} = :rand.uniform_s(s)
          {float_in(domain, u), s}
        end)
      else
        {lo, hi} = @int_limits[type]

        take(state, n, fn s ->
          {pick, s} = :rand.uniform_s(10, s)
          {small, s} = :rand.uniform_s(41, s)
          {int_in(domain, pick, small - 21, lo, hi), s}
        end)
      end

    if specials and type in @floats and n >= 6 do
      extra = [:nan, :infinity, :neg_infinity, -0.0, 0.0]
      Enum.zip_with(list, Stream.cycle(extra ++ List.duplicate(nil, 7)), &(&2 || &1))
    else
      list
    end
  end

  defp float_in(:any, u), do: (u - 0.5) * 12.0
  defp float_in(:pos, u), do: 0.01 + u * 8.0
  defp float_in(:nonneg, u), do: u * 8.0
  defp float_in(:unit, u), do: (u - 0.5) * 1.98
  defp float_in(:ge1, u), do: 1.0 + u * 8.0
  defp float_in(:small, u), do: (u - 0.5) * 4.0

  defp int_in(:any, pick, small, lo, hi) do
    case pick do
      1 -> lo
      2 -> hi
      3 -> if lo < 0, do: lo + 1, else: hi - 1
      _ -> clamp(small, lo, hi)
    end
  end

  defp int_in(:small, _pick, small, lo, hi), do: clamp(small, lo, hi)
  defp int_in(:nonzero, pick, small, lo, hi), do: int_in(:any, pick, small, lo, hi) |> nonzero()
  defp int_in(:pos, _pick, small, lo, hi), do: clamp(abs(small) + 1, lo, hi)
  defp int_in(:exponent, _pick, small, _lo, _hi), do: rem(abs(small), 5)

  defp nonzero(0), do: 3
  defp nonzero(x), do: x
  defp clamp(x, lo, hi), do: x |> max(lo) |> min(hi)

  defp tensor(type, shape, seed, domain \\ :any, specials \\ false) do
    n = Nx.size(shape)

    Nx.with_default_backend(Nx.BinaryBackend, fn ->
      values(type, n, seed, domain, specials) |> Nx.tensor(type: type) |> Nx.reshape(shape)
    end)
    |> Nx.backend_transfer(Nx.Vulkan.Backend)
  end

  # Tolerances: exact for exactly rounded ops; a unit in the last place of each float type for
  # transcendental functions (the device's f64 routines agree with libm to ~1 ulp).
  defp ulp_tol(:f32), do: [rtol: 2.4e-7, atol: 1.0e-37]
  defp ulp_tol(:f64), do: [rtol: 4.5e-16, atol: 1.0e-300]
  defp ulp_tol(:f16), do: [rtol: 1.0e-3, atol: 1.0e-7]
  defp ulp_tol(:bf16), do: [rtol: 8.0e-3, atol: 1.0e-37]
  defp ulp_tol(_), do: []

  # Sums in another order: a few units of the type's precision.
  defp sum_tol(:f32), do: [rtol: 1.0e-5, atol: 1.0e-5]
  defp sum_tol(:f64), do: [rtol: 1.0e-12, atol: 1.0e-12]
  defp sum_tol(:f16), do: [rtol: 1.0e-2, atol: 1.0e-2]
  defp sum_tol(:bf16), do: [rtol: 3.0e-2, atol: 3.0e-2]
  defp sum_tol(_), do: []

  # Per-type choices live in functions: tests are generated per type, and a comparison of the
  # literal type inside one (`type == :f64`) is always true or always false (a type warning).

  # The BinaryBackend's window_reduce passes plain numbers to the function, so its results are
  # f32 or s32 tensors: window_reduce compares on those two types only.
  defp window_reduce_compared?(type), do: type in [:f32, :s32]

  # The BinaryBackend rounds f64 window_scatter results to f32.
  defp window_scatter_tol(:f64), do: sum_tol(:f32)
  defp window_scatter_tol(type), do: sum_tol(type)

  defp linalg_tol(:f32), do: [atol: 2.0e-4, rtol: 2.0e-4]
  defp linalg_tol(:f64), do: [atol: 1.0e-10, rtol: 1.0e-10]

  defp complex_tol(:c64), do: [atol: 1.0e-6, rtol: 1.0e-6]
  defp complex_tol(:c128), do: [atol: 1.0e-13, rtol: 1.0e-13]

  # c64: bit-identical to the BinaryBackend; c128 within a few ulps.
  defp complex_function_tol(:c64), do: []
  defp complex_function_tol(:c128), do: [atol: 1.0e-300, rtol: 1.0e-15]

  # pow's polar form is ill-conditioned where cos/sin of the angle are small: c128 to 1e-13.
  defp complex_pow_tol(:c64), do: []
  defp complex_pow_tol(:c128), do: [atol: 1.0e-300, rtol: 1.0e-13]

  ## Element-wise

  # {op, float domain, NaN/Inf/-0.0 allowed}
  @float_unary [
    negate: {:any, true},
    abs: {:any, true},
    sign: {:any, false},
    floor: {:any, false},
    ceil: {:any, false},
    round: {:any, false},
    exp: {:small, true},
    expm1: {:small, true},
    log: {:pos, false},
    log1p: {:pos, false},
    sqrt: {:nonneg, true},
    rsqrt: {:pos, false},
    tanh: {:any, false},
    sigmoid: {:any, true},
    sin: {:any, true},
    cos: {:any, true},
    tan: {:any, true},
    asin: {:unit, false},
    acos: {:unit, false},
    atan: {:any, true},
    sinh: {:small, true},
    cosh: {:small, true},
    asinh: {:any, true},
    acosh: {:ge1, false},
    atanh: {:unit, false},
    cbrt: {:any, true},
    erf: {:any, true},
    erfc: {:any, true},
    erf_inv: {:unit, false},
    is_nan: {:any, true},
    is_infinity: {:any, true}
  ]
  @exact_unary [:negate, :abs, :sign, :floor, :ceil, :round, :sqrt, :is_nan, :is_infinity]

  # Exact for exactly rounded ops, a unit in the last place for the others.
  defp unary_tol(op, type) do
    cond do
      op in @exact_unary -> []
      # The BinaryBackend's expm1/log1p are exp(x) - 1 and log(1 + x), inexact near 0.
      op in [:expm1, :log1p] and type == :f64 -> [rtol: 1.0e-13, atol: 1.0e-300]
      true -> ulp_tol(type)
    end
  end

  for type <- @floats, seed <- @seeds do
    test "float unary ops, #{type}, seed #{seed}" do
      type = unquote(type)

      for {{op, {domain, specials}}, i} <- Enum.with_index(@float_unary) do
        t =
          tensor(
            type,
            shape(unquote(seed) + i, rem(i, 4) + 1),
            unquote(seed) * 100 + i,
            domain,
            specials
          )

        check("#{op}", &apply(Nx, op, [&1]), [t], unary_tol(op, type))
      end
    end
  end

  @int_unary [:negate, :abs, :sign, :bitwise_not, :count_leading_zeros, :population_count] ++
               [:floor, :ceil, :round, :is_nan, :is_infinity]

  for type <- @ints do
    test "integer unary ops, #{type}" do
      t = tensor(unquote(type), {3, 7}, 17)
      for op <- @int_unary, do: check("#{op}", &apply(Nx, op, [&1]), [t])
      # Integer inputs to float functions compute in f32.
      assert_device(&Nx.exp/1, [tensor(unquote(type), {9}, 3, :small)], ulp_tol(:f32))
      assert_device(&Nx.sqrt/1, [tensor(unquote(type), {9}, 3, :pos)], ulp_tol(:f32))
    end
  end

  # {op, a domain, b domain, NaN/Inf allowed, exact}
  @float_binary [
    add: {:any, :any, true, true},
    subtract: {:any, :any, true, true},
    multiply: {:any, :any, true, true},
    divide: {:any, :pos, false, true},
    max: {:any, :any, true, true},
    min: {:any, :any, true, true},
    pow: {:pos, :small, false, false},
    remainder: {:any, :pos, false, false},
    atan2: {:any, :any, false, false},
    equal: {:any, :any, true, true},
    not_equal: {:any, :any, true, true},
    greater: {:any, :any, true, true},
    less: {:any, :any, true, true},
    greater_equal: {:any, :any, true, true},
    less_equal: {:any, :any, true, true},
    logical_and: {:any, :any, true, true},
    logical_or: {:any, :any, true, true},
    logical_xor: {:any, :any, true, true}
  ]

  for type <- @floats, seed <- @seeds do
    test "float binary ops with broadcasting, #{type}, seed #{seed}" do
      type = unquote(type)

      for {{op, {da, db, specials, exact}}, i} <- Enum.with_index(@float_binary) do
        rank = rem(i, 5) + 1
        a_shape = shape(unquote(seed) * 7 + i, rank)
        # b broadcasts: a suffix of a's axes, some set to 1
        b_shape =
          a_shape
          |> Tuple.to_list()
          |> Enum.drop(rem(i, rank))
          |> Enum.map(&if(rem(&1 + i, 3) == 0, do: 1, else: &1))
          |> List.to_tuple()

        a = tensor(type, a_shape, unquote(seed) + i, da, specials)
        b = tensor(type, b_shape, unquote(seed) * 3 + i, db, specials)
        tol = if exact, do: [], else: ulp_tol(type)
        check("#{op}(a, b)", &apply(Nx, op, [&1, &2]), [a, b], tol)

        unless op in [:divide, :pow, :remainder],
          do: check("#{op}(b, a)", &apply(Nx, op, [&1, &2]), [b, a], tol)
      end
    end
  end

  # {op, b domain}
  @int_binary [
    add: :any,
    subtract: :any,
    multiply: :any,
    max: :any,
    min: :any,
    quotient: :nonzero,
    remainder: :nonzero,
    bitwise_and: :any,
    bitwise_or: :any,
    bitwise_xor: :any,
    pow: :exponent,
    equal: :any,
    not_equal: :any,
    greater: :any,
    less: :any,
    greater_equal: :any,
    less_equal: :any,
    logical_and: :any,
    logical_or: :any,
    logical_xor: :any,
    divide: :nonzero
  ]

  for type <- @ints do
    test "integer binary ops wrap as the BinaryBackend, #{type}" do
      type = unquote(type)
      {_, bits} = Nx.Type.normalize!(type)
      a = tensor(type, {4, 9}, 23)

      for {op, domain} <- @int_binary do
        b = tensor(type, {9}, 29, domain)
        a = if op == :pow, do: tensor(type, {4, 9}, 23, :small), else: a
        tol = if op == :divide, do: ulp_tol(:f32), else: []
        check("#{op}", &apply(Nx, op, [&1, &2]), [a, b], tol)
      end

      shifts = Nx.tensor(Enum.map(0..8, &rem(&1 * 5, bits)), type: type, backend: Nx.Vulkan.Backend)
      assert_device(&Nx.left_shift/2, [a, shifts])
      assert_device(&Nx.right_shift/2, [a, shifts])
    end
  end

  for type <- @types do
    test "select, clip and mixed-type promotion, #{type}" do
      type = unquote(type)
      a = tensor(type, {3, 1, 5}, 3)
      b = tensor(type, {4, 5}, 5)
      pred = tensor(:u8, {3, 4, 5}, 7, :small)
      assert_device(&Nx.select/3, [pred, a, b])
      assert_device(&Nx.select(&1, &2, 0), [pred, a])
      lo = tensor(type, {5}, 9, :small)
      assert_device(&Nx.clip(&1, &2, Nx.add(&2, 3)), [a, lo[0]])
      # Promotion: the device casts both sides to the merged type first.
      assert_device(&Nx.add/2, [a, tensor(:s8, {5}, 11, :small)])
      assert_device(&Nx.multiply/2, [a, tensor(:f32, {5}, 13, :small)])
    end
  end

  ## Conversions

  test "as_type between every pair of device dtypes, special values included" do
    for from <- @types, to <- @types do
      domain = if from in @floats and to in @ints, do: :small, else: :any
      t = tensor(from, {13}, 31, domain, from in @floats and to in @floats)
      check("#{from} -> #{to}", &Nx.as_type(&1, to), [t])
    end
  end

  test "bitcast between same-size types" do
    for {from, to} <- [f32: :s32, s32: :u32, f64: :u64, s64: :f64, f16: :s16, bf16: :u16, u8: :s8] do
      assert_device(&Nx.bitcast(&1, to), [tensor(from, {2, 5}, 37)])
    end
  end

  test "iota and eye in every dtype" do
    for type <- @types do
      assert_device(
        fn -> Nx.iota({3, 4, 5}, type: type, axis: 1) end,
        []
      )

      assert_device(fn -> Nx.iota({17}, type: type) end, [])
      assert_device(fn -> Nx.eye({2, 3, 4}, type: type) end, [])
    end
  end

  ## Reductions

  for type <- @types, seed <- @seeds do
    test "reductions over generated axes, #{type}, seed #{seed}" do
      type = unquote(type)

      for rank <- 0..6 do
        s = shape(unquote(seed) * 13 + rank, rank)
        t = tensor(type, s, unquote(seed) + rank, if(type in @floats, do: :small, else: :any))
        axes = Enum.filter(0..(rank - 1)//1, &(rem(&1 + unquote(seed), 2) == 0))
        keep = rem(rank, 2) == 0
        opts = [axes: axes, keep_axes: keep]

        assert_device(&Nx.sum(&1, opts), [t], sum_tol(type))
        assert_device(&Nx.product(&1, opts), [Nx.divide(t, 4) |> Nx.as_type(type)], sum_tol(type))
        assert_device(&Nx.reduce_max(&1, opts), [t])
        assert_device(&Nx.reduce_min(&1, opts), [t])
        assert_device(&Nx.all(&1, opts), [t])
        assert_device(&Nx.any(&1, opts), [t])

        if rank > 0 do
          axis = rem(unquote(seed), rank)
          # Ties: small integers repeat.
          ties = tensor(type, s, unquote(seed) + rank, :small) |> Nx.remainder(3)

          for tie_break <- [:low, :high], op <- [:argmax, :argmin] do
            assert_device(
              &apply(Nx, op, [&1, [axis: axis, tie_break: tie_break, keep_axis: keep]]),
              [ties]
            )
          end

          assert_device(&Nx.argmax/1, [t])
        end
      end
    end
  end

  test "float reductions propagate NaN and handle infinities as the BinaryBackend" do
    for type <- @floats do
      t = tensor(type, {4, 6}, 43, :small, true)

      for op <- [:sum, :reduce_max, :reduce_min],
          do: assert_device(&apply(Nx, op, [&1, [axes: [1]]]), [t], sum_tol(type))

      assert_device(&Nx.argmax(&1, axis: 1), [t])
      assert_device(&Nx.argmin(&1, axis: 0), [t])
    end
  end

  # Elixir reduction functions, folded on the device in the BinaryBackend's order: a
  # non-associative function shows the order.
  # The fold keeps the element type: the BinaryBackend raises when the function's result type
  # is not the output's (window_reduce: see window_reduce_compared?/1).
  for type <- [:f32, :f64, :s32, :u8, :bf16] do
    test "reduce and window_reduce with Elixir functions, #{type}" do
      type = unquote(type)
      t = tensor(type, {3, 4, 5}, 307, :small)
      fold = fn x, acc -> Nx.subtract(Nx.multiply(acc, 2), x) |> Nx.as_type(Nx.type(x)) end

      for opts <- [[], [axes: [1]], [axes: [2, 0]], [axes: [0, 2], keep_axes: true]] do
        check("reduce #{inspect(opts)}", &Nx.reduce(&1, 1, opts, fold), [t], sum_tol(type))
      end

      check(
        "reduce max",
        &Nx.reduce(&1, 0, [axes: [1]], fn x, acc -> Nx.as_type(Nx.max(x, acc), Nx.type(x)) end),
        [t]
      )

      if window_reduce_compared?(type) do
        fold = fn x, acc -> Nx.subtract(Nx.multiply(acc, 2), x) end

        for {window, opts} <- [
              {{1, 2, 3}, []},
              {{2, 2, 1}, [strides: [1, 2, 1], padding: :same]},
              {{1, 2, 2}, [padding: [{0, 0}, {1, 2}, {2, 0}], window_dilations: [1, 2, 2]]}
            ] do
          check(
            "window_reduce #{inspect(window)}",
            &Nx.window_reduce(&1, 0, window, opts, fold),
            [t],
            sum_tol(type)
          )
        end
      end
    end
  end

  ## Windows

  for type <- @types do
    test "window reductions and window scatters with padding, strides and dilations, #{type}" do
      type = unquote(type)
      t = tensor(type, {2, 7, 6}, 47, :small)

      for {window, opts} <- [
            {{1, 3, 2}, []},
            {{2, 2, 3}, [strides: [1, 2, 1], padding: :same]},
            {{1, 2, 2}, [padding: [{0, 0}, {1, 2}, {2, 0}], window_dilations: [1, 2, 2]]},
            {{1, 3, 1}, [strides: [1, 3, 2], padding: :valid]}
          ],
          op <- [:window_sum, :window_max, :window_min, :window_product] do
        tol = if op in [:window_sum, :window_product], do: sum_tol(type), else: []
        assert_device(&apply(Nx, op, [&1, window, opts]), [t], tol)
      end

      source = tensor(type, {2, 3, 3}, 53, :small)
      init = Nx.tensor(0, type: type, backend: Nx.Vulkan.Backend)

      for op <- [:window_scatter_max, :window_scatter_min] do
        assert_device(
          &apply(Nx, op, [
            &1,
            &2,
            &3,
            {1, 3, 2},
            [strides: [1, 2, 2], padding: [{0, 0}, {0, 0}, {0, 0}]]
          ]),
          [t, source, init],
          window_scatter_tol(type)
        )
      end

      for op <- [:cumulative_sum, :cumulative_max, :cumulative_min] do
        assert_device(&apply(Nx, op, [&1, [axis: 1, reverse: true]]), [t], sum_tol(type))
      end
    end
  end

  ## Linear algebra

  for type <- @types do
    test "dot with contraction and batch axes, #{type}" do
      type = unquote(type)
      domain = if type in @floats, do: :small, else: :any
      a = tensor(type, {3, 4, 5}, 59, domain)
      b = tensor(type, {3, 5, 2}, 61, domain)
      assert_device(&Nx.dot(&1, [2], [0], &2, [1], [0]), [a, b], sum_tol(type))

      assert_device(
        &Nx.dot(&1, [1, 2], [], &2, [0, 1], []),
        [tensor(type, {2, 3, 4}, 67, domain), tensor(type, {3, 4, 3}, 71, domain)],
        sum_tol(type)
      )

      assert_device(
        &Nx.dot/2,
        [tensor(type, {7}, 73, domain), tensor(type, {7}, 79, domain)],
        sum_tol(type)
      )

      assert_device(&Nx.outer/2, [tensor(type, {3}, 83, domain), tensor(type, {4}, 89, domain)])
    end
  end

  for type <- [:f32, :f64, :f16, :bf16, :s32] do
    test "conv with strides, padding, dilations and groups, #{type}" do
      type = unquote(type)
      input = tensor(type, {4, 4, 7, 6}, 97, :small)

      for {kernel_shape, opts} <- [
            {{6, 4, 3, 2}, [strides: [2, 1], padding: :same]},
            {{4, 2, 2, 2},
             [feature_group_size: 2, input_dilation: [2, 1], kernel_dilation: [1, 2]]},
            {{6, 4, 2, 3}, [batch_group_size: 2, padding: [{1, 0}, {0, 2}]]},
            {{4, 1, 1, 2}, [feature_group_size: 4, batch_group_size: 1, strides: [3, 2]]}
          ] do
        kernel = tensor(type, kernel_shape, 101, :small)
        assert_device(&Nx.conv(&1, &2, opts), [input, kernel], sum_tol(type))
      end
    end
  end

  for type <- [:f32, :f64] do
    test "triangular_solve in every orientation, #{type}" do
      type = unquote(type)

      a =
        tensor(type, {4, 4}, 103, :small)
        |> Nx.add(Nx.multiply(Nx.eye(4, type: type, backend: Nx.Vulkan.Backend), 8))

      b = tensor(type, {4, 3}, 107, :small)

      for lower <- [true, false], left <- [true, false], transform <- [:none, :transpose] do
        lhs = if lower, do: Nx.tril(a), else: Nx.triu(a)
        rhs = if left, do: b, else: Nx.transpose(b)
        opts = [lower: lower, left_side: left, transform_a: transform]
        assert_device(&Nx.LinAlg.triangular_solve(&1, &2, opts), [lhs, rhs], sum_tol(type))
      end
    end
  end

  # Nx.LinAlg's blocks (QR, Cholesky, LU, eigh, SVD, solve, invert, determinant...) run through
  # the Nx.Backend callbacks above: all of them must stay on the device.
  for type <- [:f32, :f64] do
    test "linear-algebra blocks, #{type}" do
      type = unquote(type)
      tol = linalg_tol(type)
      m = tensor(type, {4, 4}, 227, :small)
      spd = Nx.add(Nx.dot(m, Nx.transpose(m)), Nx.multiply(Nx.eye(4, type: type), 4))
      b = tensor(type, {4, 2}, 229, :small)

      check("qr", &Nx.LinAlg.qr/1, [m], tol)
      check("cholesky", &Nx.LinAlg.cholesky/1, [spd], tol)
      check("lu", &Nx.LinAlg.lu/1, [spd], tol)
      check("solve", &Nx.LinAlg.solve/2, [spd, b], tol)
      check("invert", &Nx.LinAlg.invert/1, [spd], tol)
      check("determinant", &Nx.LinAlg.determinant/1, [spd], tol)
      check("norm", &Nx.LinAlg.norm/1, [m], tol)
      check("eigh", &Nx.LinAlg.eigh(&1, max_iter: 50), [spd], tol)
      check("svd", &Nx.LinAlg.svd(&1, max_iter: 50), [spd], tol)
      check("pinv", &Nx.LinAlg.pinv/1, [spd], tol)
      check("matrix_power", &Nx.LinAlg.matrix_power(&1, 3), [m], tol)
    end
  end

  for type <- @types do
    test "logical_not, all_close and other blocks, #{type}" do
      type = unquote(type)
      a = tensor(type, {3, 5}, 233, :small)
      b = tensor(type, {3, 5}, 239, :small)
      assert_device(&Nx.logical_not/1, [a])
      assert_device(&Nx.all_close/2, [a, b])
      assert_device(&Nx.all_close(&1, &1), [a])

      float = if type in @floats, do: type, else: :f32
      assert_device(&Nx.mean(&1, axes: [1]), [a], sum_tol(float))

      assert_device(&Nx.standard_deviation/1, [a], sum_tol(:f32))
    end
  end

  ## Layout

  for type <- @types do
    test "layout callbacks, #{type}" do
      type = unquote(type)
      t = tensor(type, {2, 3, 5}, 109)
      assert_device(&Nx.reshape(&1, {5, 6}), [t])
      assert_device(&Nx.squeeze/1, [tensor(type, {1, 3, 1}, 113)])
      assert_device(&Nx.broadcast(&1, {4, 2, 3, 5}), [t])
      assert_device(&Nx.broadcast(&1, {2, 3, 5}, axes: [0, 2]), [tensor(type, {2, 5}, 127)])
      assert_device(&Nx.transpose(&1, axes: [2, 0, 1]), [t])
      assert_device(&Nx.pad(&1, 0, [{1, -1, 1}, {-1, 2, 0}, {0, 0, 2}]), [t])
      assert_device(&Nx.reverse(&1, axes: [0, 2]), [t])
      assert_device(&Nx.concatenate([&1, &2], axis: 1), [t, tensor(type, {2, 4, 5}, 131)])
      assert_device(&Nx.stack([&1, &2], axis: 2), [t, tensor(type, {2, 3, 5}, 137)])
      assert_device(&Nx.slice(&1, [1, 0, 1], [1, 2, 3], strides: [1, 2, 2]), [t])
      # Dynamic starts, clamped as in the BinaryBackend.
      start = Nx.tensor(4, backend: Nx.Vulkan.Backend)
      assert_device(&Nx.slice(&1, [0, &2, 1], [2, 2, 3]), [t, start])
      assert_device(&Nx.put_slice(&1, [0, &3, 2], &2), [t, tensor(type, {1, 2, 2}, 139), start])
      idx = Nx.tensor([[1, 0, 4], [0, 2, 1], [1, 2, 0]], backend: Nx.Vulkan.Backend)
      assert_device(&Nx.gather/2, [t, idx])
      assert_device(&Nx.indexed_add/3, [t, idx, tensor(type, {3}, 149, :small)])
      assert_device(&Nx.indexed_put/3, [t, idx, tensor(type, {3}, 151)])

      assert_device(&Nx.take(&1, &2, axis: 2), [
        t,
        Nx.tensor([4, 0, 4, 2], backend: Nx.Vulkan.Backend)
      ])

      assert_device(&Nx.take_along_axis(&1, &2, axis: 1), [
        t,
        Nx.tensor([[[2, 1, 0, 1, 2]], [[0, 0, 1, 2, 2]]], backend: Nx.Vulkan.Backend)
      ])
    end
  end

  ## Fourier transforms

  # Lengths: powers of two, odd (DFT leaves), even with odd parts, and >= 1024 non-powers of two
  # (Bluestein); padding and slicing to :length. c64 results round from f64 like the
  # BinaryBackend's; c128 ones may differ in the last place where a twiddle's sin/cos does.
  for {input_type, tol} <- [f32: [atol: 2.0e-6, rtol: 1.0e-6], c128: [atol: 1.0e-13, rtol: 1.0e-13]] do
    test "fft and ifft of #{input_type} rows of many lengths" do
      for {n, i} <- Enum.with_index([2, 3, 4, 5, 6, 8, 9, 12, 15, 16, 31, 32, 100, 1024, 1030]) do
        t = tensor(:f64, {2, n}, 191 + i, :small) |> Nx.as_type(unquote(input_type))
        check("fft n=#{n}", &Nx.fft/1, [t], unquote(tol))
        check("ifft n=#{n}", &Nx.ifft/1, [t], unquote(tol))
      end

      t = tensor(:f64, {3, 10}, 197, :small) |> Nx.as_type(unquote(input_type))
      check("fft length 16", &Nx.fft(&1, length: 16), [t], unquote(tol))
      check("ifft length 7", &Nx.ifft(&1, length: 7), [t], unquote(tol))
      check("fft2", &Nx.fft2/1, [t], unquote(tol))
      check("ifft2", &Nx.ifft2/1, [t], unquote(tol))
    end
  end

  test "fft along any axis (the BinaryBackend misplaces axes of rank >= 3: compare by hand)" do
    t = tensor(:f64, {4, 6, 5}, 199, :small)

    for axis <- 0..2, length <- [3, 4, 8] do
      actual = Nx.fft(t, axis: axis, length: length)
      assert %Nx.Vulkan.Backend{} = actual.data

      rest = Enum.reject(0..2, &(&1 == axis))

      back =
        Enum.map(0..2, fn d -> if d == axis, do: 2, else: Enum.find_index(rest, &(&1 == d)) end)

      expected =
        Nx.with_default_backend(Nx.BinaryBackend, fn ->
          t
          |> Nx.backend_copy(Nx.BinaryBackend)
          |> Nx.transpose(axes: rest ++ [axis])
          |> Nx.fft(length: length)
          |> Nx.transpose(axes: back)
        end)

      compare(actual, expected, atol: 1.0e-13, rtol: 1.0e-13)
    end
  end

  for type <- [:c64, :c128] do
    test "complex layout and element-wise ops stay on the device, #{type}" do
      type = unquote(type)
      re = tensor(:f64, {2, 3, 5}, 211, :small)
      im = tensor(:f64, {2, 3, 5}, 223, :small)
      t = Nx.complex(re, im) |> Nx.as_type(type)
      assert_device(&Nx.transpose(&1, axes: [2, 0, 1]), [t])
      assert_device(&Nx.pad(&1, 0, [{1, -1, 1}, {0, 1, 0}, {0, 0, 2}]), [t])
      assert_device(&Nx.reverse(&1, axes: [1]), [t])
      assert_device(&Nx.concatenate([&1, &2], axis: 2), [t, t])
      assert_device(&Nx.slice(&1, [1, 0, 1], [1, 2, 3]), [t])
      assert_device(&Nx.broadcast(&1, {4, 2, 3, 5}), [t])
      assert_device(&Nx.add(&1, Nx.conjugate(&1)), [t])
      assert_device(&Nx.multiply/2, [t, Nx.reverse(t)], rtol: 1.0e-6, atol: 1.0e-6)

      assert_device(
        fn -> Nx.broadcast(Nx.tensor(Complex.new(1.5, -2.0), type: type), {3, 2}) end,
        []
      )
    end
  end

  # Complex reductions, dot, conv, triangular_solve, indexed updates, gather/select and complex
  # functions: computed in f64 and rounded once, as the BinaryBackend does (c64 bit-identical).
  for type <- [:c64, :c128] do
    # Each of its ~30 checks builds pipelines of the complex kernels (one per op) on first use,
    # and again through the compiler: on a 2-core lavapipe host that is most of a minute.
    test "complex reductions, linear algebra and functions, #{type}" do
      type = unquote(type)
      tol = complex_tol(type)

      z =
        Nx.complex(tensor(:f64, {3, 4}, 241, :small), tensor(:f64, {3, 4}, 251, :small))
        |> Nx.as_type(type)

      check("sum", &Nx.sum(&1, axes: [1], keep_axes: true), [z], tol)
      check("product", &Nx.product(&1, axes: [0]), [z], tol)
      check("product all", &Nx.product/1, [Nx.divide(z, 2)], tol)
      check("dot", &Nx.dot(&1, [1], &2, [1]), [z, z], tol)
      pow_tol = complex_pow_tol(type)
      check("pow", &Nx.pow/2, [z, Nx.reverse(z)], pow_tol)
      check("pow real exponent", &Nx.pow(&1, 2.5), [z], pow_tol)
      # Every unary function Nx allows on complex numbers, as the complex library evaluates it.
      for op <-
            [:sqrt, :rsqrt, :cbrt, :exp, :expm1, :log, :log1p, :sigmoid, :sin, :cos, :tan] ++
              [:sinh, :cosh, :tanh, :asin, :acos, :atan, :asinh, :acosh, :atanh] do
        check(
          "#{op}",
          &apply(Nx, op, [&1]),
          [z],
          complex_function_tol(type)
        )
      end

      m = Nx.dot(z, [1], Nx.conjugate(z), [1]) |> Nx.add(Nx.multiply(Nx.eye(3, type: type), 6))
      b = Nx.slice(z, [0, 0], [3, 2])

      check(
        "triangular_solve",
        &Nx.LinAlg.triangular_solve(&1, &2, lower: false),
        [Nx.triu(m), b],
        tol
      )

      check("cholesky", &Nx.LinAlg.cholesky/1, [m], tol)
      check("determinant", &Nx.LinAlg.determinant/1, [m], tol)

      idx = Nx.tensor([[0, 1], [2, 3], [0, 1]], backend: Nx.Vulkan.Backend)
      upd = Nx.slice(z, [1, 0], [1, 3]) |> Nx.reshape({3})
      check("indexed_add", &Nx.indexed_add/3, [z, idx, upd], tol)
      check("indexed_put", &Nx.indexed_put/3, [z, idx, upd])
      check("gather", &Nx.gather/2, [z, idx])
      check("select", &Nx.select(&1, &2, Nx.conjugate(&2)), [Nx.greater(Nx.real(z), 0), z])

      x = Nx.reshape(z, {1, 2, 2, 3})
      k = Nx.slice(z, [0, 0], [2, 2]) |> Nx.reshape({1, 2, 2, 1})
      check("conv", &Nx.conv/2, [x, k], tol)
    end
  end

  ## Sorting

  for type <- @types do
    test "sort, argsort (stable) and top_k in both directions, #{type}" do
      type = unquote(type)
      # Small values repeat, so stability shows in argsort; floats carry NaN and infinities.
      t = tensor(type, {3, 11}, 157, :small, true)

      for direction <- [:asc, :desc], axis <- [0, 1] do
        assert_device(&Nx.sort(&1, axis: axis, direction: direction), [t])
        assert_device(&Nx.argsort(&1, axis: axis, direction: direction, stable: true), [t])
      end

      assert_device(&Nx.top_k(&1, k: 4), [tensor(type, {2, 9}, 163, :any)])
    end
  end

  ## Gradients

  # d/dx sum(f(x)) through Nx.Defn's evaluator: every op of the backward pass on the device.
  @differentiable [
    exp: :small,
    log: :pos,
    sin: :any,
    cos: :any,
    tan: :unit,
    tanh: :any,
    sigmoid: :any,
    sqrt: :pos,
    rsqrt: :pos,
    asin: :unit,
    acos: :unit,
    atan: :any,
    sinh: :small,
    cosh: :small,
    asinh: :any,
    acosh: :ge1,
    atanh: :unit,
    erf: :any,
    erfc: :any,
    cbrt: :pos,
    expm1: :small,
    log1p: :pos,
    abs: :any,
    negate: :any
  ]

  for type <- [:f32, :f64] do
    test "gradients of the differentiable unary ops, #{type}" do
      type = unquote(type)

      for {{op, domain}, i} <- Enum.with_index(@differentiable) do
        t = tensor(type, {2, 5}, 167 + i, domain)
        grad = fn x -> Nx.Defn.grad(x, &Nx.sum(apply(Nx, op, [&1]))) end
        assert_device(grad, [t], sum_tol(type))
      end
    end

    test "gradients through binary ops, reductions, dot, conv and windows, #{type}" do
      type = unquote(type)
      a = tensor(type, {3, 4}, 173, :pos)
      b = tensor(type, {4}, 179, :pos)
      tol = sum_tol(type)

      for op <- [:add, :subtract, :multiply, :divide, :pow, :max, :min, :atan2] do
        grad = fn x, y -> Nx.Defn.grad({x, y}, fn {x, y} -> Nx.sum(apply(Nx, op, [x, y])) end) end
        assert_device(grad, [a, b], tol)
      end

      softmax_loss = fn x, w ->
        Nx.Defn.grad({x, w}, fn {x, w} ->
          logits = Nx.dot(x, w |> Nx.reshape({4, 1}) |> Nx.multiply(Nx.iota({1, 3}, type: type)))
          max = Nx.reduce_max(logits, axes: [1], keep_axes: true)
          shifted = Nx.subtract(logits, max)
          Nx.mean(Nx.subtract(shifted, Nx.log(Nx.sum(Nx.exp(shifted), axes: [1], keep_axes: true))))
        end)
      end

      assert_device(softmax_loss, [a, b], tol)

      conv_loss = fn x, k ->
        Nx.Defn.grad({x, k}, fn {x, k} -> Nx.sum(Nx.conv(x, k, padding: :same) |> Nx.tanh()) end)
      end

      assert_device(
        conv_loss,
        [tensor(type, {2, 2, 5, 5}, 181, :small), tensor(type, {3, 2, 3, 3}, 191, :small)],
        tol
      )

      window_loss = fn x ->
        Nx.Defn.grad(x, fn x ->
          Nx.add(
            Nx.sum(Nx.window_max(x, {1, 2}, strides: [1, 2])),
            Nx.sum(Nx.window_sum(x, {2, 2}) |> Nx.multiply(Nx.slice(x, [0, 0], [2, 3])))
          )
        end)
      end

      assert_device(window_loss, [a], tol)

      reductions = fn x ->
        Nx.Defn.grad(x, fn x ->
          Nx.sum(Nx.product(x, axes: [0]))
          |> Nx.add(Nx.sum(Nx.reduce_max(x, axes: [1])))
          |> Nx.add(Nx.sum(Nx.cumulative_sum(x, axis: 1)))
        end)
      end

      assert_device(reductions, [a], tol)
    end
  end
end
