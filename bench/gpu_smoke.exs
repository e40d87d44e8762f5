# A self-contained differential smoke test for machines without Mix (the lent GPU hosts): runs a
# spread of ops on Nx.Vulkan.Backend and on Nx.BinaryBackend and prints OK or FAIL for each, and
# whether anything fell back. The project's ExUnit suite is the full check; this one shows that a
# real GPU's driver computes what lavapipe does.
#
#   elixir bench/gpu_smoke.exs        (apps on ERL_LIBS)   or   mix run bench/gpu_smoke.exs
{:ok, _} = Application.ensure_all_started(:nx_vulkan)

host = fn f, args ->
  Nx.with_default_backend(Nx.BinaryBackend, fn ->
    apply(f, Enum.map(args, &Nx.backend_copy(&1, Nx.BinaryBackend)))
  end)
end

dev = fn f, args ->
  Nx.with_default_backend(Nx.Vulkan.Backend, fn ->
    apply(f, Enum.map(args, &Nx.backend_copy(&1, Nx.Vulkan.Backend)))
  end)
end

rand = fn shape, type, seed ->
  Nx.with_default_backend(Nx.BinaryBackend, fn ->
    Nx.Random.key(seed) |> Nx.Random.uniform(-2.0, 2.0, shape: shape, type: type) |> elem(0)
  end)
end

c = fn list -> Nx.tensor(list, type: :c64, backend: Nx.BinaryBackend) end

# Under precise_dot (CPU devices, NXV_PRECISE_DOT=1) dot sums in f64 and rounds once, as the
# BinaryBackend; GPU classes sum in f32 (as cuBLAS does), within a few ulps per product.
dot_tol = if Nx.Vulkan.stats().precise_dot, do: 1.0e-6, else: 1.0e-4

cases = [
  {"dot f32", &Nx.dot/2, [rand.({33, 70}, :f32, 1), rand.({70, 9}, :f32, 2)], dot_tol},
  {"sum split f32", &Nx.sum(&1, axes: [1]), [rand.({2, 300_001}, :f32, 3)], 1.0e-6},
  {"exp/log/tanh f32 exact", fn t -> Nx.stack([Nx.exp(t), Nx.log(Nx.abs(t)), Nx.tanh(t)]) end,
   [rand.({1000}, :f32, 4)], 0.0},
  {"pow/remainder/atan2 f32",
   fn a, b -> Nx.stack([Nx.pow(Nx.abs(a), b), Nx.remainder(a, b), Nx.atan2(a, b)]) end,
   [rand.({500}, :f32, 5), rand.({500}, :f32, 6)], 1.0e-6},
  {"erf/erfc/erf_inv f32",
   fn t -> Nx.stack([Nx.erf(t), Nx.erfc(t), Nx.erf_inv(Nx.divide(t, 2.01))]) end,
   [rand.({500}, :f32, 7)], 2.0e-7},
  {"sin/cos/asinh f32", fn t -> Nx.stack([Nx.sin(t), Nx.cos(t), Nx.asinh(t)]) end,
   [rand.({500}, :f32, 8)], 2.0e-7},
  {"complex arithmetic",
   fn a, b -> Nx.stack([Nx.add(a, b), Nx.multiply(a, b), Nx.divide(a, b), Nx.conjugate(a)]) end,
   [c.([Complex.new(1, 2), Complex.new(-3, 0.5)]), c.([Complex.new(0.5, -1), Complex.new(2, 2)])],
   1.0e-6},
  {"complex abs", &Nx.abs/1, [c.([Complex.new(3, 4), Complex.new(0, -2)])], 1.0e-7},
  {"sort/argsort", fn t -> {Nx.sort(t, axis: 1), Nx.argsort(t, axis: 1, direction: :desc)} end,
   [rand.({7, 33}, :f32, 9)], 0.0},
  {"argmax/argmin", fn t -> {Nx.argmax(t, axis: 0), Nx.argmin(t, tie_break: :high)} end,
   [rand.({7, 33}, :f32, 10)], 0.0},
  {"gather/take", fn t -> Nx.take(t, Nx.tensor([3, 0, 5]), axis: 1) end, [rand.({4, 6}, :f32, 11)],
   0.0},
  {"indexed_add",
   fn t -> Nx.indexed_add(t, Nx.tensor([[0, 1], [2, 3], [0, 1]]), Nx.tensor([1.0, 2.0, 3.0])) end,
   [rand.({3, 4}, :f32, 12)], 1.0e-6},
  {"conv 2-D groups", &Nx.conv(&1, &2, feature_group_size: 2, padding: :same),
   [rand.({2, 4, 7, 6}, :f32, 13), rand.({6, 2, 3, 2}, :f32, 14)], 1.0e-5},
  {"window_max/scatter",
   fn t ->
     {Nx.window_max(t, {2, 2}, strides: [2, 2]),
      Nx.window_scatter_max(t, Nx.broadcast(1.0, {2, 3}), 0.0, {2, 2}, strides: [2, 2])}
   end, [rand.({4, 6}, :f32, 15)], 0.0},
  {"triangular_solve", &Nx.LinAlg.triangular_solve/2,
   [Nx.tensor([[2.0, 0, 0], [1.5, -3.0, 0], [0.5, 2.0, 4.0]]), rand.({3, 2}, :f32, 16)], 1.0e-6},
  {"as_type f32 -> s8/u16/bf16/c64",
   fn t ->
     {Nx.as_type(Nx.multiply(t, 100), :s8), Nx.as_type(Nx.multiply(t, 1000), :u16),
      Nx.as_type(t, :bf16), Nx.as_type(t, :c64)}
   end, [rand.({50}, :f32, 17)], 0.0}
]

Nx.Vulkan.Fallback.reset()

results =
  for {name, f, args, tol} <- cases do
    expected = host.(f, args)
    actual = dev.(f, args)

    pairs =
      if is_tuple(expected),
        do: Enum.zip(Tuple.to_list(expected), Tuple.to_list(actual)),
        else: [{expected, actual}]

    ok =
      Enum.all?(pairs, fn {e, a} ->
        a = Nx.backend_copy(a, Nx.BinaryBackend)

        Nx.with_default_backend(Nx.BinaryBackend, fn ->
          if tol == 0.0,
            do: Nx.to_binary(a) == Nx.to_binary(e),
            else: Nx.all_close(a, e, rtol: tol, atol: tol) |> Nx.to_number() == 1
        end)
      end)

    IO.puts("#{if ok, do: "OK  ", else: "FAIL"} #{name}")
    ok
  end

IO.puts(
  "#{Enum.count(results, & &1)}/#{length(results)} OK on #{Nx.Vulkan.Device.info().name}; fallbacks: #{inspect(Nx.Vulkan.Fallback.count())}"
)
