# Compares the device's floating-point functions with Nx.BinaryBackend (Erlang's :math, i.e. the
# C library's libm) and prints, per function and type, how many results are bit-identical and
# how many within 1 ulp, and the largest distance in ulps. A correctness check to run on new
# devices (GPU kernels differ from lavapipe's: see SHARED_TABLE in math64.glsl).
#
#   mix run bench/math_check.exs            100_000 inputs per function
#   mix run bench/math_check.exs 20000      fewer
#
# Inputs: uniform over each function's natural domain, log-uniform over many magnitudes (both
# signs), and special values (+-0, +-Inf, NaN, domain edges, huge arguments).
#
# Where the device is right and the BinaryBackend is not, the comparison leaves the inputs out:
# expm1 and log1p are compared for |x| >= 1 only (the BinaryBackend computes exp(x) - 1 and
# log(1 + x), which lose digits near 0; the device's are accurate there), tanh for finite x
# (the BinaryBackend gives NaN for tanh(+-Inf), the device +-1). One input is a known hard case
# for argument reduction, 6381956970095103 * 2^797, where glibc's cos and tan are 8 and 14 ulps
# from the true value and the device's are correctly rounded (checked with mpmath).
{:ok, _} = Application.ensure_all_started(:nx_vulkan)

n =
  case System.argv() do
    [count | _] -> String.to_integer(count)
    [] -> 100_000
  end

key = Nx.Random.key(5)

host = fn fun -> Nx.with_default_backend(Nx.BinaryBackend, fun) end

specials = [
  0.0,
  -0.0,
  1.0,
  -1.0,
  0.5,
  -0.5,
  2.0,
  1.0e-300,
  -1.0e-300,
  5.0e-324,
  1.0e300,
  -1.0e300,
  1.0e22,
  6_381_956_970_095_103.0 * 2.0e0 ** 797,
  1.5707963267948966,
  3.141592653589793,
  0.1,
  0.9,
  0.84375,
  1.25,
  2.857142857142857,
  6.0,
  22.0,
  28.0,
  709.7,
  710.4,
  -709.7,
  745.0,
  -745.2
]

# {op, uniform range}: the uniform part stays where the function is defined.
ops = [
  exp: {-700.0, 700.0},
  expm1: {-40.0, 40.0},
  log: {0.0, 1.0e6},
  log1p: {-1.0, 10.0},
  tanh: {-25.0, 25.0},
  sigmoid: {-40.0, 40.0},
  sin: {-1.0e6, 1.0e6},
  cos: {-1.0e6, 1.0e6},
  tan: {-10.0, 10.0},
  asin: {-1.0, 1.0},
  acos: {-1.0, 1.0},
  atan: {-5.0, 5.0},
  sinh: {-30.0, 30.0},
  cosh: {-30.0, 30.0},
  asinh: {-10.0, 10.0},
  acosh: {1.0, 10.0},
  atanh: {-1.0, 1.0},
  cbrt: {-1000.0, 1000.0},
  erf: {-6.0, 6.0},
  erfc: {-6.0, 30.0}
]

# Distance in ulps between the bit patterns, read as integers (floats do not decode NaN/Inf):
# sign-magnitude mapped onto a line, so +0 and -0 coincide; NaN only matches NaN.
ulps = fn type, expected, actual ->
  bits = if type == :f32, do: 32, else: 64
  import Bitwise
  magnitude = (1 <<< (bits - 1)) - 1
  exponent_mask = if type == :f32, do: 0x7F800000, else: 0x7FF0000000000000

  nan? = fn i ->
    (i &&& exponent_mask) == exponent_mask and (i &&& magnitude &&& bnot(exponent_mask)) != 0
  end

  line = fn i -> if i >= 0, do: i, else: -(i &&& magnitude) end

  Enum.zip_with(
    for(<<x::signed-size(bits)-native <- Nx.to_binary(expected)>>, do: x),
    for(<<x::signed-size(bits)-native <- Nx.to_binary(actual)>>, do: x),
    fn e, a ->
      cond do
        nan?.(e) and nan?.(a) -> 0
        nan?.(e) or nan?.(a) -> :infinity
        true -> abs(line.(e) - line.(a))
      end
    end
  )
end

