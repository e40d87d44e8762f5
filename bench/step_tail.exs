# Where the MNIST step's time goes under Nx.Defn.Evaluator once the caller is done: each of 200
# compiled steps (after 300 warm-up steps and any window fusion builds) is timed in two parts, the call (ops queued, nothing
# read) and the loss read (the flush: the commands not yet recorded, the GPU's remaining work,
# the reply), with the submissions by reason and the flushes from the [:nx_vulkan, :submit] and
# [:nx_vulkan, :flush] telemetry events. Prints medians; the settings it ran under first.
#
#   mix run bench/step_tail.exs     (or: elixir bench/step_tail.exs with ERL_LIBS set)
#
# NXV_RECORD_AHEAD, NXV_SUBMIT_IDLE, NXV_SUBMIT_COMMANDS and the like change what it measures.
{:ok, _} = Application.ensure_all_started(:nx_vulkan)
Nx.global_default_backend(Nx.Vulkan.Backend)
Code.require_file("../examples/mnist_mlp.exs", __DIR__)

defmodule StepTail do
  def median(list), do: list |> Enum.sort() |> Enum.at(div(length(list), 2))

  # Telemetry handlers as module functions (a local function handler costs a warning and time).
  def handle(event, measurements, metadata, table) do
    :ets.insert(table, {event, metadata.reason, measurements.commands, measurements.duration_us})
  end
end

{params, x, labels} = MNISTMLP.inputs({32, 784, 128, 10}, Nx.Vulkan.Backend)
step = Nx.Defn.compile(&MNISTMLP.step/3, [params, x, labels])
for _ <- 1..300, do: step.(params, x, labels) |> elem(0) |> Nx.to_number()

# And on while the GPU thread's window fusion builds kernels (GPUs; at most 30 s more).
deadline = System.monotonic_time(:millisecond) + 30_000

Stream.repeatedly(fn -> step.(params, x, labels) |> elem(0) |> Nx.to_number() end)
|> Enum.find(fn _ ->
  Nx.Vulkan.stats().window_building == 0 or System.monotonic_time(:millisecond) > deadline
end)

table = :ets.new(:step_tail, [:public, :duplicate_bag])
events = [[:nx_vulkan, :submit], [:nx_vulkan, :flush]]
:telemetry.attach_many("step_tail", events, &StepTail.handle/4, table)
n = 200
before = Nx.Vulkan.stats()

parts =
  for _ <- 1..n do
    t0 = System.monotonic_time(:nanosecond)
    {loss, _grads} = step.(params, x, labels)
    t1 = System.monotonic_time(:nanosecond)
    Nx.to_number(loss)
    t2 = System.monotonic_time(:nanosecond)
    {(t1 - t0) / 1000, (t2 - t1) / 1000}
  end

# The events of the last flush arrive after its reply.
Process.sleep(200)
:telemetry.detach("step_tail")
after_ = Nx.Vulkan.stats()
{calls, reads} = Enum.unzip(parts)
steps = Enum.zip_with(calls, reads, &+/2)
per_step = fn key -> Float.round((after_[key] - before[key]) / n, 2) end

IO.puts("""
device #{Nx.Vulkan.Device.info().name}, NXV_RECORD_AHEAD #{System.get_env("NXV_RECORD_AHEAD", "8")}, \
submit idle #{after_.submit_idle}, commands #{after_.submit_commands}, cap #{after_.batch_max}
call (ops queued) median #{Float.round(StepTail.median(calls), 1)} us, read median \
#{Float.round(StepTail.median(reads), 1)} us, step median #{Float.round(StepTail.median(steps), 1)} \
(min #{Float.round(Enum.min(steps), 1)})
per step: submissions #{per_step.(:submissions)}, barriers #{per_step.(:barriers)}, \
dispatches #{per_step.(:recorded)} (window fusion #{after_.window_fusion}: #{per_step.(:window_replaced)} \
ops in #{per_step.(:window_kernels)} fused kernels; kernels built during the timed steps \
#{after_.window_templates + after_.window_unfusable - before.window_templates - before.window_unfusable}, \
still building #{after_.window_building}), \
GPU-thread recording #{Float.round((after_.record_ns - before.record_ns) / n / 1000, 1)} us\
""")

events = :ets.tab2list(table)

for {event, reason} <- events |> Enum.map(&{elem(&1, 0), elem(&1, 1)}) |> Enum.uniq() do
  {commands, us} = Enum.unzip(for {^event, ^reason, c, us} <- events, do: {c, us})

  IO.puts(
    "  #{Enum.join(event, ".")} #{reason}: #{Float.round(length(us) / n, 2)} a step, " <>
      "#{Float.round(Enum.sum(commands) / length(commands), 1)} commands each, median #{StepTail.median(us)} us"
  )
end
