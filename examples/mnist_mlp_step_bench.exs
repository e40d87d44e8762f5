# MNIST MLP training step on Nx.Vulkan.Backend under Nx.Defn.Evaluator (the default compiler).
#
#   mix run examples/mnist_mlp_step_bench.exs [--binary] [--blocks N] [--steps N] [--batch B --hidden H]
#
# The seed's configuration is batch 32, hidden 128 (dispatch-bound on a GPU); --batch 512
# --hidden 2048 is the kernel-bound variant (bench/peers_mnist_step.py takes the same flags).
#
# Checks before timing: every input and gradient lives on Nx.Vulkan.Backend, the loss is finite,
# and the step falls back to the host for nothing. Then times best and median of N blocks of M
# steps (default 5 x 20), each mode after 0.5 s of warm-up steps, reading the loss back every
# step, in two modes: Nx.Defn.jit called every step (the Evaluator re-traces each call) and a
# function compiled once with Nx.Defn.compile/3.
# The Evaluator's own floor is the same step on tiny shapes (batch 1, 2 features, 2 hidden units)
# on Nx.BinaryBackend. --binary (or NXV_BENCH_BINARY=1) also runs the real step on the
# BinaryBackend for the ratio. Prints one table, and a RESULT line for bench/batch_cap_sweep.exs.
# Also runs as a plain `elixir` script with the apps on ERL_LIBS (how it runs on machines
# without Mix, such as the H200 host): then nothing has started the applications yet.
{:ok, _} = Application.ensure_all_started(:nx_vulkan)
Nx.global_default_backend(Nx.Vulkan.Backend)
Code.require_file("mnist_mlp.exs", __DIR__)

{opts, _, _} =
  OptionParser.parse(
    System.argv(),
    strict: [binary: :boolean, blocks: :integer, steps: :integer, batch: :integer, hidden: :integer]
  )

blocks = opts[:blocks] || 5
steps = opts[:steps] || 20
with_binary = opts[:binary] || System.get_env("NXV_BENCH_BINARY") == "1"

defmodule Bench do
  # Runs `block_steps` steps `blocks` times; returns {best, median} ms per step.
  def time(step_fun, blocks, block_steps) do
    per_step =
      for _ <- 1..blocks do
        {us, _} =
          :timer.tc(fn ->
            for _ <- 1..block_steps do
              {loss, _grads} = step_fun.()
              Nx.to_number(loss)
            end
          end)

        us / 1000 / block_steps
      end
      |> Enum.sort()

    {hd(per_step), Enum.at(per_step, div(length(per_step), 2))}
  end

  # Steps for WARM_UP_MS first: an idle GPU runs at a low clock until a burst of work raises it
  # (the H200 idles at 345 MHz and took ~0.2 s of steps to reach 1980 MHz: the large step's
  # first blocks ran 4.7x slower), and it drops again within about a second of idling, as it
  # does between this script's modes. bench/peers_mnist_step.py warms up the same way.
  # On GPUs the GPU thread builds fused kernels for the chains it sees twice (window fusion,
  # Nx.Vulkan.set_window_fusion/1) on a thread of its own: the warm-up also goes on until none is
  # being built (at most WARM_UP_FUSION_MS), so the timed steps run as a steady state does.
  @warm_up_ms 500
  @warm_up_fusion_ms 30_000
  def warm_up(step_fun) do
    start = System.monotonic_time(:millisecond)

    Stream.repeatedly(fn ->
      {loss, _grads} = step_fun.()
      Nx.to_number(loss)
      System.monotonic_time(:millisecond) - start
    end)
    |> Enum.find(fn elapsed ->
      elapsed >= @warm_up_fusion_ms or
        (elapsed >= @warm_up_ms and Nx.Vulkan.stats().window_building == 0)
    end)
  end

  def resident!(label, tensors) do
    for t <- tensors, not match?(%Nx.Vulkan.Backend{}, t.data) do
      raise "#{label}: a tensor lives on #{inspect(t.data.__struct__)}, not Nx.Vulkan.Backend"
    end
  end

  def commit do
    System.get_env("NXV_COMMIT") ||
      case System.cmd("git", ["rev-parse", "--short", "HEAD"], stderr_to_stdout: true) do
        {sha, 0} -> String.trim(sha)
        _ -> "unknown"
      end
  rescue
    _ -> "unknown"
  end

  def fmt(ms), do: :erlang.float_to_binary(ms, decimals: 3)