# One table row: the device result against the host's, in ulps.
report = fn label, type, expected, actual ->
  diffs = ulps.(type, expected, actual)
  percent = &"#{Float.round(100 * Enum.count(diffs, &1) / length(diffs), 3)}%"

  :io.format("~-7s ~-5s ~-11s ~-14s ~-10s ~B~n", [
    label,
    Atom.to_string(type),
    percent.(&(&1 == 0)),
    percent.(&(&1 != :infinity and &1 <= 1)),
    inspect(Enum.max(diffs)),
    length(diffs)
  ])
end

IO.puts("nx_vulkan math check: #{n} inputs per function, device #{Nx.Vulkan.Device.info().name}")
IO.puts("op      type  identical   within 1 ulp   max ulps   of")

for type <- [:f32, :f64], {op, {lo, hi}} <- ops do
  inputs =
    host.(fn ->
      {uniform, key} = Nx.Random.uniform(key, lo, hi, shape: {div(n, 2)}, type: :f64)
      {exponent, key} = Nx.Random.uniform(key, -30.0, 30.0, shape: {div(n, 2)}, type: :f64)
      {signs, _} = Nx.Random.randint(key, 0, 2, shape: {div(n, 2)})
      magnitude = Nx.pow(10.0, exponent) |> Nx.multiply(Nx.subtract(Nx.multiply(signs, 2), 1))

      non_finite = Nx.tensor([:nan, :infinity, :neg_infinity], type: :f64)

      Nx.concatenate([uniform, magnitude, Nx.tensor(specials, type: :f64), non_finite])
      |> Nx.as_type(type)
    end)

  # Erlang's :math raises on overflow (exp(1000)) where the device gives Inf, and the complex
  # library answers log(-1) with a complex number the BinaryBackend cannot store in a real
  # tensor where the device gives NaN: keep the inputs the BinaryBackend can compute.
  probe =
    case op do
      :expm1 -> &Complex.exp/1
      :sigmoid -> &Complex.exp(Complex.negate(&1))
      :log1p -> &Complex.log(Complex.add(&1, 1))
      _ -> &apply(Complex, op, [&1])
    end

  compared? =
    case op do
      op when op in [:expm1, :log1p] -> &(is_float(&1) and abs(&1) >= 1.0)
      :tanh -> &is_float/1
      _ -> fn _ -> true end
    end

  inputs =
    inputs
    |> Nx.to_list()
    |> Enum.filter(compared?)
    |> Enum.filter(fn x ->
      try do
        not is_struct(probe.(x), Complex)
      rescue
        ArithmeticError -> false
      end
    end)
    |> then(&host.(fn -> Nx.tensor(&1, type: type) end))

  expected = host.(fn -> apply(Nx, op, [inputs]) end)

  actual =
    apply(Nx, op, [Nx.backend_transfer(inputs, Nx.Vulkan.Backend)])
    |> Nx.backend_transfer(Nx.BinaryBackend)

  report.(Atom.to_string(op), type, expected, actual)
end

# pow (binary): bases log-uniform over many magnitudes, exponents uniform in [-40, 40] and
# integers, both f32 and f64.
for type <- [:f32, :f64] do
  {base, exponent} =
    host.(fn ->
      {e, key} = Nx.Random.uniform(key, -6.0, 6.0, shape: {n}, type: :f64)
      {y, key} = Nx.Random.uniform(key, -40.0, 40.0, shape: {n}, type: :f64)
      {ints, _} = Nx.Random.randint(key, -30, 30, shape: {n})
      half = Nx.iota({n}) |> Nx.remainder(2)

      {Nx.pow(10.0, e) |> Nx.as_type(type),
       Nx.select(half, Nx.as_type(ints, :f64), y) |> Nx.as_type(type)}
    end)

  pairs =
    Enum.zip(Nx.to_list(base), Nx.to_list(exponent))
    |> Enum.filter(fn {x, y} ->
      try do
        :math.pow(x, y)
        true
      rescue
        ArithmeticError -> false
      end
    end)

  {base, exponent} =
    host.(fn ->
      {Nx.tensor(Enum.map(pairs, &elem(&1, 0)), type: type),
       Nx.tensor(Enum.map(pairs, &elem(&1, 1)), type: type)}
    end)

  expected = host.(fn -> Nx.pow(base, exponent) end)

  actual =
    Nx.pow(
      Nx.backend_transfer(base, Nx.Vulkan.Backend),
      Nx.backend_transfer(exponent, Nx.Vulkan.Backend)
    )
    |> Nx.backend_transfer(Nx.BinaryBackend)

  report.("pow", type, expected, actual)
end
