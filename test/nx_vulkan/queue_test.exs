defmodule Nx.Vulkan.QueueTest do
  # Not async: these tests read global counters and change the batch cap.
  use Nx.Vulkan.DeviceCase, async: false

  setup do
    previous = Nx.Vulkan.batch_max()
    %{submit_bytes: bytes, submit_commands: commands, submit_idle: idle} = Nx.Vulkan.stats()

    on_exit(fn ->
      Nx.Vulkan.set_batch_max(previous)
      Nx.Vulkan.set_submit_bytes(bytes)
      Nx.Vulkan.set_submit_commands(commands)
      Nx.Vulkan.set_submit_idle(idle)
    end)

    # Idle submission (2 commands on GPUs) would split the batches these tests count; the test
    # of early submission turns it on.
    Nx.Vulkan.set_submit_idle(0)
    Nx.Vulkan.flush()
    :ok
  end

  defp chain(x, n),
    do:
      Enum.reduce(1..n, x, fn i, acc ->
        acc |> Nx.multiply(1.0001) |> Nx.add(i * 1.0e-3) |> Nx.tanh()
      end)

  test "a download flushes once; recording does not submit under the cap" do
    Nx.Vulkan.set_batch_max(1000)
    # Count-based submission (16 commands on GPUs) would send these 30 commands early.
    Nx.Vulkan.set_submit_commands(0)
    before = Nx.Vulkan.stats()
    r = chain(random({64}), 10)
    mid = Nx.Vulkan.stats()
    # Small work never submits for its size (NXV_SUBMIT_BYTES is megabytes on GPUs, 0 on CPU
    # devices): these 30 results of 256 bytes wait for the download.
    small = mid.submit_bytes == 0 or mid.submit_bytes > 30 * 256
    if small, do: assert(mid.submissions == before.submissions)
    _ = Nx.to_binary(r)
    after_download = Nx.Vulkan.stats()
    if small, do: assert(after_download.submissions - before.submissions == 1)
    assert after_download.flushes.download == before.flushes.download + 1
    assert after_download.recorded >= before.recorded + 30
  end

  # Early submission, each threshold off and on, with the same bits (the BinaryBackend's):
  # {what, its setter, the threshold on, the input's shape, chain
  # steps (3 commands each)}.
  # - work: 2^20 f32 results, 4 MiB each, past a 1 MiB bound; 12 commands: the GPU thread's first
  #   drain (at 8) finds 4 MiB or more recorded and submits them (all 12 if they were queued by
  #   then: the download then has nothing left to submit).
  # - commands: 24 commands: the first drain (at 8) finds 4 or more recorded and submits them
  #   (all 24 if they were queued by then).
  # - idle: 24 commands: the first drain (at 8) submits its first 2 to the idle GPU.
  for {what, setter, threshold, shape, steps} <- [
        {"work-based submission: large results go to the GPU before the flush", :set_submit_bytes,
         1_048_576, {1_048_576}, 4},
        {"count-based submission: batches go to the GPU as they fill", :set_submit_commands, 4,
         {256}, 8},
        {"idle submission: a batch goes to an idle GPU at once", :set_submit_idle, 2, {256}, 8}
      ] do
    test "#{what}, with the same bits" do
      Nx.Vulkan.set_batch_max(1000)
      # The other thresholds off (setup restores them), this one's off and on.
      for other <- [:set_submit_bytes, :set_submit_commands, :set_submit_idle] -- [unquote(setter)],
          do: apply(Nx.Vulkan, other, [0])

      x = random(unquote(Macro.escape(shape)))
      Nx.Vulkan.flush()

      run = fn threshold ->
        apply(Nx.Vulkan, unquote(setter), [threshold])
        before = Nx.Vulkan.stats()
        bin = chain(x, unquote(steps)) |> Nx.to_binary()
        after_read = Nx.Vulkan.stats()

        {bin, after_read.early_submissions - before.early_submissions,
         after_read.submissions - before.submissions}
      end

      {off, 0, 1} = run.(0)
      {on, early, submitted} = run.(unquote(threshold))
      assert on == off
      assert early >= 1
      assert submitted >= early
      expected = chain(Nx.backend_copy(x, Nx.BinaryBackend), unquote(steps))
      assert Nx.all_close(Nx.from_binary(on, :f32), expected, atol: 1.0e-6) |> Nx.to_number() == 1
    end
  end

  test "set_submit_idle/1 rejects what is not a command count" do
    assert_raise ArgumentError, ~r/set_submit_idle/, fn -> Nx.Vulkan.set_submit_idle(-1) end
    assert_raise ArgumentError, ~r/set_submit_idle/, fn -> Nx.Vulkan.set_submit_idle(2.0) end
  end

  test "set_submit_commands/1 rejects what is not a command count" do
    assert_raise ArgumentError, ~r/set_submit_commands/, fn -> Nx.Vulkan.set_submit_commands(-1) end

    assert_raise ArgumentError, ~r/set_submit_commands/, fn ->
      Nx.Vulkan.set_submit_commands(:all)
    end
  end

  test "set_submit_bytes/1 rejects what is not a byte count" do
    assert_raise ArgumentError, ~r/set_submit_bytes/, fn -> Nx.Vulkan.set_submit_bytes(-1) end
    assert_raise ArgumentError, ~r/set_submit_bytes/, fn -> Nx.Vulkan.set_submit_bytes(1.5) end
  end

  test "explicit flush" do
    Nx.Vulkan.set_batch_max(1000)
    before = Nx.Vulkan.stats()
    _ = Nx.exp(random({8}))
    assert Nx.Vulkan.flush() == :ok
    after_flush = Nx.Vulkan.stats()
    assert after_flush.flushes.explicit == before.flushes.explicit + 1
    assert after_flush.submissions == before.submissions + 1
  end

  test "recording time counts opening command buffers; the driver's share only when profiled" do
    before = Nx.Vulkan.stats()
    _ = Nx.add(random({8}), random({8}))
    assert Nx.Vulkan.flush() == :ok
    s = Nx.Vulkan.stats()
    assert s.record_ns > before.record_ns
    assert s.record_begin_ns > before.record_begin_ns
    assert s.record_begin_ns - before.record_begin_ns <= s.record_ns - before.record_ns
    # NXV_PROFILE_RECORDING is not set in the test command's runs.
    assert s.record_driver_ns == 0
  end

  test "the cap bounds every command buffer and triggers submissions on its own" do
    Nx.Vulkan.set_batch_max(4)
    Nx.Vulkan.flush()
    before = Nx.Vulkan.stats()
    _ = chain(random({16}), 4) |> Nx.to_binary()
    after_run = Nx.Vulkan.stats()
    recorded = after_run.recorded - before.recorded
    submissions = after_run.submissions - before.submissions
    assert recorded >= 12
    assert submissions >= div(recorded + 3, 4)
    assert after_run.flushes.batch_cap > before.flushes.batch_cap
  end

  # queue.rs SEGMENT_COMMANDS: a batch past 512 queue entries records as several command buffers
  # (drivers record a command slower in very long ones), submitted together with one fence. A
  # chain runs across the segments' boundaries and independent reads of its early links come
  # after them: every result as the BinaryBackend's, one submission.
  test "a long batch records as several command buffers in one submission" do
    Nx.Vulkan.set_batch_max(100_000)
    Nx.Vulkan.set_submit_commands(0)
    Nx.Vulkan.set_submit_bytes(0)
    x = random({64})
    Nx.Vulkan.flush()
    before = Nx.Vulkan.stats()

    links =
      Enum.scan(1..700, x, fn i, acc -> acc |> Nx.multiply(1.0001) |> Nx.add(i * 1.0e-3) end)

    # Read after the chain has moved on: these depend on links recorded segments earlier.
    late = for link <- Enum.take_every(links, 50), do: Nx.subtract(link, x)
    Nx.Vulkan.flush()
    s = Nx.Vulkan.stats()
    assert s.recorded - before.recorded >= 1400
    assert s.submissions - before.submissions == 1
    assert s.command_buffers - before.command_buffers >= 3

    host = Nx.backend_copy(x, Nx.BinaryBackend)

    expected =
      Enum.scan(1..700, host, fn i, acc -> acc |> Nx.multiply(1.0001) |> Nx.add(i * 1.0e-3) end)

    assert Enum.map(links, &Nx.to_binary/1) == Enum.map(expected, &Nx.to_binary/1)

    assert Enum.map(late, &Nx.to_binary/1) ==
             Enum.map(Enum.take_every(expected, 50), &Nx.to_binary(Nx.subtract(&1, host)))
  end

  test "cap 0 submits every command on its own" do
    Nx.Vulkan.set_batch_max(0)
    before = Nx.Vulkan.stats()
    _ = chain(random({16}), 3) |> Nx.to_binary()
    after_run = Nx.Vulkan.stats()
    assert after_run.submissions - before.submissions == after_run.recorded - before.recorded
  end

  # queue.rs Hazards: the barrier tracking follows the queue, not one command buffer (no barrier
  # opens each one). At cap 0 every command is a submission of its own: a command reading what
  # the previous submission wrote gets a barrier, independent ones after it get none. Lavapipe
  # runs a queue's commands one after another, so only the count can show a missing barrier.
  test "a command depending on an earlier submission gets a barrier; independent ones do not" do
    a = random({64})
    Nx.Vulkan.flush()
    Nx.Vulkan.set_batch_max(0)
    before = Nx.Vulkan.stats()
    # At most one barrier: the first may read `a` while its write is still tracked.
    independent = [Nx.exp(a), Nx.negate(a), Nx.sin(a), Nx.cos(a)]
    Nx.Vulkan.flush()
    mid = Nx.Vulkan.stats()
    assert mid.recorded - before.recorded == 4
    assert mid.submissions - before.submissions == 4
    assert mid.barriers - before.barriers <= 1
    chained = hd(independent) |> Nx.sin() |> Nx.sin() |> Nx.sin()
    Nx.Vulkan.flush()
    after_chain = Nx.Vulkan.stats()
    assert after_chain.recorded - mid.recorded == 3
    assert after_chain.barriers - mid.barriers == 3

    expected =
      a |> Nx.backend_copy(Nx.BinaryBackend) |> Nx.exp() |> Nx.sin() |> Nx.sin() |> Nx.sin()

    assert Nx.to_binary(chained) == Nx.to_binary(expected)
  end

  test "results are bit-identical across batch caps" do
    x = random({33, 17}, :f32, 2.0, 4)
    w = random({17, 5}, :f32, 1.0, 5)

    results =
      for cap <- [0, 1, 4, 64, 256] do
        Nx.Vulkan.set_batch_max(cap)
        h = x |> Nx.dot(w) |> Nx.max(0.0) |> Nx.exp()
        s = Nx.sum(h, axes: [1], keep_axes: true)
        Nx.to_binary(Nx.divide(h, s) |> Nx.log() |> Nx.sum())
      end

    assert length(Enum.uniq(results)) == 1
  end

  # The GPU thread records what it finds pending in dependency order (queue.rs by_level): chains
  # issued one after another interleave, and in-place commands (put_slice's copy of its target,
  # then the write into it; a scatter) keep their order on the buffer they share. The same bits
  # as the BinaryBackend at every cap, whatever windows the drains found.
  test "commands recorded out of arrival order compute what arrival order does" do
    xs = for seed <- 1..4, do: random({24, 16}, :f32, 2.0, seed)
    host = fn t -> Nx.backend_copy(t, Nx.BinaryBackend) end

    work = fn xs ->
      chains =
        for x <- xs do
          x |> Nx.multiply(1.5) |> Nx.add(0.25) |> Nx.tanh() |> Nx.exp() |> Nx.subtract(x)
        end

      target = Nx.broadcast(0.0, {48, 32}) |> Nx.add(0.0)

      placed =
        chains
        |> Enum.with_index()
        |> Enum.reduce(target, fn {c, i}, acc ->
          Nx.put_slice(acc, [rem(i, 2) * 24, div(i, 2) * 16], c)
        end)

      scattered =
        Nx.indexed_add(
          placed,
          Nx.tensor([[0, 0], [47, 31], [0, 0]]),
          Nx.sum(hd(chains), axes: [1]) |> Nx.slice([0], [3])
        )

      {Nx.sum(scattered, axes: [0]), scattered}
    end

    {expected_sums, expected} =
      Nx.with_default_backend(Nx.BinaryBackend, fn -> work.(Enum.map(xs, host)) end)

    for cap <- [0, 4, 1000] do
      Nx.Vulkan.set_batch_max(cap)
      {sums, scattered} = work.(xs)
      assert Nx.to_binary(scattered) == Nx.to_binary(expected)
      assert Nx.to_binary(sums) == Nx.to_binary(expected_sums)
    end
  end

  test "a tensor garbage-collected while its work is pending stays alive until the work is done" do
    Nx.Vulkan.set_batch_max(1000)

    result =
      (fn ->
         x = random({50_000}, :f32, 1.0, 9)
         # Only `y` survives this function; x and every intermediate become garbage while the
         # commands that read them are still pending.
         x |> Nx.exp() |> Nx.add(1.0) |> Nx.log() |> Nx.multiply(x)
       end).()

    expected =
      Nx.with_default_backend(Nx.BinaryBackend, fn ->
        x = Nx.backend_copy(random({50_000}, :f32, 1.0, 9), Nx.BinaryBackend)
        x |> Nx.exp() |> Nx.add(1.0) |> Nx.log() |> Nx.multiply(x)
      end)

    :erlang.garbage_collect()
    Process.sleep(10)
    live_before_flush = Nx.Vulkan.stats().live_buffers
    assert Nx.to_binary(result) == Nx.to_binary(expected)
    assert live_before_flush >= 1
  end

  test "the pipeline cache creates each pipeline once" do
    _ = Nx.to_binary(Nx.exp(random({4})))
    before = Nx.Vulkan.stats()
    _ = Nx.to_binary(Nx.exp(random({4})))
    after_run = Nx.Vulkan.stats()
    assert after_run.pipelines_created == before.pipelines_created
    assert after_run.pipeline_hits > before.pipeline_hits
  end

  test "NXV_BATCH_MAX is validated" do
    for {value, expected} <- [{"0", 0}, {" 16 ", 16}, {"", 64}] do
      System.put_env("NXV_BATCH_MAX", value)
      assert Nx.Vulkan.batch_max_from_env!() == expected
    end

    # The NIF takes an i64: 2 ** 63 and above are refused here, not by its argument decoder.
    for bad <- ["abc", "-1", "1.5", "64x", "9223372036854775808"] do
      System.put_env("NXV_BATCH_MAX", bad)

      assert_raise ArgumentError,
                   ~r/NXV_BATCH_MAX must be an integer from 0 to 2 \*\* 63 - 1.*got: "#{bad}"/,
                   fn -> Nx.Vulkan.batch_max_from_env!() end
    end
  after
    System.delete_env("NXV_BATCH_MAX")
  end

  # The setup restores the cap.
  test "set_batch_max/1 and set_gpu_timing/1 check their argument before the NIF does" do
    for bad <- [-1, 2 ** 63, 2 ** 70, 1.0, "8", nil] do
      assert_raise ArgumentError,
                   "set_batch_max/1: the batch max must be an integer from 0 to 2 ** 63 - 1 " <>
                     "(0 = submit every op on its own), got: #{inspect(bad)}",
                   fn -> Nx.Vulkan.set_batch_max(bad) end
    end

    assert Nx.Vulkan.set_batch_max(2 ** 63 - 1) == :ok
    assert Nx.Vulkan.batch_max() == 2 ** 63 - 1
    assert Nx.to_flat_list(Nx.add(dev([1.0]), 1.0)) == [2.0]

    assert_raise ArgumentError, "set_gpu_timing/1 takes true, :per_batch or false, got: :yes", fn ->
      Nx.Vulkan.set_gpu_timing(:yes)
    end
  end

  test "with GPU timing on, take_kernel_times/0 gives each kernel's commands and GPU time, then starts over" do
    Nx.Vulkan.set_gpu_timing(true)
    Nx.Vulkan.take_kernel_times()
    # More commands than one timed command buffer holds (1024), so the cap splits them.
    Nx.Vulkan.set_batch_max(5000)
    x = Nx.iota({1000}, type: :f32, backend: Nx.Vulkan.Backend)
    last = Enum.reduce(1..1100, x, fn _, acc -> Nx.add(acc, x) end)
    assert Nx.to_number(last[999]) == 999.0 * 1101
    times = Nx.Vulkan.take_kernel_times()

    {adds, ns} =
      Enum.find_value(times, fn {name, v} -> if name in [:binary_f32, :binary_f32p], do: v end)

    assert adds == 1100
    assert ns > 0
    # The read of the 4-byte slice: a copy into a staging buffer unless the host reads the
    # slice's own memory (Device.info's direct_read_bytes).
    copies = if Nx.Vulkan.Device.info().direct_read_bytes == 0, do: 1, else: 0
    assert copies == times |> Map.get(:buffer_copy, {0, 0}) |> elem(0)
    assert Nx.Vulkan.take_kernel_times() == %{}
  after
    Nx.Vulkan.set_gpu_timing(false)
  end

  test "set_gpu_timing/1 applies from the next command, also where a command buffer is open" do
    Nx.Vulkan.set_batch_max(1000)
    x = Nx.iota({1000}, type: :f32, backend: Nx.Vulkan.Backend)

    # n commands queued untimed: those the GPU thread has not recorded yet (it takes pending
    # commands 8 at a time, when asked) set_gpu_timing has it record first, into a command
    # buffer opened untimed that stays open under the cap. Counts of different remainders mod 8
    # leave some unrecorded at the call, whatever the queue's count was before.
    for n <- [17, 20, 23] do
      Nx.Vulkan.flush()
      untimed = Enum.reduce(1..n, x, fn _, acc -> Nx.add(acc, x) end)
      Nx.Vulkan.set_gpu_timing(true)
      Nx.Vulkan.take_kernel_times()
      timed = Nx.multiply(untimed, untimed)
      assert Nx.to_number(timed[3]) == (3.0 * (n + 1)) ** 2
      times = Nx.Vulkan.take_kernel_times()

      assert [{1, ns}] =
               for({name, v} <- times, name in [:binary_f32, :binary_f32p], do: v),
             "#{n} commands before: #{inspect(times)}"

      assert ns > 0
      Nx.Vulkan.set_gpu_timing(false)
    end
  after
    Nx.Vulkan.set_gpu_timing(false)
  end

  test "per-batch GPU timing measures each submission's GPU time and no kernel times" do
    Nx.Vulkan.set_gpu_timing(:per_batch)
    Nx.Vulkan.take_kernel_times()
    x = Nx.iota({1000}, type: :f32, backend: Nx.Vulkan.Backend)
    Nx.Vulkan.flush()
    before = Nx.Vulkan.stats().gpu_ns
    last = Enum.reduce(1..100, x, fn _, acc -> Nx.add(acc, x) end)
    assert Nx.to_number(last[999]) == 999.0 * 101
    assert Nx.Vulkan.stats().gpu_ns > before
    assert Nx.Vulkan.take_kernel_times() == %{}
  after
    Nx.Vulkan.set_gpu_timing(false)
  end
end