end

shape = {opts[:batch] || 32, 784, opts[:hidden] || 128, 10}
{params, x, labels} = MNISTMLP.inputs(shape, Nx.Vulkan.Backend)
jit_step = Nx.Defn.jit(&MNISTMLP.step/3)
compiled_step = Nx.Defn.compile(&MNISTMLP.step/3, [params, x, labels])
# The same step with Nx.Vulkan as the defn compiler: captured once, replayed every call.
nxv_jit_step = Nx.Defn.jit(&MNISTMLP.step/3, compiler: Nx.Vulkan)
nxv_step = Nx.Defn.compile(&MNISTMLP.step/3, [params, x, labels], compiler: Nx.Vulkan)

# Residency and fallback checks, on a warm-up step of each mode.
Nx.Vulkan.Fallback.reset()
{loss, grads} = jit_step.(params, x, labels)
{loss2, grads2} = compiled_step.(params, x, labels)
{loss3, grads3} = nxv_step.(params, x, labels)
{loss4, grads4} = nxv_jit_step.(params, x, labels)
Bench.resident!("inputs", Tuple.to_list(params) ++ [x, labels])
Bench.resident!("gradients", Tuple.to_list(grads) ++ Tuple.to_list(grads2) ++ [loss, loss2])
loss_value = Nx.to_number(loss)

# The compiler's program computes what the Evaluator computes, bit for bit.
for {label, {l, g}} <- [
      {"compiler: Nx.Vulkan (compile)", {loss3, grads3}},
      {"compiler: Nx.Vulkan (jit)", {loss4, grads4}}
    ],
    Nx.to_binary(l) != Nx.to_binary(loss) or
      Enum.map(Tuple.to_list(g), &Nx.to_binary/1) != Enum.map(Tuple.to_list(grads), &Nx.to_binary/1),
    do: raise("#{label}: the step differs from the Evaluator's")

%{programs: programs} = Nx.Vulkan.compiler_census()

if programs == 0,
  do: raise("the compiler built no program for the step: #{inspect(Nx.Vulkan.compiler_census())}")

unless is_float(loss_value) and loss_value == Nx.to_number(loss2),
  do: raise("loss is not finite or differs between modes: #{inspect(loss_value)}")

fallbacks = Nx.Vulkan.Fallback.count()

if fallbacks != %{},
  do: raise("the step fell back to the host: #{inspect(Nx.Vulkan.Fallback.reasons())}")

measure = fn step_fun ->
  Bench.warm_up(step_fun)
  s0 = Nx.Vulkan.stats()
  {best, median} = Bench.time(step_fun, blocks, steps)
  s1 = Nx.Vulkan.stats()
  n = blocks * steps

  %{
    best: best,
    median: median,
    submissions: (s1.submissions - s0.submissions) / n,
    dispatches: (s1.recorded - s0.recorded) / n,
    hits: s1.pipeline_hits - s0.pipeline_hits,
    created: s1.pipelines_created - s0.pipelines_created,
    record_us: (s1.record_ns - s0.record_ns) / n / 1000,
    submit_us: (s1.submit_ns - s0.submit_ns) / n / 1000,
    wait_us: (s1.wait_ns - s0.wait_ns) / n / 1000
  }
end

jit = measure.(fn -> jit_step.(params, x, labels) end)
compiled = measure.(fn -> compiled_step.(params, x, labels) end)
nxv = measure.(fn -> nxv_step.(params, x, labels) end)
nxv_jit = measure.(fn -> nxv_jit_step.(params, x, labels) end)

# The caller's time per call, nothing read back and nothing kept (a kept result would make every
# call allocate afresh; 50 calls queue ~2500 commands, within the pending queue's bound): what a
# step costs the host beside the GPU's work.
caller_us = fn step_fun ->
  Nx.Vulkan.flush()
  {us, _} = :timer.tc(fn -> Enum.each(1..50, fn _ -> step_fun.() end) end)
  Nx.Vulkan.flush()
  us / 50
end

evaluator_caller_us = caller_us.(fn -> compiled_step.(params, x, labels) end)
nxv_caller_us = caller_us.(fn -> nxv_step.(params, x, labels) end)

