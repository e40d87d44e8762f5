# Functions the compiler used to leave to Nx.Defn.Evaluator (2026-12-05): a data-dependent `if`
# (now selects), an integer division by a tensor (now a program with its deferred check) and a
# loop nested in a loop whose conditions depend on the arguments (now device loops). Each is
# timed under the Evaluator and with `compiler: Nx.Vulkan` on Nx.Vulkan.Backend, and under the
# Evaluator on Nx.BinaryBackend; results checked equal first. ms per call, best of 5 x 20 calls,
# the result read every call.
#
#   mix run bench/compiler_coverage.exs     (NXV_COMMIT=<commit> optional)
defmodule CompilerCoverage do
  import Nx.Defn

  # A clipped update: which branch depends on the data.
  defn branch(x, g) do
    norm = Nx.sqrt(Nx.sum(g * g))
    step = if norm > 1.0, do: g / norm, else: g
    x - 0.1 * step
  end

  # Bucketing by an integer tensor: quotient and remainder by a tensor (deferred checks).
  defn buckets(ids, width) do
    {Nx.quotient(ids, width), Nx.remainder(ids, width) * 2 + 1}
  end

  # A triangular loop: the inner trip count is the outer counter.
  defn nested(x, n) do
    {x, _, _} =
      while {x, i = 0, n}, i < n do
        {x, _, _} =
          while {x, j = 0, i}, j < i do
            {x * 0.5 + 1.0, j + 1, i}
          end

        {x + 1.0, i + 1, n}
      end

    x
  end
end

{:ok, _} = Application.ensure_all_started(:nx_vulkan)

commit =
  System.get_env("NXV_COMMIT") ||
    case System.cmd("git", ["rev-parse", "--short", "HEAD"], stderr_to_stdout: true) do
      {sha, 0} -> String.trim(sha)
      _ -> "unknown"
    end

cases = [
  {"if on the data (selects)", &CompilerCoverage.branch/2,
   fn ->
     [
       Nx.iota({256, 128}, type: :f32) |> Nx.divide(1000),
       Nx.iota({256, 128}, type: :f32) |> Nx.divide(5.0e4)
     ]
   end},
  {"quotient by a tensor (checked)", &CompilerCoverage.buckets/2,
   fn ->
     [
       Nx.iota({4096}, type: :s32),
       Nx.tensor(7, type: :s32) |> Nx.add(Nx.iota({1}, type: :s32)) |> Nx.reshape({})
     ]
   end},
  {"nested loops (n = 12)", &CompilerCoverage.nested/2,
   fn -> [Nx.iota({64}, type: :f32), Nx.tensor(12)] end}
]

read = fn result ->
  result
  |> List.wrap()
  |> Enum.flat_map(&Nx.Defn.Composite.flatten_list([&1]))
  |> Enum.map(&Nx.to_binary/1)
end

time = fn f, args ->
  for _ <- 1..3, do: read.(apply(f, args))

  Enum.min(
    for _ <- 1..5 do
      {us, _} = :timer.tc(fn -> for _ <- 1..20, do: read.(apply(f, args)) end)
      us / 20 / 1000
    end
  )
end

IO.puts(
  "# compiler coverage, device #{Nx.Vulkan.Device.info().name}, commit #{commit}, ms per call (best of 5 x 20)"
)

IO.puts(
  "| function | Evaluator | compiler: Nx.Vulkan | BinaryBackend (Evaluator) | Evaluator / compiled | census |"
)

IO.puts("|---|---|---|---|---|---|")

for {name, fun, make} <- cases do
  args = Nx.with_default_backend(Nx.Vulkan.Backend, make)
  host_args = Nx.with_default_backend(Nx.BinaryBackend, make)
  evaluator = Nx.Defn.jit(fun)
  compiled = Nx.Defn.jit(fun, compiler: Nx.Vulkan)
  expected = read.(apply(evaluator, args))
  before = Nx.Vulkan.compiler_census()
  ^expected = read.(apply(compiled, args))
  now = Nx.Vulkan.compiler_census()
  census = if now.evaluator == before.evaluator, do: "compiled", else: inspect(now.evaluator)
  ^expected = read.(apply(evaluator, host_args))
  ev = time.(evaluator, args)
  co = time.(compiled, args)
  bb = time.(evaluator, host_args)

  IO.puts(
    "| #{name} | #{Float.round(ev, 3)} | #{Float.round(co, 3)} | #{Float.round(bb, 3)} | " <>
      "#{Float.round(ev / co, 1)} | #{census} |"
  )
end
