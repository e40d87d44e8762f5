# Host cost per op, without the GPU: records 5000 small ops (no submission: the cap is raised and
# early submission is off),
# then flushes once (and, last, the steady state again at the starting cap, submitting as it goes). Prints us per op for Nx's front end alone (a backend that does nothing), for
# whole backend calls and for the bare NIFs: first with
# every result kept alive (each op allocates a fresh buffer), then in a steady state where each
# result is dropped at once (buffers come back through the pool, as in a training loop).
#
#   mix run bench/host_overhead.exs     (or: elixir bench/host_overhead.exs with ERL_LIBS set)
import Bitwise
{:ok, _} = Application.ensure_all_started(:nx_vulkan)
Nx.global_default_backend(Nx.Vulkan.Backend)
start_cap = Nx.Vulkan.batch_max()
Nx.Vulkan.set_batch_max(100_000)
# Early submission off as well (on GPUs it sends command buffers of a few commands while the GPU
# has room: Nx.Vulkan.set_submit_commands/1 and the two beside it), so the first passes record
# one submission per flush (command buffers of 512: queue.rs SEGMENT_COMMANDS) and show what a
# command itself costs to record; the last pass restores it and shows what the command buffers
# cost beside it.
%{submit_bytes: start_bytes, submit_commands: start_commands, submit_idle: start_idle} =
  Nx.Vulkan.stats()

Enum.each(
  [&Nx.Vulkan.set_submit_bytes/1, &Nx.Vulkan.set_submit_commands/1, &Nx.Vulkan.set_submit_idle/1],
  & &1.(0)
)

# The pending queue's bound (4096 commands by default) would make the caller wait for the device
# inside the timed loop: this measures the host alone.
Nx.Vulkan.set_pending_limits(commands: 1_000_000, bytes: 1 <<< 40)
a = Nx.iota({4}, type: :f32)
b = Nx.iota({4}, type: :f32)
Nx.Vulkan.flush()
ref = a.data.ref
n = 5000

run = fn name, f ->
  f.()
  Nx.Vulkan.flush()
  {us, _} = :timer.tc(fn -> for _ <- 1..n, do: f.() end)
  {flush_us, _} = :timer.tc(fn -> Nx.Vulkan.flush() end)

  IO.puts(
    String.pad_trailing(name, 22) <>
      "#{Float.round(us / n, 2)} us/op on the caller, then #{Float.round(flush_us / n, 2)} us/op to finish at the flush"
  )
end

# Nx's own front end (type and shape inference, broadcasting) with a backend that does nothing:
# the floor under any backend's eager op, beside which the rows above are ours.
defmodule HostOverhead.NullBackend do
  defstruct []
  def add(out, _a, _b), do: out
  def exp(out, _a), do: out
end

null = %{
  Nx.iota({4}, type: :f32, backend: Nx.BinaryBackend)
  | data: struct(HostOverhead.NullBackend)
}

ops = [
  {"Nx.add (no backend)", fn -> Nx.add(null, null) end},
  {"Nx.exp (no backend)", fn -> Nx.exp(null) end},
  {"Nx.add (backend)", fn -> Nx.add(a, b) end},
  # The backend's callback without Nx's front end: what our Elixir side adds to the NIF.
  {"Backend.add", fn -> Nx.Vulkan.Backend.add(a, a, b) end},
  {"Nx.exp (backend)", fn -> Nx.exp(a) end},
  {"binary_op NIF", fn -> Nx.Vulkan.Native.binary_op(:add, {:f, 32}, ref, [4], ref, [4], [4]) end},
  {"unary_op NIF", fn -> Nx.Vulkan.Native.unary_op(:exp, {:f, 32}, ref, 4) end}
]

IO.puts("device #{Nx.Vulkan.Device.info().name}")
for {name, f} <- ops, do: run.(name, f)
run.("alloc_buffer NIF", fn -> Nx.Vulkan.Native.alloc_buffer(16, 0) end)
s = Nx.Vulkan.stats()

IO.puts(
  "GPU-thread recording: #{Float.round(s.record_ns / max(s.recorded, 1) / 1000, 2)} us/command"
)

# Steady state: results dropped, so the garbage collector returns their buffers to the pool.
defmodule HostOverhead.Loop do
  def run(0, _f), do: :ok

  def run(n, f) do
    f.()
    run(n - 1, f)
  end
end

steady = fn name, f ->
  HostOverhead.Loop.run(n, f)
  Nx.Vulkan.flush()

  us =
    Enum.min(
      for _ <- 1..5 do
        {us, _} = :timer.tc(fn -> HostOverhead.Loop.run(n, f) end)
        Nx.Vulkan.flush()
        us
      end
    )

  IO.puts(
    String.pad_trailing(name, 22) <>
      "#{Float.round(us / n, 2)} us/op on the caller (best of 5, results dropped)"
  )
end

# Per command: all of the GPU thread's recording, of it the opening of command buffers, and
# (with NXV_PROFILE_RECORDING=1, else 0) the driver's calls for dispatches and barriers.
recording = fn s0, s1 ->
  per = fn key -> Float.round((s1[key] - s0[key]) / max(s1.recorded - s0.recorded, 1) / 1000, 2) end

  "#{per.(:record_ns)} us/command (opening command buffers #{per.(:record_begin_ns)}, " <>
    "the driver's dispatch calls #{per.(:record_driver_ns)}; " <>
    "#{round((s1.recorded - s0.recorded) / max(s1.submissions - s0.submissions, 1))} commands a submission)"
end

IO.puts("steady state:")
s0 = Nx.Vulkan.stats()
for {name, f} <- ops, do: steady.(name, f)
IO.puts("GPU-thread recording: #{recording.(s0, Nx.Vulkan.stats())}")

# The same at the cap the application started with (64 unless NXV_BATCH_MAX says otherwise),
# submissions going out as the ops come (the cap, NXV_SUBMIT_COMMANDS): what a training loop
# sees, with the GPU thread recording small batches beside the caller rather than one batch of
# thousands of commands.
Nx.Vulkan.set_batch_max(start_cap)
Nx.Vulkan.set_submit_bytes(start_bytes)
Nx.Vulkan.set_submit_commands(start_commands)
Nx.Vulkan.set_submit_idle(start_idle)

IO.puts(
  "steady state at cap #{start_cap}, submitting as it goes (early submission: " <>
    "#{start_commands} commands, #{start_idle} while the GPU is idle, #{start_bytes} bytes; 0: off):"
)

s0 = Nx.Vulkan.stats()
for {name, f} <- ops, do: steady.(name, f)
IO.puts("GPU-thread recording: #{recording.(s0, Nx.Vulkan.stats())}")
