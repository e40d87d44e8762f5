# Dynamic slice + put_slice with tensor starts, 1000 iterations, inside a defn `while` (under
# Nx.Defn.Evaluator) and eagerly: us per iteration on Nx.Vulkan.Backend and on Nx.BinaryBackend,
# with the host syncs each run made (Nx.Vulkan.stats/0's host_syncs). The starts are computed
# on the device from the loop counter and some fall outside the tensor (they clamp), so the
# backend never reads them; under the Evaluator, each `while` condition is a read of its own.
#
#   mix run bench/dynamic_slice_loop.exs     (NXV_BENCH_ITERS=1000, NXV_COMMIT=<commit> optional)
defmodule DynamicSliceLoop do
  import Nx.Defn

  # One iteration: rows/cols derived from i (some negative or past the end: clamped), a 4x8
  # slice of t put into acc. A transform, so the eager loop calls it as a plain function and the
  # defn loop traces the same ops.
  deftransform step(t, acc, i) do
    row = Nx.remainder(Nx.multiply(i, 5), 37) |> Nx.subtract(2)
    col = Nx.remainder(Nx.multiply(i, 3), 29) |> Nx.as_type(:u8)
    piece = Nx.slice(t, [row, col], [4, 8])
    acc = Nx.put_slice(acc, [Nx.as_type(Nx.add(row, 1), :s16), col], Nx.add(piece, 1.0))
    {acc, Nx.add(i, 1)}
  end

  defn loop(t, acc, n) do
    {_, acc, _, _} =
      while {t, acc, i = 0, n}, i < n do
        {acc, i} = step(t, acc, i)
        {t, acc, i, n}
      end

    acc
  end

  def eager(t, acc, n) do
    i = Nx.tensor(0, backend: backend_of(t))

    {acc, _} = Enum.reduce(1..n, {acc, i}, fn _, {acc, i} -> step(t, acc, i) end)
    acc
  end

  defp backend_of(%Nx.Tensor{data: %backend{}}), do: backend
end

{:ok, _} = Application.ensure_all_started(:nx_vulkan)
n = String.to_integer(System.get_env("NXV_BENCH_ITERS", "1000"))

commit =
  System.get_env("NXV_COMMIT") ||
    case System.cmd("git", ["rev-parse", "--short", "HEAD"], stderr_to_stdout: true) do
      {sha, 0} -> String.trim(sha)
      _ -> "unknown"
    end

inputs = fn backend ->
  Nx.with_default_backend(backend, fn ->
    {Nx.iota({32, 32}, type: :f32), Nx.broadcast(0.0, {40, 40})}
  end)
end

# Older commits have no host_syncs: their flushes other than the batch cap's stand in, so the
# bench compares across commits.
host_syncs = fn ->
  stats = Nx.Vulkan.stats()
  Map.get_lazy(stats, :host_syncs, fn -> Map.delete(stats.flushes, :batch_cap) end)
end

# Commands recorded and barriers put between them so far (a device loop's iterations are not
# recorded commands: it counts its own).
recorded = fn ->
  stats = Nx.Vulkan.stats()
  {stats.recorded, stats.barriers}
end

# Runs again while the GPU thread's window fusion builds kernels for the chains it saw (on
# GPUs; at most 30 s), so the timed runs are a steady state's.
settle = fn run ->
  deadline = System.monotonic_time(:millisecond) + 30_000

  Stream.repeatedly(run)
  |> Enum.find(fn _ ->
    Nx.Vulkan.stats().window_building == 0 or System.monotonic_time(:millisecond) > deadline
  end)
end

# Best of 3 runs (the first also builds every pipeline) after `settle`; us per iteration, and
# the host syncs and the commands and barriers per iteration of the last run.
time = fn backend, fun ->
  Nx.with_default_backend(backend, fn ->
    {t, acc} = inputs.(backend)
    if backend == Nx.Vulkan.Backend, do: settle.(fn -> fun.(t, acc) |> Nx.to_binary() end)

    runs =
      for _ <- 1..3 do
        before = host_syncs.()
        {commands0, barriers0} = recorded.()
        {us, binary} = :timer.tc(fn -> fun.(t, acc) |> Nx.to_binary() end)
        after_run = host_syncs.()
        {commands1, barriers1} = recorded.()
        syncs = for {k, v} <- after_run, v != before[k], into: %{}, do: {k, v - before[k]}
        {us / n, binary, syncs, {(commands1 - commands0) / n, (barriers1 - barriers0) / n}}
      end

    {best, binary, _, _} = Enum.min_by(runs, &elem(&1, 0))
    {_, _, syncs, per_iteration} = List.last(runs)
    {best, binary, syncs, per_iteration}
  end)
end

loop = Nx.Defn.jit(&DynamicSliceLoop.loop/3)
compiled = Nx.Defn.jit(&DynamicSliceLoop.loop/3, compiler: Nx.Vulkan)
evaluated = fn t, acc -> loop.(t, acc, n) end

# {name, ours, the BinaryBackend's}: the compiled loop (a device loop: the GPU thread runs the
# iterations, the caller reads once) beside the BinaryBackend under the Evaluator.
rows = [
  {"defn while (Evaluator)", evaluated, evaluated},
  {"defn while (compiler: Nx.Vulkan)", fn t, acc -> compiled.(t, acc, n) end, evaluated},
  {"eager", fn t, acc -> DynamicSliceLoop.eager(t, acc, n) end,
   fn t, acc -> DynamicSliceLoop.eager(t, acc, n) end}
]

info = Nx.Vulkan.Device.info()

IO.puts(
  "# #{n} iterations of dynamic slice + put_slice (tensor starts), device #{info.name}, " <>
    "class #{Nx.Vulkan.Device.class()}, batch cap #{Nx.Vulkan.batch_max()}, commit #{commit}, " <>
    "#{System.schedulers_online()} schedulers"
)

IO.puts(
  "| loop | nx_vulkan us/iter | BinaryBackend us/iter | BinaryBackend / ours | host syncs per run (ours) " <>
    "| commands / barriers per iteration (ours) |"
)

IO.puts("|---|---|---|---|---|---|")

for {name, fun, host_fun} <- rows do
  {ours, ours_binary, syncs, {commands, barriers}} = time.(Nx.Vulkan.Backend, fun)
  {host, host_binary, _, _} = time.(Nx.BinaryBackend, host_fun)

  if ours_binary != host_binary,
    do: raise("#{name}: the result differs from the BinaryBackend's")

  syncs = syncs |> Enum.sort() |> Enum.map_join(", ", fn {k, v} -> "#{k} #{v}" end)

  IO.puts(
    "| #{name} | #{Float.round(ours, 1)} | #{Float.round(host, 1)} | " <>
      "#{Float.round(host / ours, 2)} | #{syncs} | #{Float.round(commands, 1)} / " <>
      "#{Float.round(barriers, 1)} |"
  )
end
