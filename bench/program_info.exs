# What the compiled MNIST step (examples/mnist_mlp.exs) queues on this device: dispatches,
# barriers, fused kernels, replay copies and the kernels in the order they run.
#
#   mix run bench/program_info.exs [--batch B --hidden H]   (or: elixir ..., apps on ERL_LIBS)
Code.require_file("../examples/mnist_mlp.exs", __DIR__)
{opts, _} = OptionParser.parse!(System.argv(), strict: [batch: :integer, hidden: :integer])
{:ok, _} = Application.ensure_all_started(:nx_vulkan)
Nx.global_default_backend(Nx.Vulkan.Backend)
shape = {opts[:batch] || 32, 784, opts[:hidden] || 128, 10}
{params, x, labels} = MNISTMLP.inputs(shape, Nx.Vulkan.Backend)
info = Nx.Vulkan.program_info(&MNISTMLP.step/3, [params, x, labels])

IO.puts(
  "device #{Nx.Vulkan.Device.info().name}, commit #{System.get_env("NXV_COMMIT", "unknown")}, " <>
    "MNIST step #{inspect(shape)}"
)

IO.inspect(Map.drop(info, [:kernels]))
IO.puts("kernels: " <> Enum.join(info.kernels, " "))
