defmodule Nx.Vulkan.ElementwiseTest do
  use Nx.Vulkan.DeviceCase, async: true

  @float_types [:f32, :f64]

  describe "binary arithmetic, broadcast through strides" do
    for type <- @float_types, op <- [:add, :subtract, :multiply, :divide, :max, :min] do
      test "#{op} #{type}" do
        a = random({3, 1, 5}, unquote(type), 4.0, 1)
        b = random({4, 1}, unquote(type), 4.0, 2)
        assert_device(&apply(Nx, unquote(op), [&1, &2]), [a, b])
        assert_device(&apply(Nx, unquote(op), [&1, &2]), [b, a])
        assert_device(&apply(Nx, unquote(op), [&1, 2.5]), [a])
      end
    end

    for type <- @float_types do
      test "pow #{type}, including negative bases and special exponents" do
        base = dev([-2.0, -0.5, 0.0, 0.5, 2.0, 3.0, -3.0, 1.0], type: unquote(type))
        exp = dev([3.0, 2.0, 2.0, -1.5, 0.5, -2.0, 0.0, 7.3], type: unquote(type))
        assert_device(&Nx.pow/2, [base, exp])
        # A negative base with a fractional exponent is NaN here; the BinaryBackend raises.
        assert Nx.pow(dev(-2.0, type: unquote(type)), 0.5) |> Nx.is_nan() |> Nx.to_number() == 1
      end
    end

    test "float remainder is fmod (sign of the dividend), exact" do
      for type <- [:f32, :f64] do
        a = dev([5.5, -5.5, 7.0, 1.0e10, -0.0, 3.0], type: type)
        b = dev([2.0, 2.0, -2.5, 3.3, 1.0, 0.1], type: type)
        assert_device(&Nx.remainder/2, [a, b])
      end
    end

    test "mixed types are cast on the device first" do
      a = dev([1, 2, 3], type: :s32)
      b = dev([0.5, 1.5, 2.5], type: :f32)
      assert_device(&Nx.add/2, [a, b])
      assert_device(&Nx.divide/2, [a, dev([2, 4, 3])])
    end

    test "rank-6 broadcast and odd sizes" do
      a = random({2, 3, 1, 5, 1, 7}, :f32, 2.0, 3)
      b = random({1, 3, 4, 1, 6, 1}, :f32, 2.0, 4)
      assert_device(&Nx.multiply/2, [a, b])
    end

    test "NaN and infinities propagate like the BinaryBackend" do
      a = dev([:nan, :infinity, :neg_infinity, 1.0, -0.0])
      b = dev([1.0, :infinity, 2.0, :nan, 0.0])

      for op <- [:add, :subtract, :multiply, :divide, :max, :min] do
        assert_device(&apply(Nx, op, [&1, &2]), [a, b])
      end
    end
  end

  describe "integer arithmetic" do
    for type <- [:s8, :s32, :s64, :u8, :u32] do
      test "wrap-around and bitwise #{type}" do
        {kind, _} = Nx.Type.normalize!(unquote(type))
        a_data = if kind == :s, do: [-7, 100, 127, -128, 5, 0], else: [7, 100, 255, 128, 5, 0]
        a = dev(a_data, type: unquote(type))
        b = dev([2, 3, 1, 2, 0, 9], type: unquote(type))

        for op <- [
              :add,
              :subtract,
              :multiply,
              :max,
              :min,
              :bitwise_and,
              :bitwise_or,
              :bitwise_xor,
              :left_shift,
              :right_shift
            ] do
          assert_device(&apply(Nx, op, [&1, &2]), [a, b])
        end

        nonzero = dev([2, 3, 1, 2, 4, 9], type: unquote(type))
        assert_device(&Nx.quotient/2, [a, nonzero])
        assert_device(&Nx.remainder/2, [a, nonzero])
        assert_device(&Nx.pow/2, [a, dev([2, 3, 0, 1, 2, 5], type: unquote(type))])
      end
    end

    test "integer unary ops" do
      t = dev([-5, 0, 7, -2_147_483_648, 2_147_483_647], type: :s32)

      for op <- [:negate, :abs, :sign, :bitwise_not, :count_leading_zeros, :population_count] do
        assert_device(&apply(Nx, op, [&1]), [t])
      end
    end
  end

  describe "unary math" do
    for type <- @float_types,
        op <- [
          :exp,
          :expm1,
          :log,
          :log1p,
          :sqrt,
          :rsqrt,
          :tanh,
          :sigmoid,
          :negate,
          :abs,
          :sign,
          :floor,
          :ceil,
          :round
        ] do
      test "#{op} #{type}" do
        t = random({7, 13}, unquote(type), 3.0, 5)
        t = if unquote(op) in [:log, :sqrt, :rsqrt], do: Nx.abs(t), else: t
        t = if unquote(op) == :log1p, do: Nx.add(Nx.abs(t), -0.5), else: t
        # f64 math is the crate's own (about half an ulp); f32 rounds once from f64. The
        # BinaryBackend computes expm1 as exp(x) - 1 and log1p as log(1 + x), which lose digits
        # near 0 that the device keeps, hence the looser bound for those two.
        tol =
          cond do
            unquote(op) in [:expm1, :log1p] -> [rtol: 1.0e-13, atol: 1.0e-300]
            unquote(type) == :f64 -> [rtol: 4.0e-16, atol: 1.0e-300]
            true -> [rtol: 1.2e-7, atol: 1.0e-38]
          end

        assert_device(&apply(Nx, unquote(op), [&1]), [t], tol)
      end
    end

    test "f32 trigonometric and hyperbolic functions (f64 routines rounded once)" do
      t = random({500}, :f32, 3.0, 17)
      unit = random({500}, :f32, 0.999, 18)

      for op <- [:sin, :cos, :tan, :atan, :sinh, :cosh, :asinh, :cbrt] do
        assert_device(&apply(Nx, op, [&1]), [t], rtol: 2.0e-7, atol: 1.0e-30)
      end

      for op <- [:asin, :acos, :atanh],
          do: assert_device(&apply(Nx, op, [&1]), [unit], rtol: 2.0e-7, atol: 1.0e-30)

      assert_device(&Nx.acosh/1, [Nx.add(Nx.abs(t), 1.0)], rtol: 2.0e-7, atol: 1.0e-30)
      assert_device(&Nx.atan2/2, [t, unit], rtol: 2.0e-7, atol: 1.0e-30)

      assert_device(&Nx.atan2/2, [
        dev([0.0, -0.0, 0.0, -0.0, 1.0, -1.0]),
        dev([0.0, 0.0, -0.0, -0.0, -2.0, -2.0])
      ])
    end

    test "f32 erf and erfc" do
      t = random({400}, :f32, 4.0, 71)
      assert_device(&Nx.erf/1, [t], rtol: 2.0e-7, atol: 1.0e-30)
      assert_device(&Nx.erfc/1, [t], rtol: 2.0e-7, atol: 1.0e-30)

      assert_device(&Nx.erfc/1, [dev([5.0, 9.0, -3.0, 0.0, 2.4999, 2.5001])],
        rtol: 1.0e-6,
        atol: 1.0e-40
      )
    end

    test "erf_inv with the complex library's polynomials" do
      t = random({400}, :f32, 0.999, 73)
      assert_device(&Nx.erf_inv/1, [t])
      assert_device(&Nx.erf_inv/1, [Nx.as_type(t, :f64)], rtol: 1.0e-14, atol: 1.0e-300)
      assert_device(&Nx.erf_inv/1, [dev([0.0, -0.0, 1.0, -1.0, 0.9999])])
    end

    # glibc's libm (Erlang's :math) computes these within ~0.5 ulp; the device's fdlibm-style
    # routines agree with it on 92-100% of inputs and stay within 1 ulp (bench/math_check.exs).
    test "f64 trigonometric, hyperbolic, error and cube-root functions on the device" do
      wide = random({2000}, :f64, 30.0, 19)
      unit = random({2000}, :f64, 1.0, 20)

      huge =
        dev([1.0e22, -1.0e300, 6_381_956_970_095_103.0 * 2.0 ** 797, 1.0e6, 1.7e308, 3.0e9],
          type: :f64
        )

      ulp = [rtol: 2.3e-16, atol: 1.0e-300]

      for op <- [:sin, :cos, :tan, :atan, :sinh, :cosh, :asinh, :cbrt, :erf, :erfc, :tanh],
          do: assert_device(&apply(Nx, op, [&1]), [wide], ulp)

      for op <- [:asin, :acos, :atanh], do: assert_device(&apply(Nx, op, [&1]), [unit], ulp)
      assert_device(&Nx.acosh/1, [Nx.add(Nx.abs(wide), 1.0)], ulp)
      # Payne-Hanek reduction: huge arguments keep their digits (glibc is 8 ulps off on the hard
      # case 6381956970095103 * 2^797, where the device is correctly rounded).
      for op <- [:sin, :cos],
          do: assert_device(&apply(Nx, op, [&1]), [huge], rtol: 2.0e-15, atol: 1.0e-18)
    end

    test "f64 special values" do
      specials = dev([0.0, -0.0, :infinity, :neg_infinity, :nan, 1.0, -1.0, 5.0e-324], type: :f64)

      for op <- [:sin, :cos, :tan, :atan, :sinh, :cosh, :asinh, :cbrt, :erf, :erfc, :asin, :acos],
          do: assert_device(&apply(Nx, op, [&1]), [specials])

      # The BinaryBackend answers tanh(+-Inf) with NaN; the device, as C's tanh, with +-1.
      assert Nx.to_flat_list(Nx.tanh(dev([:infinity, :neg_infinity], type: :f64))) == [1.0, -1.0]
    end

    # Where the BinaryBackend's answers are off (term ordering puts atoms above numbers, so
    # sign(-Inf) and sign(NaN) are 1.0; atan2(y, -Inf) is +pi for every y) or it raises (floor
    # of NaN, x / 0.0), the device answers as C and IEEE 754 do.
    test "IEEE answers where the BinaryBackend has none or a wrong one" do
      for type <- [:f32, :f64] do
        t = dev([:nan, :infinity, :neg_infinity, -0.0, 0.0, -2.5], type: type)
        assert Nx.to_flat_list(Nx.sign(t)) == [:nan, 1.0, -1.0, -0.0, 0.0, -1.0]
        assert Nx.to_binary(Nx.sign(t[3])) == Nx.to_binary(Nx.tensor(-0.0, type: type))
        assert Nx.to_flat_list(Nx.floor(t)) == [:nan, :infinity, :neg_infinity, -0.0, 0.0, -3.0]

        assert Nx.to_flat_list(Nx.divide(dev([1.0, -1.0, 0.0], type: type), 0.0)) == [
                 :infinity,
                 :neg_infinity,
                 :nan
               ]

        y = dev([-1.0, 1.0, -0.0, 0.0], type: type)
        x = dev([:neg_infinity, :neg_infinity, -1.0, -1.0], type: type)
        pi = Nx.to_number(Nx.tensor(:math.pi(), type: type))
        assert Nx.to_flat_list(Nx.atan2(y, x)) == [-pi, pi, -pi, pi]
      end
    end

    test "f32 exp/log/tanh/sigmoid round exactly like the BinaryBackend on typical inputs" do
      t = random({1000}, :f32, 8.0, 11)

      for op <- [:exp, :tanh, :sigmoid] do
        assert_device(&apply(Nx, op, [&1]), [t])
      end

      assert_device(&Nx.log/1, [Nx.abs(t)])
    end

    test "special values" do
      t = dev([:nan, :infinity, :neg_infinity, 0.0, -0.0, 1.0e-30, 88.0, -104.0])

      for op <- [:exp, :sigmoid, :negate, :abs] do
        assert_device(&apply(Nx, op, [&1]), [t])
      end

      # floor/ceil/round keep NaN and infinities (the BinaryBackend raises on them).
      for op <- [:floor, :ceil, :round] do
        assert_device(&apply(Nx, op, [&1]), [dev([-2.5, -0.5, 0.5, 1.5, 2.5, -0.0, 1.0e-30])])

        assert Nx.to_flat_list(apply(Nx, op, [dev([:nan, :infinity, :neg_infinity])])) == [
                 :nan,
                 :infinity,
                 :neg_infinity
               ]
      end

      # tanh(+-Inf) is +-1 here; the BinaryBackend (complex tanh) gives NaN.
      assert Nx.to_flat_list(Nx.tanh(t)) ==
               Nx.to_flat_list(dev([:nan, 1.0, -1.0, 0.0, -0.0, 1.0e-30, 1.0, -1.0]))

      # expm1(1.0e-30) is 1.0e-30 here; the BinaryBackend's exp(x) - 1 gives 0.0.
      assert_device(&Nx.expm1/1, [dev([0.0, -0.0, 1.0e-30, 88.0, -104.0])],
        atol: 1.0e-29,
        rtol: 1.0e-7
      )

      assert_device(&Nx.log/1, [dev([0.0, -1.0, :infinity, :nan, 1.0])])
      assert_device(&Nx.sqrt/1, [dev([0.0, -0.0, :infinity, :nan, 4.0])])
      # sqrt of a negative number is NaN here; the BinaryBackend raises.
      assert Nx.to_flat_list(Nx.sqrt(dev([-1.0]))) == [:nan]
    end
  end

  describe "comparisons and select" do
    for type <- [:f32, :f64, :s32] do
      test "comparisons #{type} return u8 on the device" do
        a = dev([1, 2, 3, 4, 5, 6], type: unquote(type)) |> Nx.reshape({2, 3})
        b = dev([3, 2, 1], type: unquote(type))

        for op <- [
              :equal,
              :not_equal,
              :greater,
              :less,
              :greater_equal,
              :less_equal,
              :logical_and,
              :logical_or,
              :logical_xor
            ] do
          result = assert_device(&apply(Nx, op, [&1, &2]), [a, b])
          assert result.type == {:u, 8}
        end
      end
    end

    test "comparisons with NaN" do
      a = dev([:nan, 1.0, :nan])
      b = dev([:nan, :nan, 1.0])

      for op <- [:equal, :not_equal, :greater, :less, :greater_equal, :less_equal] do
        assert_device(&apply(Nx, op, [&1, &2]), [a, b])
      end
    end

    test "select broadcasts predicate and branches" do
      pred = dev([[1, 0, 0, 1], [0, 0, 1, 1], [1, 1, 1, 0]], type: :u8)
      on_true = random({4}, :f32, 1.0, 1)
      on_false = dev(-1.0)
      assert_device(&Nx.select/3, [pred, on_true, on_false])

      assert_device(&Nx.select/3, [
        dev([1, 0, 2], type: :s32),
        dev([1, 2, 3], type: :f64),
        dev([4, 5, 6], type: :f64)
      ])
    end

    test "clip" do
      assert_device(&Nx.clip(&1, -1.0, 1.5), [random({5, 5}, :f32, 3.0, 2)])
    end
  end

  # exp and sigmoid of f32 take a short f64 evaluation that gives way to the full routine near
  # rounding points (math64.glsl); the two must agree everywhere (bench/f32_exhaustive.exs checks
  # all 2^32 inputs). Here 2^20 bit patterns spread over every exponent and both signs.
  test "f32 exp and sigmoid equal the f64 routines rounded to f32, over 2^20 patterns" do
    x =
      Nx.iota({1_048_576}, type: :u32, backend: Nx.Vulkan.Backend)
      |> Nx.multiply(4096)
      |> Nx.add(1229)
      |> Nx.bitcast(:f32)

    for fun <- [&Nx.exp/1, &Nx.sigmoid/1] do
      short = Nx.bitcast(fun.(x), :u32)
      full = x |> Nx.as_type(:f64) |> fun.() |> Nx.as_type(:f32) |> Nx.bitcast(:u32)
      assert Nx.to_number(Nx.sum(Nx.not_equal(short, full))) == 0
    end
  end

  describe "as_type" do
    test "float to int: truncation, NaN to 0, infinities saturate" do
      t = dev([-1.7, 2.9, :nan, :infinity, :neg_infinity, 300.5, -129.0])

      for type <- [:s8, :u8, :s32, :s64, :u16, :u64] do
        assert_device(&Nx.as_type(&1, type), [t])
      end
    end

    test "int to int wraps, int to float rounds" do
      t = dev([-1, 255, 256, 65_537, -2_147_483_648, 2_147_483_647], type: :s64)

      for type <- [:s8, :u8, :s16, :u16, :s32, :u32, :f32, :f64, :f16, :bf16] do
        assert_device(&Nx.as_type(&1, type), [t])
      end
    end

    test "float to float" do
      t = dev([1.0e-10, 3.14159265358979, 65_520.0, 1.0e39, -0.0], type: :f64)

      for type <- [:f32, :f16, :bf16] do
        assert_device(&Nx.as_type(&1, type), [t])
      end

      assert_device(&Nx.as_type(&1, :f64), [dev([1.5, -2.25], type: :bf16)])
      assert_device(&Nx.as_type(&1, :f32), [dev([1.5, -2.25], type: :f16)])
    end

    # 4-byte to 2-byte casts go eight elements a step (16-byte loads and stores), the other
    # narrow pairs four: every length up to two steps past a multiple, and a long one.
    test "vector steps and their ragged tails, every length" do
      for n <- Enum.to_list(1..19) ++ [4099],
          {from, to} <- [{:f32, :f16}, {:f32, :bf16}, {:s32, :s16}, {:f32, :u16}, {:s16, :f32}] do
        t = random({n}, :f32, 70_000.0, n) |> Nx.as_type(from)
        assert_device(&Nx.as_type(&1, to), [t])
      end
    end

    # Every f16 and bf16 bit pattern (NaNs, subnormals and infinities among them), and the f32
    # and f64 values at every f16 rounding boundary (each midpoint, a hair on either side of it,
    # and the f16 value itself): bit for bit the BinaryBackend's, through the four-element path
    # and its partial last group (the lengths are not multiples of 4).
    test "f16 and bf16 to and from f32 and f64 at every rounding boundary, bit for bit" do
      host = fn fun -> Nx.with_default_backend(Nx.BinaryBackend, fun) end
      patterns = host.(fn -> Nx.iota({65_537}) |> Nx.remainder(65_536) |> Nx.as_type(:u16) end)

      for narrow <- [:f16, :bf16], wide <- [:f32, :f64] do
        same_bits!(Nx.bitcast(patterns, narrow), &Nx.as_type(&1, wide))
      end

      # The finite non-negative f16 values in order, as f32; their sign-flipped copies.
      finite = host.(fn -> Nx.bitcast(Nx.iota({31_745}, type: :u16), :f16) |> Nx.as_type(:f32) end)

      boundaries =
        host.(fn ->
          low = Nx.slice(finite, [0], [31_744])
          mid = Nx.divide(Nx.add(low, Nx.slice(finite, [1], [31_744])), 2)
          step = fn t, d -> t |> Nx.bitcast(:s32) |> Nx.add(d) |> Nx.bitcast(:f32) end
          # 65520 and beyond (the tie to Inf), and values on the way to f32's top.
          top = Nx.tensor([65_519.996, 65_520.0, 65_520.004, 1.0e5, 3.0e38], type: :f32)
          positive = Nx.concatenate([low, mid, step.(mid, 1), step.(mid, -1), top])
          Nx.concatenate([positive, Nx.negate(positive), Nx.tensor([:nan, :infinity], type: :f32)])
        end)

      same_bits!(boundaries, &Nx.as_type(&1, :f16))
      same_bits!(boundaries, &Nx.as_type(&1, :bf16))

      # f64 a hair either side of each f16 midpoint: rounded once to f16, not through f32.
      wide =
        host.(fn ->
          mid = Nx.as_type(Nx.slice(boundaries, [31_744], [31_744]), :f64)
          hair = Nx.multiply(mid, 2.0e-12)

          Nx.concatenate([
            mid,
            Nx.add(mid, hair),
            Nx.subtract(mid, hair),
            Nx.tensor([1.0e-300, -1.0e-300])
          ])
        end)

      same_bits!(wide, &Nx.as_type(&1, :f16))

      # f32 subnormals (a GPU's own conversions may flush them) to f64 and complex, and f64
      # values in f32's subnormal range, ties among them, to f32, bf16 and c64.
      subnormals =
        host.(fn ->
          bits = Nx.iota({2051}, type: :u32) |> Nx.multiply(4093) |> Nx.add(1)
          Nx.concatenate([bits, Nx.add(bits, 0x80000000)]) |> Nx.bitcast(:f32)
        end)

      for to <- [:f64, :c64, :c128], do: same_bits!(subnormals, &Nx.as_type(&1, to))

      tiny =
        host.(fn ->
          units = Nx.iota({4099}, type: :f64) |> Nx.multiply(2047.25) |> Nx.add(0.5)
          t = Nx.multiply(units, 1.401298464324817e-45)
          Nx.concatenate([t, Nx.negate(t)])
        end)

      for to <- [:f32, :bf16, :c64], do: same_bits!(tiny, &Nx.as_type(&1, to))
    end
  end

  # `fun` of host tensor `t` on the device and on the BinaryBackend: the same bits, resident.
  defp same_bits!(t, fun) do
    expected = Nx.with_default_backend(Nx.BinaryBackend, fn -> fun.(t) end)
    actual = fun.(Nx.backend_copy(t, Nx.Vulkan.Backend))
    assert %Nx.Vulkan.Backend{} = actual.data
    width = div(elem(actual.type, 1), 8)
    got = Nx.to_binary(actual)
    want = Nx.to_binary(expected)

    if got != want do
      at =
        Enum.find(
          0..(Nx.size(t) - 1),
          &(binary_part(got, &1 * width, width) != binary_part(want, &1 * width, width))
        )

      flunk(
        "#{inspect(t.type)} -> #{inspect(actual.type)} differs first at #{at}: input #{inspect(t[at])}, " <>
          "device #{inspect(binary_part(got, at * width, width))}, host #{inspect(binary_part(want, at * width, width))}"
      )
    end
  end
end
