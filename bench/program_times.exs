# Where the compiled MNIST step's GPU time goes: the step compiled with `compiler: Nx.Vulkan`,
# run with per-command GPU timestamps (Nx.Vulkan.set_gpu_timing/1), GPU µs per step by kernel;
# then the same step untimed (best and median of 5 blocks of 20 steps, loss read every step).
# Timestamps separate the commands they time, so the timed sum is an upper bound on the GPU
# time of the untimed step.
#
#   mix run bench/program_times.exs [--batch B --hidden H] [--steps N]
#   (or: elixir bench/program_times.exs, the apps on ERL_LIBS, as on the H200 host)
Code.require_file("../examples/mnist_mlp.exs", __DIR__)

{opts, _} =
  OptionParser.parse!(System.argv(), strict: [batch: :integer, hidden: :integer, steps: :integer])

{:ok, _} = Application.ensure_all_started(:nx_vulkan)
Nx.global_default_backend(Nx.Vulkan.Backend)
shape = {opts[:batch] || 32, 784, opts[:hidden] || 128, 10}
steps = opts[:steps] || 50
{params, x, labels} = MNISTMLP.inputs(shape, Nx.Vulkan.Backend)
step = Nx.Defn.compile(&MNISTMLP.step/3, [params, x, labels], compiler: Nx.Vulkan)

run = fn ->
  {loss, _grads} = step.(params, x, labels)
  Nx.to_number(loss)
end

for _ <- 1..10, do: run.()
Nx.Vulkan.flush()
Nx.Vulkan.set_gpu_timing(true)
Nx.Vulkan.take_kernel_times()
for _ <- 1..steps, do: run.()
Nx.Vulkan.flush()
times = Nx.Vulkan.take_kernel_times()
Nx.Vulkan.set_gpu_timing(false)

info = Nx.Vulkan.Device.info()

IO.puts(
  "device #{info.name}, commit #{System.get_env("NXV_COMMIT", "unknown")}, " <>
    "MNIST step #{inspect(shape)} compiled, #{steps} steps timed"
)

IO.puts("| kernel | commands per step | GPU µs per step |\n|---|---|---|")

for {name, {count, ns}} <- Enum.sort_by(times, fn {_, {_, ns}} -> -ns end) do
  IO.puts("| #{name} | #{Float.round(count / steps, 2)} | #{Float.round(ns / steps / 1000, 2)} |")
end

{count, ns} =
  Enum.reduce(times, {0, 0}, fn {_, {c, n}}, {ca, na} -> {ca + c, na + n} end)

IO.puts("| all | #{Float.round(count / steps, 2)} | #{Float.round(ns / steps / 1000, 2)} |")

per_step =
  for _ <- 1..5 do
    {us, _} = :timer.tc(fn -> for _ <- 1..20, do: run.() end)
    us / 20 / 1000
  end
  |> Enum.sort()

IO.puts(
  "untimed step: best #{Float.round(hd(per_step), 4)} ms, median #{Float.round(Enum.at(per_step, 2), 4)} ms"
)
