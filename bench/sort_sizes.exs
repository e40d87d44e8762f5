# Sort times by size, for the choice between the radix sort and the bitonic network (ops/reduce.rs
# radix_pays): run it twice, the second time with NXV_RADIX_SORT=0 (the knob is read once per VM),
# and compare the rows. Each row: 10 sorts recorded into one submission and flushed, best of 3
# rounds after a warm-up round (results deallocated, so buffers come from the pool).
#
#   elixir bench/sort_sizes.exs                    (with the apps on ERL_LIBS; or mix run)
#   NXV_RADIX_SORT=0 elixir bench/sort_sizes.exs
{:ok, _} = Application.ensure_all_started(:nx_vulkan)
Nx.global_default_backend(Nx.Vulkan.Backend)
how = if System.get_env("NXV_RADIX_SORT") == "0", do: "bitonic network", else: "default choice"

IO.puts(
  "device #{Nx.Vulkan.Device.info().name}, commit #{System.get_env("NXV_COMMIT", "unknown")}, long rows: #{how}\n"
)

IO.puts("| sort | shape | us per sort |\n|---|---|---|")

shapes = [{4, 4096}, {32_768}, {65_536}, {262_144}, {1_048_576}, {64, 4096}, {256, 8192}]

for type <- [:f32, :s64], shape <- shapes do
  {x, _} = Nx.Random.uniform(Nx.Random.key(1), shape: shape, type: :f32)
  x = x |> Nx.multiply(1.0e6) |> Nx.as_type(type)
  Nx.Vulkan.flush()

  round = fn ->
    {us, _} =
      :timer.tc(fn ->
        for _ <- 1..10, do: Nx.backend_deallocate(Nx.sort(x, axis: -1))
        Nx.Vulkan.flush()
      end)

    us / 10
  end

  round.()
  :erlang.garbage_collect()
  best = Enum.min(for _ <- 1..3, do: round.())
  IO.puts("| #{type} | #{inspect(shape)} | #{Float.round(best, 1)} |")
end
