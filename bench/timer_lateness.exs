# How late another process's 5 ms timer fires while nx_vulkan works (target: <= 10 ms), and how
# long a first-use burst takes with a cold and a warm on-disk pipeline cache.
#
#   mix run bench/timer_lateness.exs     (or: elixir bench/timer_lateness.exs with apps on ERL_LIBS)
#
# Runs itself twice as a child VM (`--child`) with NXV_PIPELINE_CACHE set to a fresh directory:
# the first child starts cold (every pipeline compiled), the second warm (the first one's cache).
# Each child measures the worst lateness of a 5 ms timer loop in another process during
#   * a burst of first uses: ~40 ops that each need a pipeline variant nobody has used yet, then
#     the read that waits for them, and
#   * a long flush: 2,000 queued ops on 256K-element tensors read at once.
defmodule TimerLateness do
  def child do
    {:ok, _} = Application.ensure_all_started(:nx_vulkan)
    Nx.global_default_backend(Nx.Vulkan.Backend)
    x = Nx.iota({64, 64}, type: :f32) |> Nx.divide(4096)
    Nx.to_binary(x)

    {burst_late, burst_ms} = with_timer(fn -> burst(x) end)
    s = Nx.Vulkan.stats()

    big = Nx.iota({256 * 1024}, type: :f32) |> Nx.divide(1.0e6)
    Nx.to_binary(big)

    {flush_late, flush_ms} =
      with_timer(fn ->
        Enum.reduce(1..2000, big, fn _, acc -> acc |> Nx.multiply(0.999) |> Nx.add(1.0e-6) end)
        |> Nx.to_binary()
      end)

    IO.puts(
      "#{s.pipeline_disk_cache.status} cache (#{s.pipeline_disk_cache.bytes} bytes loaded): " <>
        "first-use burst #{burst_ms} ms, #{s.pipelines_created} pipelines created in " <>
        "#{div(s.pipeline_create_us, 1000)} ms of builder time (#{div(s.pipeline_driver_us, 1000)} ms in " <>
        "the driver); worst timer lateness " <>
        "#{burst_late} ms during the burst, #{flush_late} ms during a #{flush_ms} ms flush"
    )
  end

  # Ops that each use kernel variants not used before (element-wise, reductions, layout, dot...).
  defp burst(x) do
    unary = [:exp, :log1p, :sin, :cos, :tanh, :sigmoid, :sqrt, :erf, :abs, :negate, :floor, :ceil]
    binary = [:add, :subtract, :multiply, :divide, :max, :min, :pow, :atan2, :remainder]

    results =
      Enum.map(unary, &apply(Nx, &1, [x])) ++
        Enum.map(binary, &apply(Nx, &1, [x, Nx.add(x, 1)])) ++
        [
          Nx.sum(x, axes: [0]),
          Nx.reduce_max(x, axes: [1]),
          Nx.argmax(x, axis: 1),
          Nx.dot(x, x),
          Nx.transpose(x),
          Nx.slice(x, [1, 2], [10, 20]),
          Nx.concatenate([x, x]),
          Nx.sort(x, axis: 1),
          Nx.cumulative_sum(x, axis: 1),
          Nx.as_type(x, :s32),
          Nx.as_type(x, :u8),
          Nx.as_type(x, :f16),
          Nx.less(x, 0.5),
          Nx.select(Nx.greater(x, 0.5), x, 0.0),
          Nx.window_sum(x, {2, 2}),
          Nx.reverse(x),
          Nx.pad(x, 0.0, [{1, 1, 0}, {0, 2, 1}])
        ]

    Enum.each(results, &Nx.to_binary/1)
  end

  # Runs `fun` while another process sleeps 5 ms at a time; returns the worst lateness (ms) and
  # how long `fun` took (ms).
  # Also prints every stretch of over 2 ms that a process ran on a normal scheduler without
  # yielding (`:erlang.system_monitor/2`'s long_schedule: a long NIF shows here with its MFA).
  defp with_timer(fun) do
    parent = self()
    timer = spawn(fn -> tick(parent, 0) end)
    monitor = spawn(fn -> long_schedules(parent, []) end)
    :erlang.system_monitor(monitor, [{:long_schedule, 2}])
    Process.sleep(20)
    {us, _} = :timer.tc(fun)
    :erlang.system_monitor(:undefined)
    send(timer, :stop)
    send(monitor, :stop)

    receive do: ({:long_schedules, events} -> Enum.each(events, &IO.puts("  long schedule: #{&1}")))
    receive do: ({:late, us_late} -> {Float.round(us_late / 1000, 1), div(us, 1000)})
  end

  defp long_schedules(parent, events) do
    receive do
      :stop ->
        send(parent, {:long_schedules, Enum.reverse(events)})

      {:monitor, _pid, :long_schedule, info} ->
        event = "#{info[:timeout]} ms in #{inspect(info[:in])} (left at #{inspect(info[:out])})"
        long_schedules(parent, [event | events])
    end
  end

  defp tick(parent, worst) do
    t0 = System.monotonic_time(:microsecond)

    receive do
      :stop -> send(parent, {:late, worst})
    after
      5 ->
        late = System.monotonic_time(:microsecond) - t0 - 5000
        tick(parent, max(worst, late))
    end
  end
end

case System.argv() do
  ["--child"] ->
    TimerLateness.child()

  _ ->
    dir =
      Path.join(System.tmp_dir!(), "nx_vulkan_timer_lateness_#{System.unique_integer([:positive])}")

    env = [{"NXV_PIPELINE_CACHE", dir}]

    for start <- ["cold", "warm"] do
      # Under Mix (mix run) the child is a mix run too; under plain elixir (the H200 host's
      # bundle, apps on ERL_LIBS), an elixir of this file.
      {command, args} =
        if Process.whereis(Mix.ProjectStack),
          do: {"mix", ["run", "bench/timer_lateness.exs", "--child"]},
          else: {"elixir", [__ENV__.file, "--child"]}

      {us, {out, _}} =
        :timer.tc(fn -> System.cmd(command, args, env: env, stderr_to_stdout: true) end)

      IO.write("#{start} start (child VM #{div(us, 1000)} ms): #{out}")
    end

    File.rm_rf!(dir)
end
