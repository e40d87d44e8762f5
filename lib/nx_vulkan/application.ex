defmodule Nx.Vulkan.Application do
  @moduledoc false
  use Application

  @impl true
  def start(_type, _args) do
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

  # The builder threads save the pipeline cache after each burst of creations; this saves the
  # last ones (a VM that stops right after a first use).
  @impl true
  def prep_stop(state) do
    Nx.Vulkan.Native.save_pipeline_cache()
    state
  end
end
