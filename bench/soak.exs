# Soak and load: memory and throughput over time.
#
#   mix run bench/soak.exs [--steps 10000] [--processes 64] [--seconds 60] [--only train|mixed]
#
#   * train, read every step: the MNIST MLP training step (examples/mnist_mlp.exs, batch 32,
#     hidden 128) with SGD, the loss read back after every step;
#   * train, read at the end: the same steps, the loss read only after the last one (the
#     pending queue's bound is what keeps this loop from running ahead of the device);
#   * mixed: `--processes` processes each running a loop of mixed ops (element-wise, reductions,
#     dot, slicing, sorting) on their own tensors for `--seconds`, reading a result now and then.
#
# Every tenth of the run prints device memory (live / pooled / pending / peak, MiB), the queue
# (commands), the BEAM's RSS (MiB, from /proc/self/status) and throughput so far; each run ends
# with the bound the settings state (memory limit, pending limits) beside the peaks measured.
{:ok, _} = Application.ensure_all_started(:nx_vulkan)
Nx.global_default_backend(Nx.Vulkan.Backend)
Code.require_file("../examples/mnist_mlp.exs", __DIR__)

defmodule Soak do
  @mib 1024 * 1024

  def rss_mib do
    case File.read("/proc/self/status") do
      {:ok, status} ->
        [_, kb] = Regex.run(~r/VmRSS:\s+(\d+) kB/, status)
        div(String.to_integer(kb), 1024)

      _ ->
        nil
    end
  end

  # `progress`: where the run is ("1200/10000", "t=12 s").
  def report(label, progress, done, started, unit, worst) do
    m = Nx.Vulkan.memory()
    s = System.monotonic_time(:millisecond) - started
    rate = if s > 0, do: Float.round(done * 1000 / s, 1), else: 0.0
    rss = rss_mib()

    IO.puts(
      "#{label} #{progress}: #{rate} #{unit}/s; device MiB live #{div(m.live, @mib)} " <>
        "pooled #{div(m.pooled, @mib)} pending #{div(m.pending, @mib)} peak #{div(m.peak, @mib)}; " <>
        "queued #{m.queued_commands} commands; RSS #{rss} MiB"
    )

    %{worst | rss: max(worst.rss, rss || 0), queued: max(worst.queued, m.queued_commands)}
  end

  def summary(label, worst) do
    s = Nx.Vulkan.stats()
    m = Nx.Vulkan.memory()

    limit = if m.limit == :infinity, do: "none", else: "#{div(m.limit, @mib)} MiB"

    IO.puts(
      "#{label}: peak device #{div(m.peak, @mib)} MiB (limit #{limit}); most queued " <>
        "#{worst.queued} commands (bound #{s.pending_max_commands} commands, " <>
        "#{div(s.pending_max_bytes, @mib)} MiB); peak RSS #{worst.rss} MiB; " <>
        "backpressure waits since start #{s.host_syncs.backpressure}"
    )
  end

  def train(steps, read_every_step?) do
    label = if read_every_step?, do: "train, read every step", else: "train, read at the end"
    Nx.Vulkan.reset_peak()
    {params, x, labels} = MNISTMLP.inputs({32, 784, 128, 10}, Nx.Vulkan.Backend)
    step = Nx.Defn.jit(fn p, x, l -> MNISTMLP.step(p, x, l) end)
    sgd = Nx.Defn.jit(&MNISTMLP.sgd/3)
    started = System.monotonic_time(:millisecond)
    every = max(div(steps, 10), 1)

    {params, loss, worst} =
      Enum.reduce(1..steps, {params, nil, %{rss: 0, queued: 0}}, fn i, {params, _, worst} ->
        {loss, grads} = step.(params, x, labels)
        if read_every_step?, do: Nx.to_number(loss)
        params = sgd.(params, grads, 0.01)

        worst =
          if rem(i, every) == 0,
            do: report(label, "#{i}/#{steps}", i, started, "steps", worst),
            else: worst

        {params, loss, worst}
      end)

    IO.puts("#{label}: final loss #{Nx.to_number(loss)}")
    _ = params
    summary(label, worst)
  end

  def mixed(processes, seconds) do
    label = "mixed, #{processes} processes"
    Nx.Vulkan.reset_peak()
    counter = :counters.new(1, [])
    deadline = System.monotonic_time(:millisecond) + seconds * 1000
    started = System.monotonic_time(:millisecond)

    workers =
      for p <- 1..processes do
        Task.async(fn -> mixed_loop(p, counter, deadline, 0) end)
      end

    worst =
      Enum.reduce(1..10, %{rss: 0, queued: 0}, fn tick, worst ->
        Process.sleep(div(seconds * 1000, 10))
        progress = "t=#{div(tick * seconds, 10)} s"
        report(label, progress, :counters.get(counter, 1), started, "ops", worst)
      end)

    Task.await_many(workers, :infinity)
    summary(label, worst)
  end

  defp mixed_loop(p, counter, deadline, i) do
    if System.monotonic_time(:millisecond) < deadline do
      x = Nx.iota({64, 64}, type: :f32) |> Nx.add(p) |> Nx.divide(4096)

      r =
        x
        |> Nx.exp()
        |> Nx.dot(x)
        |> Nx.sum(axes: [0])
        |> Nx.sort()
        |> Nx.slice([8], [32])
        |> Nx.multiply(Nx.reduce_max(x))

      :counters.add(counter, 1, 8)
      # Read one result in four: some processes' work waits for the device, some runs ahead.
      if rem(i, 4) == 0, do: Nx.to_binary(r)
      mixed_loop(p, counter, deadline, i + 1)
    end
  end
end

{opts, _, _} =
  OptionParser.parse(System.argv(),
    strict: [steps: :integer, processes: :integer, seconds: :integer, only: :string]
  )

steps = opts[:steps] || 10_000
only = opts[:only]

if only in [nil, "train"] do
  Soak.train(steps, true)
  Soak.train(steps, false)
end

if only in [nil, "mixed"], do: Soak.mixed(opts[:processes] || 64, opts[:seconds] || 60)