# GPU time per step with timestamps only around submissions (per-command ones, below, serialise
# the dispatches they sit between).
gpu_per_batch_us = fn step_fun ->
  Bench.warm_up(step_fun)
  Nx.Vulkan.set_gpu_timing(:per_batch)
  g0 = Nx.Vulkan.stats().gpu_ns
  for _ <- 1..20, do: step_fun.() |> elem(0) |> Nx.to_number()
  g1 = Nx.Vulkan.stats().gpu_ns
  Nx.Vulkan.set_gpu_timing(false)
  (g1 - g0) / 20 / 1000
end

evaluator_gpu_us = gpu_per_batch_us.(fn -> compiled_step.(params, x, labels) end)
nxv_gpu_us = gpu_per_batch_us.(fn -> nxv_step.(params, x, labels) end)

# Breakdown pass (not timed above): GPU time per step from timestamp queries.
Bench.warm_up(fn -> compiled_step.(params, x, labels) end)
Nx.Vulkan.set_gpu_timing(true)
Nx.Vulkan.take_kernel_times()
g0 = Nx.Vulkan.stats()
profile_steps = 20

{profile_us, _} =
  :timer.tc(fn ->
    for _ <- 1..profile_steps, do: compiled_step.(params, x, labels) |> elem(0) |> Nx.to_number()
  end)

g1 = Nx.Vulkan.stats()
kernel_times = Nx.Vulkan.take_kernel_times()
Nx.Vulkan.set_gpu_timing(false)
gpu_us = (g1.gpu_ns - g0.gpu_ns) / profile_steps / 1000
profile_wait_us = (g1.wait_ns - g0.wait_ns) / profile_steps / 1000
profile_step_us = profile_us / profile_steps

# The Evaluator's floor: same step, tiny shapes, BinaryBackend.
tiny = {1, 2, 2, 2}
{tp, tx, tl} = MNISTMLP.inputs(tiny, Nx.BinaryBackend)
floor_jit = Nx.Defn.jit(&MNISTMLP.step/3)
floor_compiled = Nx.Defn.compile(&MNISTMLP.step/3, [tp, tx, tl])

{floor_jit_best, floor_jit_median} =
  Nx.with_default_backend(Nx.BinaryBackend, fn ->
    Bench.time(fn -> floor_jit.(tp, tx, tl) end, blocks, steps)
  end)

{floor_c_best, floor_c_median} =
  Nx.with_default_backend(Nx.BinaryBackend, fn ->
    Bench.time(fn -> floor_compiled.(tp, tx, tl) end, blocks, steps)
  end)

binary =
  if with_binary do
    {bp, bx, bl} = MNISTMLP.inputs(shape, Nx.BinaryBackend)
    b_step = Nx.Defn.compile(&MNISTMLP.step/3, [bp, bx, bl])

    Nx.with_default_backend(Nx.BinaryBackend, fn ->
      {bloss, _} = b_step.(bp, bx, bl)
      {best, _} = Bench.time(fn -> b_step.(bp, bx, bl) end, 1, 2)
      %{best: best, loss: Nx.to_number(bloss)}
    end)
  end

info = Nx.Vulkan.Device.info()
cap = Nx.Vulkan.batch_max()

