defmodule Nx.Vulkan.MemoryTest do
  # Not async: the budget and the queue's bound are global, and these tests set them small.
  use ExUnit.Case, async: false

  @mib 1024 * 1024

  setup do
    s = Nx.Vulkan.stats()

    on_exit(fn ->
      Nx.Vulkan.set_memory_limit(s.memory_limit)
      Nx.Vulkan.set_pending_limits(commands: s.pending_max_commands, bytes: s.pending_max_bytes)
    end)

    # Empties the pool, so an allocation in these tests is a new one that the budget sees, and
    # the compiler's cache, whose programs an allocation over the budget would free (so the
    # budgets below, set from what is allocated now, stay as tight as they say).
    # (A dropped program's memory returns once the processes that looked it up collect.)
    Nx.Vulkan.ProgramCache.clear()
    Enum.each(Process.list(), &:erlang.garbage_collect/1)
    Nx.Vulkan.Native.reclaim()
    Nx.Vulkan.reset_peak()
    :ok
  end

  # Whether `check` holds within 10 s, polled (the trimming thread's work lands when it runs).
  defp eventually(check, deadline \\ System.monotonic_time(:millisecond) + 10_000) do
    cond do
      check.() ->
        true

      System.monotonic_time(:millisecond) > deadline ->
        false

      true ->
        Process.sleep(100)
        eventually(check, deadline)
    end
  end

  # 16 MiB of f32 on the device.
  defp block(k), do: Nx.iota({4 * @mib}, type: :f32) |> Nx.add(k)

  test "buffers left unused in the pool past NXV_POOL_IDLE_MS go back to the device" do
    Nx.Vulkan.Native.set_pool_idle_ms(200)
    on_exit(fn -> Nx.Vulkan.Native.set_pool_idle_ms(10_000) end)
    x = Nx.iota({@mib}, type: :f32, backend: Nx.Vulkan.Backend)
    for k <- 1..4, do: x |> Nx.add(k) |> Nx.backend_deallocate()
    Nx.Vulkan.flush()
    pooled = Nx.Vulkan.memory().pooled
    assert pooled >= 4 * @mib
    # The trimming thread looks once a second; a buffer reused meanwhile stays.
    assert eventually(fn -> Nx.Vulkan.memory().pooled <= pooled - 4 * @mib end)
    assert Nx.to_number(Nx.add(x, 1)[7]) == 8.0
  end

  test "buffers allocated longer ago than NXV_POOL_MAX_AGE_MS are freed, not pooled" do
    # The idle limit off: only the age limit frees here.
    Nx.Vulkan.Native.set_pool_idle_ms(0)
    # Long enough for `fresh` below to be made and released young on a busy host.
    Nx.Vulkan.Native.set_pool_max_age_ms(1_000)

    on_exit(fn ->
      Nx.Vulkan.Native.set_pool_idle_ms(10_000)
      Nx.Vulkan.Native.set_pool_max_age_ms(600_000)
    end)

    x = Nx.iota({@mib}, type: :f32, backend: Nx.Vulkan.Backend)
    young = Nx.add(x, 1)
    old = Nx.add(x, 2)
    Nx.Vulkan.flush()
    Process.sleep(1_100)
    pooled = Nx.Vulkan.memory().pooled
    # Released past its age: freed at once.
    Nx.backend_deallocate(old)
    assert Nx.Vulkan.memory().pooled == pooled
    # Released young (a fresh one), pooled; the trimming thread (once a second) frees it once
    # it passes the age, though the idle limit is off.
    fresh = Nx.add(x, 3)
    Nx.Vulkan.flush()
    Nx.backend_deallocate(fresh)
    assert Nx.Vulkan.memory().pooled >= pooled + 4 * @mib
    assert eventually(fn -> Nx.Vulkan.memory().pooled <= pooled end)
    assert Nx.to_number(young[7]) == 8.0
  end

  test "an allocation over the budget raises a clear error; the VM carries on and memory returns" do
    # Room for three blocks and the iota of a fourth, not for its sum.
    Nx.Vulkan.set_memory_limit(Nx.Vulkan.stats().allocated_bytes + 72 * @mib)

    error =
      assert_raise Nx.Vulkan.Error, fn ->
        # Kept alive in the accumulator.
        Enum.reduce(1..8, [], fn k, held -> [block(k) | held] end)
      end

    assert error.message =~
             ~r/^out of device memory: requested \d+ bytes; live \d+, pooled \d+, pending \d+, limit \d+$/

    [_, requested, live, limit] =
      Regex.run(~r/requested (\d+) bytes; live (\d+),.* limit (\d+)/, error.message)

    assert String.to_integer(requested) >= 16 * @mib
    assert String.to_integer(live) + String.to_integer(requested) > String.to_integer(limit)

    # Another process computes meanwhile, and the held blocks died with the failed reduce: the
    # three blocks fit again, with the right values.
    other = Task.async(fn -> Nx.to_list(Nx.add(Nx.tensor([1, 2]), 1)) end)
    assert Task.await(other, 60_000) == [2, 3]
    held = Enum.map(1..3, &block/1)

    expected =
      Nx.with_default_backend(Nx.BinaryBackend, fn -> Nx.add(Nx.iota({4 * @mib}, type: :f32), 3) end)

    assert Nx.to_binary(List.last(held)) == Nx.to_binary(expected)
    m = Nx.Vulkan.memory()
    assert m.live + m.pooled + m.pending <= m.limit
    assert m.peak <= m.limit
  end

  test "an allocation over the budget first collects the dead tensors of other processes" do
    parent = self()

    # Makes 96 MiB of tensors (three blocks and their iotas), reads them, and then sleeps with
    # them dead in its heap: a process that does not run does not collect (and with a heap this
    # large, it did not collect while it ran).
    holder =
      :erlang.spawn_opt(
        fn ->
          blocks = Enum.map(1..3, &block/1)
          send(parent, {:sums, Enum.map(blocks, &Nx.to_number(&1[1]))})
          receive do: (:stop -> :ok)
        end,
        min_heap_size: 4_000_000
      )

    assert_receive {:sums, [2.0, 3.0, 4.0]}, 60_000
    Nx.Vulkan.Native.reclaim()
    live = Nx.Vulkan.memory().live
    assert live >= 96 * @mib
    # Room for one new 16 MiB buffer and a half; the next block needs two.
    Nx.Vulkan.set_memory_limit(Nx.Vulkan.stats().allocated_bytes + 24 * @mib)
    assert Nx.to_number(block(10)[5]) == 15.0
    assert Process.alive?(holder)
    # The holder's 96 MiB went, the new block's 16 MiB came.
    assert Nx.Vulkan.memory().live <= live - 64 * @mib
    send(holder, :stop)
  end

  test "an allocation over the budget drops the compiler's cached programs and their memory" do
    # Two 16 MiB intermediates (the exp and the sum before the last add may share one) that the
    # program keeps for its next call.
    f = fn x -> x |> Nx.exp() |> Nx.multiply(2) |> Nx.add(x) end
    compiled = Nx.Defn.jit(f, compiler: Nx.Vulkan)
    x = Nx.iota({4 * @mib}, type: :f32, backend: Nx.Vulkan.Backend) |> Nx.divide(4 * @mib)
    expected = x |> Nx.backend_copy(Nx.BinaryBackend) |> f.() |> Nx.to_binary()
    assert Nx.to_binary(compiled.(x)) == expected
    info = Nx.Vulkan.program_info(f, [x])
    assert info.bytes >= 16 * @mib
    assert Nx.Vulkan.ProgramCache.size() >= 1
    Nx.Vulkan.Native.reclaim()
    live = Nx.Vulkan.memory().live
    # Room for half a block beside what the program holds; a block needs its iota and its sum.
    Nx.Vulkan.set_memory_limit(Nx.Vulkan.stats().allocated_bytes + 8 * @mib)
    assert Nx.to_number(block(3)[5]) == 8.0
    assert Nx.Vulkan.ProgramCache.size() == 0
    assert Nx.Vulkan.memory().live <= live - info.bytes + 32 * @mib
    # Built again on its next call, with the same result.
    Nx.Vulkan.set_memory_limit(:infinity)
    census = Nx.Vulkan.compiler_census()
    assert Nx.to_binary(compiled.(x)) == expected
    assert Nx.Vulkan.compiler_census().programs == census.programs + 1
  end

  test "a tensor that alone passes the budget raises at once, naming its size" do
    Nx.Vulkan.set_memory_limit(Nx.Vulkan.stats().allocated_bytes + 8 * @mib)

    assert_raise Nx.Vulkan.Error, ~r/^out of device memory: requested 16777216 bytes/, fn ->
      block(0)
    end

    Nx.Vulkan.set_memory_limit(:infinity)
    assert Nx.to_number(block(1)[7]) == 8.0
  end

  test "memory/0 reports live, pooled, pending and peak, and the peak resets" do
    Nx.Vulkan.set_memory_limit(:infinity)
    t = block(0)
    Nx.to_binary(t[0])
    m = Nx.Vulkan.memory()
    assert m.live >= 16 * @mib
    assert m.peak >= m.live + m.pooled + m.pending
    assert m.limit == :infinity
    # Deallocated, its buffer goes to the pool; emptied, the pool frees it; the peak stays.
    Nx.backend_deallocate(t)
    assert Nx.Vulkan.memory().pooled >= 16 * @mib
    Nx.Vulkan.Native.reclaim()
    assert Nx.Vulkan.memory().peak == m.peak
    Nx.Vulkan.reset_peak()
    after_reset = Nx.Vulkan.memory()
    assert after_reset.peak == after_reset.live + after_reset.pooled + after_reset.pending
    assert after_reset.peak <= m.peak - 16 * @mib
  end

  test "a producer that never reads stays within the pending queue's bound" do
    # Each step writes 4 MiB, which lavapipe takes far longer to compute than the BEAM to queue.
    Nx.Vulkan.set_pending_limits(commands: 64, bytes: 16 * @mib)
    before = Nx.Vulkan.stats().host_syncs.backpressure
    start = Nx.iota({@mib}, type: :f32)

    {result, {commands, bytes}} =
      Enum.reduce(1..300, {start, {0, 0}}, fn _, {acc, {commands, bytes}} ->
        m = Nx.Vulkan.memory()
        {Nx.add(acc, 1.0), {max(commands, m.queued_commands), max(bytes, m.queued_bytes)}}
      end)

    # A process checks the bound every 16 results.
    assert commands <= 64 + 16
    assert bytes <= 16 * @mib + 16 * 4 * @mib
    assert Nx.Vulkan.stats().host_syncs.backpressure > before

    expected =
      Nx.with_default_backend(Nx.BinaryBackend, fn -> Nx.add(Nx.iota({@mib}, type: :f32), 300.0) end)

    assert Nx.to_binary(result) == Nx.to_binary(expected)
  end

  test "bad settings raise ArgumentError naming them" do
    assert_raise ArgumentError, ~r/the memory limit is a number of bytes/, fn ->
      Nx.Vulkan.set_memory_limit(1.5)
    end

    assert_raise ArgumentError, ~r/set_pending_limits\/1 takes positive integers/, fn ->
      Nx.Vulkan.set_pending_limits(commands: 0)
    end
  end
end
