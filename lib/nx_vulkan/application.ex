defmodule Nx.Vulkan.Application do
  @moduledoc false
  use Application

  @impl true
  def start(_type, _args) do
    # Before anything opens the Vulkan instance: lavapipe reads it when it creates its device.
    lavapipe_threads_default()
    Nx.Vulkan.Fallback.create_table()
    Nx.Vulkan.Fallback.check_config!()
    Nx.Vulkan.ConstantCache.create_table()
    Nx.Vulkan.Compiler.create_tables()
    Nx.Vulkan.Native.set_batch_max(Nx.Vulkan.batch_max_from_env!()) |> Nx.Vulkan.Native.unwrap!()
    # Opens the device now, so a missing Vulkan loader or device stops the application with
    # Nx.Vulkan.Error's message rather than failing on the first op.
    Nx.Vulkan.Device.configure!()
    Supervisor.start_link([Nx.Vulkan.Telemetry], strategy: :one_for_one, name: Nx.Vulkan.Supervisor)
  end

  @doc false
  # Lavapipe runs each dispatch on a pool of LP_NUM_THREADS worker threads (one per core by
  # default) and waits for them: a hand-off that cost ~40 us a dispatch on a 2-core machine of
  # this project's CI kind, where a small kernel's work takes a few. With LP_NUM_THREADS=0 it
  # runs each dispatch on its own queue thread: measured there (c4747dd), 300 iterations of
  # bench/dynamic_slice_loop.exs (~12 tiny dispatches each) 640-927 -> 131-142 us an iteration
  # eagerly, the MNIST step within its run-to-run spread (compiled 5.5-8.4 / 7.1-7.4 ms,
  # Evaluator 11.2-11.8 / 8.2-12.2), large kernels up to 1.8x slower (exp of 4 M f32 1.23 ->
  # 2.15-2.28 s, 512^3 dot 68-75 -> 95-124 ms). So on hosts with at most two logical CPUs,
  # where a second worker gains at most 2x on large kernels, the pool goes unless the user set
  # LP_NUM_THREADS; other drivers never read it.
  def lavapipe_threads(cpus, user_setting) do
    cond do
      user_setting not in [nil, ""] -> {:user, user_setting}
      is_integer(cpus) and cpus <= 2 -> {:set, "0"}
      true -> :driver_default
    end
  end

  defp lavapipe_threads_default do
    cpus =
      case :erlang.system_info(:logical_processors_available) do
        n when is_integer(n) -> n
        _ -> :erlang.system_info(:logical_processors)
      end

    decision = lavapipe_threads(cpus, System.get_env("LP_NUM_THREADS"))
    # Into libc's environment, where the driver reads it (os:putenv does not write there).
    with {:set, value} <- decision,
         do: Nx.Vulkan.Native.set_lavapipe_threads(value) |> Nx.Vulkan.Native.unwrap!()

    :persistent_term.put({__MODULE__, :lavapipe_threads}, decision)
  end

  # The builder threads save the pipeline cache after each burst of creations; this saves the
  # last ones (a VM that stops right after a first use).
  @impl true
  def prep_stop(state) do
    Nx.Vulkan.Native.save_pipeline_cache()
    state
  end
end
