# Pipeline creation cost on this device: a burst of 25 ops of first uses, then the same again
# twice after forget_pipelines/0 (the VkPipelineCache then holds them), with the time inside the
# driver (stats().pipeline_driver_us). Run it twice with the same NXV_PIPELINE_CACHE for a warm
# start; NXV_PIPELINE_BUILDERS sets the builder threads.
#
#   elixir bench/pipeline_cache_probe.exs     (apps on ERL_LIBS; or mix run)
{:ok, _} = Application.ensure_all_started(:nx_vulkan)
Nx.global_default_backend(Nx.Vulkan.Backend)
x = Nx.iota({64, 64}, type: :f32) |> Nx.divide(4096)
Nx.to_binary(x)

burst = fn ->
  unary = [:exp, :log1p, :sin, :cos, :tanh, :sigmoid, :sqrt, :erf, :abs, :negate, :floor, :ceil]
  binary = [:add, :subtract, :multiply, :divide, :max, :min, :pow, :atan2, :remainder]

  r =
    Enum.map(unary, &apply(Nx, &1, [x])) ++
      Enum.map(binary, &apply(Nx, &1, [x, Nx.add(x, 1)])) ++
      [
        Nx.sum(x, axes: [0]),
        Nx.dot(x, x),
        Nx.transpose(x),
        Nx.sort(x, axis: 1),
        Nx.as_type(x, :f16)
      ]

  Enum.each(r, &Nx.to_binary/1)
end

measure = fn label ->
  s0 = Nx.Vulkan.stats()
  {us, _} = :timer.tc(burst)
  s1 = Nx.Vulkan.stats()

  IO.puts(
    "#{label}: #{div(us, 1000)} ms wall, #{s1.pipelines_created - s0.pipelines_created} created, " <>
      "#{div(s1.pipeline_create_us - s0.pipeline_create_us, 1000)} ms builder, #{div(s1.pipeline_driver_us - s0.pipeline_driver_us, 1000)} ms driver; cache #{inspect(s1.pipeline_disk_cache)}"
  )
end

measure.("first")
Nx.Vulkan.Native.forget_pipelines()
measure.("again, same process (in-memory VkPipelineCache holds them)")
Nx.Vulkan.Native.forget_pipelines()
measure.("a third time")
