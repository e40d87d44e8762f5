Code.require_file("../../examples/mnist_mlp.exs", __DIR__)

defmodule Nx.Vulkan.WindowFusionTest do
  # Not async: these tests change the window fusion setting and the batch cap, and read global
  # counters.
  use Nx.Vulkan.DeviceCase, async: false

  setup :keep_batch_max

  setup do
    %{window_fusion: previous} = Nx.Vulkan.stats()
    on_exit(fn -> Nx.Vulkan.set_window_fusion(previous) end)
    # Built at the first sighting, so a test needs few repetitions to see its chains fused.
    Nx.Vulkan.set_window_fusion(1)
    Nx.Vulkan.flush()
    :ok
  end

  # Element-wise chains of the kinds fuse.rs joins, each op reading the one before: {name,
  # inputs, function}. Every intermediate is returned too, so a fused kernel that dropped a
  # result it must write would show.
  defp chains,
    do: [
      {"f32 unary and binary ops with a broadcast operand",
       fn -> [random({64, 33}), random({33})] end,
       fn x, b ->
         a = Nx.exp(Nx.multiply(x, 0.25))
         c = Nx.add(a, b)
         d = Nx.tanh(c)
         [a, c, d, Nx.subtract(d, x)]
       end},
      {"s32 arithmetic and a narrowing cast (the dynamic-slice loop's starts)",
       fn -> [Nx.iota({500}, type: :s32, backend: Nx.Vulkan.Backend)] end,
       fn i ->
         a = Nx.multiply(i, 5)
         r = Nx.remainder(a, 37)
         s = Nx.subtract(r, 2)
         [a, r, s, Nx.as_type(s, :u8)]
       end},
      {"a comparison, a select and a cast (a relu's gradient)",
       fn -> [random({40, 50}), random({40, 50})] end,
       fn x, g ->
         p = Nx.greater(x, 0.0)
         s = Nx.select(p, g, 0.0)
         [p, s, Nx.multiply(s, 2.0), Nx.as_type(p, :f32)]
       end},
      {"a dense layer: a GEMM, its bias and a relu",
       fn -> [random({32, 48}), random({48, 24}), random({24})] end,
       fn x, w, b ->
         y = Nx.dot(x, w)
         z = Nx.add(y, b)
         [y, z, Nx.max(z, 0.0)]
       end}
    ]

  defp host(args), do: Enum.map(args, &Nx.backend_copy(&1, Nx.BinaryBackend))

  defp bits(results), do: Enum.map(results, &{Nx.type(&1), Nx.shape(&1), Nx.to_binary(&1)})

  # Runs `fun` on `args` until the window has run fused kernels for it, checking every run
  # against the BinaryBackend; returns the fused kernels and the commands they replaced. The
  # builder thread compiles kernels one at a time, those of earlier tests first (an f64 math
  # kernel takes up to ~2 s on this machine kind), hence the deadline rather than a count.
  defp run_until_fused(fun, args, expected, deadline_ms \\ 120_000) do
    before = Nx.Vulkan.stats()
    until = System.monotonic_time(:millisecond) + deadline_ms

    Stream.repeatedly(fn ->
      assert bits(apply(fun, args)) == expected
      stats = Nx.Vulkan.stats()
      {stats.window_kernels - before.window_kernels, stats.window_replaced - before.window_replaced}
    end)
    |> Enum.find(fn {kernels, _} ->
      done = kernels > 0 or System.monotonic_time(:millisecond) > until
      if not done, do: Process.sleep(5)
      done
    end)
  end

  for index <- 0..3 do
    test "chain #{index}: runs fused, bit for bit the BinaryBackend's, at caps 4, 64 and 1000" do
      {name, inputs, fun} = Enum.at(chains(), unquote(index))
      args = inputs.()
      expected = bits(apply(fun, host(args)))

      # At cap 4 the GPU thread takes 4 commands at a time: a chain rarely fits in its window,
      # and whatever it fuses must give the same bits.
      Nx.Vulkan.set_batch_max(4)
      for _ <- 1..20, do: assert(bits(apply(fun, args)) == expected)

      for cap <- [64, 1000] do
        Nx.Vulkan.set_batch_max(cap)
        {kernels, replaced} = run_until_fused(fun, args, expected)
        assert kernels > 0, "#{name}: never fused at cap #{cap}"
        assert replaced > kernels, "#{name}: #{replaced} commands went into #{kernels} kernels"
        # Fused for good: the next runs too, with the same bits.
        for _ <- 1..3, do: assert(bits(apply(fun, args)) == expected)
      end

      # Every command a fused kernel stands for retires with it.
      Nx.Vulkan.flush()
      assert Nx.Vulkan.stats().queued_commands == 0
      assert Nx.Vulkan.Fallback.tagged(Process.get(:nx_vulkan_fallback_tag)) == 0
    end
  end

  # The GPU thread takes what callers have queued whenever it is asked and gets to it, so where
  # its takes and windows end depends on timing. A chain cut there would be a new key each time
  # (a kernel built for each cut); cut only where the stream of commands cuts it, a stream of
  # one repeated chain has one key however it is taken.
  test "a chain is cut where the stream cuts it, not where the GPU thread's take ends" do
    x = random({173})
    chain = fn -> x |> Nx.exp() |> Nx.negate() |> Nx.tanh() end
    expected = chain.() |> Nx.backend_copy(Nx.BinaryBackend) |> Nx.to_binary()
    built = fn -> Nx.Vulkan.stats() |> then(&(&1.window_templates + &1.window_unfusable)) end
    idle = fn -> Nx.Vulkan.stats().window_building == 0 end
    wait_until(idle)

    for cap <- [4, 1000] do
      Nx.Vulkan.set_batch_max(cap)
      before = built.()

      # 40 chains queued without a read, 120 commands taken in pieces of whatever size the
      # timing gives, then read (the flush ends the stream after a whole chain).
      for _ <- 1..5 do
        results = for _ <- 1..40, do: chain.()
        assert Enum.all?(results, &(Nx.to_binary(&1) == expected))
      end

      wait_until(idle)
      assert built.() - before <= 1, "cap #{cap}: #{built.() - before} chain keys for one chain"
    end

    # And the one key was built and runs fused.
    before = Nx.Vulkan.stats()
    for _ <- 1..40, do: assert(Nx.to_binary(chain.()) == expected)
    assert Nx.Vulkan.stats().window_kernels > before.window_kernels
  end

  defp wait_until(condition, deadline_ms \\ 120_000) do
    until = System.monotonic_time(:millisecond) + deadline_ms

    Stream.repeatedly(fn -> condition.() or System.monotonic_time(:millisecond) > until end)
    |> Enum.find(fn done -> done or (Process.sleep(10) && false) end)
  end

  test "a chain runs as it came until its kernel is built, and not at all with fusion off" do
    Nx.Vulkan.set_window_fusion(0)
    x = random({256})
    before = Nx.Vulkan.stats()
    for _ <- 1..20, do: x |> Nx.exp() |> Nx.add(x) |> Nx.to_binary()
    assert Nx.Vulkan.stats().window_kernels == before.window_kernels

    # Seen 1000 times before it is built: 20 sightings run unfused.
    Nx.Vulkan.set_window_fusion(1000)
    for _ <- 1..20, do: x |> Nx.exp() |> Nx.subtract(x) |> Nx.to_binary()
    assert Nx.Vulkan.stats().window_kernels == before.window_kernels
  end

  test "the Evaluator's MNIST step with fused windows is bit-identical to it without" do
    {params, x, labels} = MNISTMLP.inputs({32, 784, 128, 10}, Nx.Vulkan.Backend)
    step = Nx.Defn.jit(&MNISTMLP.step/3)
    run = fn -> step.(params, x, labels) |> then(fn {l, g} -> bits([l | Tuple.to_list(g)]) end) end

    Nx.Vulkan.set_window_fusion(0)
    plain = run.()

    Nx.Vulkan.set_window_fusion(1)
    before = Nx.Vulkan.stats()

    fused =
      Enum.find_value(1..200, fn _ ->
        result = run.()
        assert result == plain
        if Nx.Vulkan.stats().window_kernels > before.window_kernels, do: result
      end)

    assert fused == plain, "no window of the step ran fused"
  end

  test "set_window_fusion/1 rejects what is not a count" do
    for bad <- [-1, 1.5, :on, 4_294_967_296] do
      assert_raise ArgumentError, ~r/set_window_fusion\/1: takes an integer/, fn ->
        Nx.Vulkan.set_window_fusion(bad)
      end
    end
  end
end
