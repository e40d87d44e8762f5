defmodule Nx.Vulkan.GeneratedShapesTest do
  # Differential tests over generated shapes (rank 0 to 6, size-1 axes, odd sizes that do not
  # divide a workgroup) and dtypes, from fixed seeds, so every run checks the same cases.
  use Nx.Vulkan.DeviceCase, async: true

  @seeds [3, 17, 29]

  # A shape of `rank` dims, each 1..7 (size-1 axes common), from a deterministic stream.
  defp shape(rand, rank),
    do: List.to_tuple(for _ <- 1..rank//1, do: Enum.at([1, 2, 3, 5, 7, 1, 4], rem(rand.(), 7)))

  defp stream(seed) do
    state = :rand.seed_s(:exsss, {seed, seed * 7, seed * 13})
    Process.put({:gen, seed}, state)

    fn ->
      {v, s} = :rand.uniform_s(1_000_000, Process.get({:gen, seed}))
      Process.put({:gen, seed}, s)
      v
    end
  end

  defp data(shape, type, seed) do
    t = random(shape, :f32, 20.0, seed)

    case type do
      {:f, _} -> Nx.as_type(t, type)
      {:s, _} -> t |> Nx.round() |> Nx.as_type(type)
      {:u, _} -> t |> Nx.abs() |> Nx.round() |> Nx.as_type(type)
    end
  end

  for seed <- @seeds do
    test "element-wise ops on generated shapes and broadcasts (seed #{seed})" do
      rand = stream(unquote(seed))

      for rank <- 0..6, type <- [{:f, 32}, {:f, 64}, {:s, 32}, {:u, 8}] do
        out_shape = shape(rand, rank)
        # b broadcasts: some of a's axes set to 1 and a prefix dropped
        b_shape =
          out_shape
          |> Tuple.to_list()
          |> Enum.map(&if(rem(rand.(), 3) == 0, do: 1, else: &1))
          |> Enum.drop(rem(rand.(), rank + 1))
          |> List.to_tuple()

        a = data(out_shape, type, rand.())
        b = data(b_shape, type, rand.())
        tol = if type == {:f, 32}, do: [rtol: 1.0e-6, atol: 1.0e-6], else: []

        for op <- [:add, :subtract, :multiply, :max, :min, :greater, :equal] do
          assert_device(&apply(Nx, op, [&1, &2]), [a, b], tol)
        end

        if rank > 0 do
          axes = Enum.filter(0..(rank - 1), fn _ -> rem(rand.(), 2) == 0 end)
          assert_device(&Nx.sum(&1, axes: axes), [a], if(type == {:u, 8}, do: [], else: tol))
          assert_device(&Nx.reduce_max(&1, axes: axes, keep_axes: true), [a])
          perm = Enum.sort_by(0..(rank - 1), fn _ -> rand.() end)
          assert_device(&Nx.transpose(&1, axes: perm), [a])
          assert_device(&Nx.reverse(&1, axes: axes), [a])
        end
      end
    end
  end
end
