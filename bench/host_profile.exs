# Where the host time of a compiled MNIST step goes, function by function (:eprof over 200
# steps; the GPU runs in parallel, so this is the BEAM side only: the Evaluator, the backend's
# Elixir code and the NIF calls).
#
#   mix run bench/host_profile.exs     (or: elixir bench/host_profile.exs with apps on ERL_LIBS)
Code.require_file("../examples/mnist_mlp.exs", __DIR__)
if Process.whereis(Mix.ProjectStack), do: Mix.ensure_application!(:tools)
{:ok, _} = Application.ensure_all_started(:nx_vulkan)
Nx.global_default_backend(Nx.Vulkan.Backend)
{params, x, labels} = MNISTMLP.inputs({32, 784, 128, 10}, Nx.Vulkan.Backend)
step = Nx.Defn.compile(&MNISTMLP.step/3, [params, x, labels])
run = fn n -> for _ <- 1..n, do: step.(params, x, labels) |> elem(0) |> Nx.to_number() end
run.(50)
:eprof.start()
:eprof.profile([], fn -> run.(200) end)
:eprof.analyze(:total, sort: :time, filter: [time: 2000.0])
