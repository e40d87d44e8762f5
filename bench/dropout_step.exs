# A dropout training step (issue 10's client case): an MLP layer 784 -> 128 with a dropout mask
# drawn by Nx.Random inside defn (threefry: `while` loops of u32 arithmetic), the loss and its
# gradient, the loss read every step. Milliseconds per step (best and median of 5 blocks of 20
# steps; the BinaryBackend's of 3 single steps) under the Evaluator and compiled (`compiler:
# Nx.Vulkan`), the BinaryBackend beside, the compiled program's dispatches, and the host syncs
# of one step.
#
#   mix run bench/dropout_step.exs     (NXV_COMMIT=<commit> optional)
defmodule DropoutStep do
  import Nx.Defn

  defn step(w, x, key) do
    value_and_grad(w, fn w ->
      h = Nx.dot(x, w)
      {mask, _key} = Nx.Random.uniform(key, shape: Nx.shape(h))
      h = Nx.select(mask > 0.5, h / 0.5, 0.0)
      Nx.mean(h * h)
    end)
  end
end

{:ok, _} = Application.ensure_all_started(:nx_vulkan)

commit =
  System.get_env("NXV_COMMIT") ||
    case System.cmd("git", ["rev-parse", "--short", "HEAD"], stderr_to_stdout: true) do
      {sha, 0} -> String.trim(sha)
      _ -> "unknown"
    end

inputs = fn backend ->
  Nx.with_default_backend(backend, fn ->
    w = Nx.iota({784, 128}, type: :f32) |> Nx.remainder(97) |> Nx.divide(9700)
    x = Nx.iota({32, 784}, type: :f32) |> Nx.remainder(13) |> Nx.divide(13)
    {w, x, Nx.Random.key(7)}
  end)
end

# Best and median ms per step of `blocks` blocks of `steps` steps (after 3 warm-up steps; one
# for the BinaryBackend, whose step takes seconds), and the loss.
time = fn fun, {w, x, key}, blocks, steps ->
  run = fn ->
    {loss, _grad} = fun.(w, x, key)
    Nx.to_number(loss)
  end

  for _ <- 1..min(steps, 3), do: run.()

  times =
    for _ <- 1..blocks do
      {us, _} = :timer.tc(fn -> for _ <- 1..steps, do: run.() end)
      us / steps / 1000
    end

  sorted = Enum.sort(times)
  {hd(sorted), Enum.at(sorted, div(blocks, 2)), run.()}
end

syncs = fn fun, {w, x, key} ->
  before = Nx.Vulkan.stats().host_syncs
  {loss, _} = fun.(w, x, key)
  Nx.to_number(loss)
  now = Nx.Vulkan.stats().host_syncs
  for {k, v} <- now, v != before[k], into: %{}, do: {k, v - before[k]}
end

info = Nx.Vulkan.Device.info()

IO.puts(
  "# dropout step (784 -> 128, batch 32, Nx.Random mask), device #{info.name}, class " <>
    "#{Nx.Vulkan.Device.class()}, batch cap #{Nx.Vulkan.batch_max()}, commit #{commit}"
)

evaluator = Nx.Defn.jit(&DropoutStep.step/3)
compiled = Nx.Defn.jit(&DropoutStep.step/3, compiler: Nx.Vulkan)
ours = inputs.(Nx.Vulkan.Backend)
{host_best, host_median, host_loss} = time.(evaluator, inputs.(Nx.BinaryBackend), 3, 1)
program = Nx.Vulkan.program_info(&DropoutStep.step/3, Tuple.to_list(ours))

IO.puts("| run | best ms | median ms | loss | host syncs a step | dispatches |")
IO.puts("|---|---|---|---|---|---|")

for {name, fun, dispatches} <- [
      {"Evaluator", evaluator, "-"},
      {"compiler: Nx.Vulkan", compiled, program.dispatches}
    ] do
  {best, median, loss} = time.(fun, ours, 5, 20)
  s = syncs.(fun, ours) |> Enum.sort() |> Enum.map_join(", ", fn {k, v} -> "#{k} #{v}" end)

  IO.puts(
    "| #{name} | #{Float.round(best, 3)} | #{Float.round(median, 3)} | #{loss} | #{s} | #{dispatches} |"
  )
end

IO.puts(
  "| BinaryBackend (Evaluator) | #{Float.round(host_best, 3)} | #{Float.round(host_median, 3)} | #{host_loss} | | |"
)
