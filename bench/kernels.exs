# Kernel timings beside PyTorch's (bench/peers_kernels.py prints the same rows; bench/kernels_table.py
# joins the two into one table). Each row: one op recorded `reps` times into one submission and
# flushed, best of 3 rounds, after a warm-up round and a garbage collection (so result buffers
# come back to the pool and the timed rounds measure kernels, not fresh device allocations).
# Prints "name<TAB>us per op<TAB>work" lines; work is bytes moved or flops.
#
#   elixir bench/kernels.exs [rows...]      (with the apps on ERL_LIBS; or mix run)
{:ok, _} = Application.ensure_all_started(:nx_vulkan)
Nx.global_default_backend(Nx.Vulkan.Backend)

only = System.argv()
key = Nx.Random.key(1)

rand = fn shape, type ->
  key |> Nx.Random.uniform(shape: shape, type: :f32) |> elem(0) |> Nx.as_type(type)
end

run_row = fn name, reps, work, setup, fun ->
  args = setup.()
  Nx.Vulkan.flush()

  round = fn ->
    {us, _} =
      :timer.tc(fn ->
        for _ <- 1..reps, do: Nx.backend_deallocate(fun.(args))
        Nx.Vulkan.flush()
      end)

    us / reps
  end

  round.()
  :erlang.garbage_collect()
  best = Enum.min(for _ <- 1..3, do: round.())
  IO.puts("#{name}\t#{Float.round(best, 2)}\t#{work}")
end

time = fn name, reps, work, setup, fun ->
  if only == [] or name in only do
    try do
      run_row.(name, reps, work, setup, fun)
    rescue
      e -> IO.puts("# #{name}: #{Exception.message(e) |> String.slice(0, 160)}")
    end
  end
end

IO.puts(
  "# device #{Nx.Vulkan.Device.info().name}, class #{Nx.Vulkan.Device.class()}, commit #{System.get_env("NXV_COMMIT", "unknown")}, precise_f32 #{Nx.Vulkan.stats()[:precise_f32]}, precise_dot #{Nx.Vulkan.stats()[:precise_dot]}"
)

m64 = 64 * 1024 * 1024
gemm = fn m, k, n -> 2 * m * k * n end

for {name, m, k, n, type} <- [
      {"gemm f32 1024^3", 1024, 1024, 1024, :f32},
      {"gemm f32 2048^3", 2048, 2048, 2048, :f32},
      {"gemm f32 4096^3", 4096, 4096, 4096, :f32},
      {"gemm f16 4096^3", 4096, 4096, 4096, :f16},
      {"gemm bf16 4096^3", 4096, 4096, 4096, :bf16},
      {"gemm f32 32x784x128 (MNIST)", 32, 784, 128, :f32}
    ] do
  time.(
    name,
    10,
    "flops=#{gemm.(m, k, n)}",
    fn -> {rand.({m, k}, type), rand.({k, n}, type)} end,
    fn {a, b} -> Nx.dot(a, b) end
  )
end

time.(
  "gemm f32 x^T g (784x32x128)",
  20,
  "flops=#{gemm.(784, 32, 128)}",
  fn -> {rand.({32, 784}, :f32), rand.({32, 128}, :f32)} end,
  fn {a, b} -> Nx.dot(a, [0], b, [0]) end
)

time.(
  "gemm f32 g w^T (32x128x784)",
  20,
  "flops=#{gemm.(32, 128, 784)}",
  fn -> {rand.({32, 128}, :f32), rand.({784, 128}, :f32)} end,
  fn {a, b} -> Nx.dot(a, [1], b, [1]) end
)

# The GEMMs of the kernel-bound MNIST step (batch 512, 784-2048-10): forward, then the
# backward pass's transposed forms ({name, a shape, a contracted axis, b shape, b axis}).
for {name, sa, ca, sb, cb, flops} <- [
      {"gemm f32 512x784x2048 (MNIST large)", {512, 784}, 1, {784, 2048}, 0, gemm.(512, 784, 2048)},
      {"gemm f32 512x2048x10 (MNIST large)", {512, 2048}, 1, {2048, 10}, 0, gemm.(512, 2048, 10)},
      {"gemm f32 x^T g (784x512x2048)", {512, 784}, 0, {512, 2048}, 0, gemm.(784, 512, 2048)},
      {"gemm f32 h^T g (2048x512x10)", {512, 2048}, 0, {512, 10}, 0, gemm.(2048, 512, 10)},
      {"gemm f32 g w^T (512x10x2048)", {512, 10}, 1, {2048, 10}, 1, gemm.(512, 10, 2048)}
    ] do
  time.(
    name,
    20,
    "flops=#{flops}",
    fn -> {rand.(sa, :f32), rand.(sb, :f32)} end,
    fn {a, b} -> Nx.dot(a, [ca], b, [cb]) end
  )