IO.puts("""

MNIST MLP training step (batch #{elem(shape, 0)}, 784-#{elem(shape, 2)}-10, value_and_grad, f32)
  device    #{info.name} (class #{Nx.Vulkan.Device.class()}, #{info.type}), precise_f32 #{Nx.Vulkan.stats().precise_f32}, precise_dot #{Nx.Vulkan.stats().precise_dot}
  commit    #{Bench.commit()}   date #{Date.utc_today()}   NXV_BATCH_MAX #{cap}
  loss      #{:erlang.float_to_binary(loss_value, [:short])}   fallbacks: none
  timing    best and median of #{blocks} blocks x #{steps} steps, loss read back every step

| mode                   | best ms/step | median ms/step | submissions/step | dispatches/step | pipeline hits (created) | GPU-thread record / submit / wait us/step |
|------------------------|--------------|----------------|------------------|-----------------|-------------------------|-------------------------------------------|
| jit, re-traced         | #{Bench.fmt(jit.best)} | #{Bench.fmt(jit.median)} | #{Float.round(jit.submissions, 2)} | #{Float.round(jit.dispatches, 1)} | #{jit.hits} (#{jit.created}) | #{Float.round(jit.record_us, 1)} / #{Float.round(jit.submit_us, 1)} / #{Float.round(jit.wait_us, 1)} |
| compiled once          | #{Bench.fmt(compiled.best)} | #{Bench.fmt(compiled.median)} | #{Float.round(compiled.submissions, 2)} | #{Float.round(compiled.dispatches, 1)} | #{compiled.hits} (#{compiled.created}) | #{Float.round(compiled.record_us, 1)} / #{Float.round(compiled.submit_us, 1)} / #{Float.round(compiled.wait_us, 1)} |
| compiler: Nx.Vulkan, compiled once | #{Bench.fmt(nxv.best)} | #{Bench.fmt(nxv.median)} | #{Float.round(nxv.submissions, 2)} | #{Float.round(nxv.dispatches, 1)} | #{nxv.hits} (#{nxv.created}) | #{Float.round(nxv.record_us, 1)} / #{Float.round(nxv.submit_us, 1)} / #{Float.round(nxv.wait_us, 1)} |
| compiler: Nx.Vulkan, jit every step | #{Bench.fmt(nxv_jit.best)} | #{Bench.fmt(nxv_jit.median)} | #{Float.round(nxv_jit.submissions, 2)} | #{Float.round(nxv_jit.dispatches, 1)} | #{nxv_jit.hits} (#{nxv_jit.created}) | #{Float.round(nxv_jit.record_us, 1)} / #{Float.round(nxv_jit.submit_us, 1)} / #{Float.round(nxv_jit.wait_us, 1)} |
| floor, re-traced (tiny, BinaryBackend) | #{Bench.fmt(floor_jit_best)} | #{Bench.fmt(floor_jit_median)} | | | | |
| floor, compiled (tiny, BinaryBackend)  | #{Bench.fmt(floor_c_best)} | #{Bench.fmt(floor_c_median)} | | | | |
| backend's own cost, re-traced | #{Bench.fmt(jit.best - floor_jit_best)} | | | | | |
| backend's own cost, compiled  | #{Bench.fmt(compiled.best - floor_c_best)} | | | | | |
""")

IO.puts("""
Caller's time per step, nothing read back: Evaluator (compiled once) #{Float.round(evaluator_caller_us, 1)} us, compiler: Nx.Vulkan #{Float.round(nxv_caller_us, 1)} us
GPU time per step (timestamps around submissions only): Evaluator (compiled once) #{Float.round(evaluator_gpu_us, 1)} us, compiler: Nx.Vulkan #{Float.round(nxv_gpu_us, 1)} us

Breakdown of a compiled step (#{profile_steps} steps with GPU timestamps on, #{Float.round(profile_step_us, 1)} us/step):
  GPU busy (first to last command of each submission)   #{Float.round(gpu_us, 1)} us/step
  GPU thread: recording #{Float.round(compiled.record_us, 1)}, build+submit #{Float.round(compiled.submit_us, 1)}, fence wait #{Float.round(profile_wait_us, 1)} us/step
  host (Elixir evaluation + NIF calls), step minus fence wait   #{Float.round(profile_step_us - profile_wait_us, 1)} us/step
  of which the Evaluator's own floor (compiled, tiny shapes)   #{Float.round(floor_c_best * 1000, 1)} us/step
  GPU time by kernel (us/step, commands/step): #{kernel_times |> Enum.sort_by(fn {_, {_, ns}} -> -ns end) |> Enum.take(10) |> Enum.map_join(", ", fn {name, {n, ns}} -> "#{name} #{Float.round(ns / profile_steps / 1000, 1)} (#{Float.round(n / profile_steps, 1)})" end)}
""")

if binary do
  IO.puts(
    "BinaryBackend, compiled once: #{Bench.fmt(binary.best)} ms/step (loss #{binary.loss}); Vulkan is #{Float.round(binary.best / compiled.best, 1)}x faster"
  )
end

IO.puts(
  "RESULT batch=#{elem(shape, 0)} hidden=#{elem(shape, 2)} cap=#{cap} jit_best=#{jit.best} jit_median=#{jit.median} compiled_best=#{compiled.best} compiled_median=#{compiled.median} nxv_best=#{nxv.best} nxv_median=#{nxv.median} nxv_jit_best=#{nxv_jit.best} submissions=#{compiled.submissions} loss=#{loss_value}"
)
