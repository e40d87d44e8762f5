# Sorts of tens of millions of elements (the radix sort's; with NXV_RADIX_SORT=0 the bitonic
# network's, past 2^24 pairs its stages' 2-D grid path), checked on the device itself: for
# each row, sort equals take(x, argsort), the result is ordered, ties keep their input order
# (argsort is stable), argsort is a permutation, and the f64 sums of input and output agree.
# Rows: 64 M f32 ascending, 32 M + 12345 f32 descending, 40 M s32 ascending, values
# floor(uniform(0, 1000)) (many ties). Too large for lavapipe (its 128 MiB binding limit);
# run on a GPU:
#
#   elixir bench/sort_large_check.exs      (with the apps on ERL_LIBS; or mix run)
{:ok, _} = Application.ensure_all_started(:nx_vulkan)
Nx.global_default_backend(Nx.Vulkan.Backend)
key = Nx.Random.key(3)

for {n, dir, type} <- [
      {64 * 1024 * 1024, :asc, :f32},
      {32 * 1024 * 1024 + 12345, :desc, :f32},
      {40_000_000, :asc, :s32}
    ] do
  x = key |> Nx.Random.uniform(0.0, 1000.0, shape: {n}) |> elem(0) |> Nx.floor() |> Nx.as_type(type)
  s = Nx.sort(x, direction: dir)
  i = Nx.argsort(x, direction: dir)
  t = Nx.take(x, i)
  a = Nx.slice(t, [0], [n - 1])
  b = Nx.slice(t, [1], [n - 1])
  ia = Nx.slice(i, [0], [n - 1])
  ib = Nx.slice(i, [1], [n - 1])
  ordered = if dir == :asc, do: Nx.less_equal(a, b), else: Nx.greater_equal(a, b)
  ties_stable = Nx.logical_or(Nx.not_equal(a, b), Nx.less(ia, ib))
  perm = Nx.equal(Nx.sort(i), Nx.iota({n}, type: Nx.type(i)))
  sums_match = Nx.equal(Nx.sum(Nx.as_type(x, :f64)), Nx.sum(Nx.as_type(s, :f64)))

  IO.puts(
    "sort #{n} #{dir} #{type}: sort==take(argsort) #{Nx.to_number(Nx.all(Nx.equal(s, t)))}, ordered #{Nx.to_number(Nx.all(ordered))}, " <>
      "stable ties #{Nx.to_number(Nx.all(ties_stable))}, permutation #{Nx.to_number(Nx.all(perm))}, sums #{Nx.to_number(sums_match)}, fallbacks #{inspect(Nx.Vulkan.Fallback.count())}"
  )
end