end

time.(
  "gemm f32 batched 64x256^3",
  10,
  "flops=#{64 * gemm.(256, 256, 256)}",
  fn -> {rand.({64, 256, 256}, :f32), rand.({64, 256, 256}, :f32)} end,
  fn {a, b} -> Nx.dot(a, [2], [0], b, [1], [0]) end
)

time.(
  "add f32 64M",
  10,
  "bytes=#{3 * 4 * m64}",
  fn -> {rand.({m64}, :f32), rand.({m64}, :f32)} end,
  fn {a, b} -> Nx.add(a, b) end
)

time.("exp f32 64M", 10, "bytes=#{2 * 4 * m64}", fn -> rand.({m64}, :f32) end, &Nx.exp/1)
time.("sigmoid f32 64M", 10, "bytes=#{2 * 4 * m64}", fn -> rand.({m64}, :f32) end, &Nx.sigmoid/1)

time.(
  "cast f32->f16 64M",
  10,
  "bytes=#{6 * m64}",
  fn -> rand.({m64}, :f32) end,
  &Nx.as_type(&1, :f16)
)

time.(
  "cast f16->f32 64M",
  10,
  "bytes=#{6 * m64}",
  fn -> rand.({m64}, :f16) end,
  &Nx.as_type(&1, :f32)
)

time.("sum f32 64M", 10, "bytes=#{4 * m64}", fn -> rand.({m64}, :f32) end, &Nx.sum/1)

time.(
  "sum rows f32 8192^2",
  10,
  "bytes=#{4 * m64}",
  fn -> rand.({8192, 8192}, :f32) end,
  &Nx.sum(&1, axes: [1])
)

time.(
  "sum columns f32 8192^2",
  10,
  "bytes=#{4 * m64}",
  fn -> rand.({8192, 8192}, :f32) end,
  &Nx.sum(&1, axes: [0])
)

time.(
  "transpose f32 8192^2",
  10,
  "bytes=#{2 * 4 * m64}",
  fn -> rand.({8192, 8192}, :f32) end,
  # A transpose is a lazy view until something needs its copy (README): made here, as PyTorch's
  # row makes it with .contiguous().
  &Nx.Vulkan.materialize(Nx.transpose(&1))
)

time.(
  "softmax rows f32 8192^2",
  10,
  "bytes=#{2 * 4 * m64}",
  fn -> rand.({8192, 8192}, :f32) end,
  fn x ->
    e = Nx.exp(x)
    Nx.divide(e, Nx.sum(e, axes: [1], keep_axes: true))
  end
)

# {name, input {n, c, h, w}, kernel {f, c, kh, kw}, output h x w, conv options}
for {name, {n, c, _, _} = x_shape, {f, _, kh, kw} = k_shape, out_hw, opts} <- [
      {"conv2d f32 3x3 64->64 56x56 b32", {32, 64, 56, 56}, {64, 64, 3, 3}, 56 * 56,
       [padding: :same]},
      {"conv2d f32 3x3 128->128 28x28 b32", {32, 128, 28, 28}, {128, 128, 3, 3}, 28 * 28,
       [padding: :same]},
      {"conv2d f32 3x3 256->256 14x14 b32", {32, 256, 14, 14}, {256, 256, 3, 3}, 14 * 14,
       [padding: :same]},
      {"conv2d f32 7x7/2 3->64 224x224 b8", {8, 3, 224, 224}, {64, 3, 7, 7}, 112 * 112,
       [padding: [{3, 3}, {3, 3}], strides: [2, 2]]}
    ] do
  time.(
    name,
    5,
    "flops=#{2 * n * f * out_hw * c * kh * kw}",
    fn -> {rand.(x_shape, :f32), rand.(k_shape, :f32)} end,
    fn {x, k} -> Nx.conv(x, k, opts) end
  )
end

time.(
  "sort f32 1M",
  5,
  "bytes=#{2 * 4 * 1024 * 1024}",
  fn -> rand.({1024 * 1024}, :f32) end,
  &Nx.sort/1
)

time.(
  "gather f32 16M of 64M",
  10,
  "bytes=#{(4 + 4 + 4) * 16 * 1024 * 1024}",
  fn -> {rand.({m64}, :f32), Nx.iota({16 * 1024 * 1024}, type: :s32) |> Nx.multiply(4)} end,
  fn {x, i} -> Nx.take(x, i) end
)
