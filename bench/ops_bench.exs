# Per-op device timings: each op recorded `reps` times into one submission, then flushed; prints
# us per op. Compare kernel variants across device classes by running it twice, e.g. with
# NXV_DEVICE_CLASS=software (barrier-free GEMM, serial reductions) and without.
#
#   mix run bench/ops_bench.exs     (or: elixir bench/ops_bench.exs with the apps on ERL_LIBS)
{:ok, _} = Application.ensure_all_started(:nx_vulkan)
Nx.global_default_backend(Nx.Vulkan.Backend)

reps = 50
key = Nx.Random.key(1)
rand = fn shape -> key |> Nx.Random.uniform(shape: shape, type: :f32) |> elem(0) end
x = rand.({32, 784})
w = rand.({784, 128})
h = rand.({32, 128})
big_a = rand.({1024, 1024})
big_b = rand.({1024, 1024})
v = rand.({4_000_000})
v64 = Nx.as_type(v, :f64)
Nx.Vulkan.flush()

time = fn name, fun, work ->
  # Warm-up round, then a garbage collection so the results' buffers are back in the pool: the
  # timed round then measures the kernels, not the driver allocating fresh device memory (the
  # BEAM does not see device memory, so it would not collect them on its own).
  for _ <- 1..reps, do: fun.()
  Nx.Vulkan.flush()
  :erlang.garbage_collect()

  {us, _} =
    :timer.tc(fn ->
      for _ <- 1..reps, do: fun.()
      Nx.Vulkan.flush()
    end)

  per = us / reps
  extra = if work, do: "  (#{work.(per)})", else: ""

  IO.puts(
    String.pad_trailing(name, 34) <> :erlang.float_to_binary(per, decimals: 1) <> " us" <> extra
  )
end

gflops = fn flops -> fn us -> "#{Float.round(flops / us / 1000, 1)} GFLOP/s" end end
gbs = fn bytes -> fn us -> "#{Float.round(bytes / us / 1000, 1)} GB/s" end end

IO.puts(
  "device #{Nx.Vulkan.Device.info().name}, class #{Nx.Vulkan.Device.class()}, #{inspect(Map.take(Nx.Vulkan.stats(), [:precise_f32, :cpu_device]))}"
)

time.("dot 32x784 . 784x128", fn -> Nx.dot(x, w) end, gflops.(2 * 32 * 784 * 128))
time.("dot x^T h (784x32x128)", fn -> Nx.dot(x, [0], h, [0]) end, gflops.(2 * 32 * 784 * 128))
time.("dot 1024^3", fn -> Nx.dot(big_a, big_b) end, gflops.(2 * 1024 ** 3))
time.("sum axis 0 of 32x128", fn -> Nx.sum(h, axes: [0]) end, nil)
time.("sum of 32x784", fn -> Nx.sum(x) end, nil)
time.("sum of 4M", fn -> Nx.sum(v) end, gbs.(16_000_000))
time.("exp 4M", fn -> Nx.exp(v) end, gbs.(32_000_000))
time.("negate 4M", fn -> Nx.negate(v) end, gbs.(32_000_000))
time.("sqrt 4M", fn -> Nx.sqrt(v) end, gbs.(32_000_000))
time.("tanh 4M", fn -> Nx.tanh(v) end, gbs.(32_000_000))
time.("exp 4M f64", fn -> Nx.exp(v64) end, gbs.(64_000_000))
time.("add 4M + broadcast", fn -> Nx.add(v, 1.0) end, gbs.(32_000_000))
time.("transpose 1024x1024", fn -> Nx.transpose(big_a) end, gbs.(8 * 1024 * 1024))
time.("exp 32x128 (dispatch-bound)", fn -> Nx.exp(h) end, nil)
time.("exp 4M (again, pool warm)", fn -> Nx.exp(v) end, gbs.(32_000_000))
time.("log 4M", fn -> Nx.log(v) end, gbs.(32_000_000))
time.("sigmoid 4M", fn -> Nx.sigmoid(v) end, gbs.(32_000_000))
