# GPU time per dispatch of tiny kernels (the MNIST step's 32x128 shapes): a chain of dependent
# ops (the recorder puts a barrier between each) against the same ops independent of each other
# (no barriers), for the kernel families the step uses. What the step's ~5 us per dispatch is
# made of: the kernel, or the barrier and launch around it.
#
#   [NXV_TIMING=per_batch] elixir bench/dispatch_latency.exs     (with the apps on ERL_LIBS; or mix run)
#
# A timestamp after every command (the default here) serialises the dispatches it sits between;
# NXV_TIMING=per_batch puts them only around each submission.
{:ok, _} = Application.ensure_all_started(:nx_vulkan)
Nx.global_default_backend(Nx.Vulkan.Backend)

n = 256
x = Nx.iota({32, 128}, type: :f32) |> Nx.divide(4096)
w = Nx.iota({128, 128}, type: :f32) |> Nx.divide(16384)

cases = [
  {"add", fn acc -> Nx.add(acc, x) end},
  {"exp", fn acc -> Nx.exp(acc) end},
  {"greater (f32 -> u8)", fn acc -> Nx.greater(acc, x) |> Nx.add(acc) end, 2},
  {"sum rows, keep axes (+ add)",
   fn acc -> Nx.sum(acc, axes: [1], keep_axes: true) |> Nx.add(acc) end, 2},
  {"sum over the batch axis (+ add)", fn acc -> Nx.sum(acc, axes: [0]) |> Nx.add(acc) end, 2},
  {"dot 32x128x128", fn acc -> Nx.dot(acc, w) end},
  {"transpose twice", fn acc -> acc |> Nx.transpose() |> Nx.transpose() end, 2}
]

measure = fn body ->
  Nx.Vulkan.flush()
  s0 = Nx.Vulkan.stats()

  {us, _} =
    :timer.tc(fn ->
      body.() |> List.wrap() |> Enum.each(&Nx.backend_transfer(&1, Nx.BinaryBackend))
    end)

  s1 = Nx.Vulkan.stats()
  {us, s1.recorded - s0.recorded, (s1.gpu_ns - s0.gpu_ns) / 1000, s1.barriers - s0.barriers}
end

timing = if System.get_env("NXV_TIMING") == "per_batch", do: :per_batch, else: true
Nx.Vulkan.set_gpu_timing(timing)

rows =
  for spec <- cases do
    {name, op, per} =
      case spec do
        {name, op} -> {name, op, 1}
        {name, op, per} -> {name, op, per}
      end

    # Warm-up (pipelines), then a dependent chain and n independent applications to x.
    measure.(fn -> op.(x) end)

    {_, chain_cmds, chain_gpu, chain_barriers} =
      measure.(fn -> Enum.reduce(1..n, x, fn _, acc -> op.(acc) end) end)

    {_, ind_cmds, ind_gpu, ind_barriers} = measure.(fn -> for _ <- 1..n, do: op.(x) end)

    "| #{name} | #{per} | #{Float.round(chain_gpu / chain_cmds, 2)} | #{chain_barriers} | #{Float.round(ind_gpu / ind_cmds, 2)} | #{ind_barriers} |"
  end

Nx.Vulkan.set_gpu_timing(false)
info = Nx.Vulkan.Device.info()

IO.puts("""
# GPU time per dispatch, tiny shapes (f32 32x128), #{n} ops per run, timestamps #{if timing == true, do: "after every command", else: "around submissions only"}, device #{info.name}, class #{Nx.Vulkan.Device.class()}, precise_f32 #{Nx.Vulkan.stats().precise_f32}, NXV_BATCH_MAX #{Nx.Vulkan.batch_max()}, commit #{System.get_env("NXV_COMMIT", "unknown")}
| op | dispatches per op | dependent chain: GPU us per dispatch | barriers | independent: GPU us per dispatch | barriers |
|---|---|---|---|---|---|
#{Enum.join(rows, "\n")}
""")
