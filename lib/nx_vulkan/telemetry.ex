defmodule Nx.Vulkan.Telemetry do
  @moduledoc false
  # Executes the :telemetry events the crate's own threads report (events.rs): the GPU thread's
  # submissions and flushes and the builder threads' pipeline creations happen outside any
  # Elixir process, so they arrive here as messages. The events themselves are documented in
  # the Nx.Vulkan moduledoc. Fallbacks and out-of-memory errors are executed where they happen,
  # in the calling process.
  use GenServer

  def start_link(_), do: GenServer.start_link(__MODULE__, nil, name: __MODULE__)

  @impl true
  def init(nil) do
    Nx.Vulkan.Native.set_event_sink(self())
    {:ok, nil}
  end

  @impl true
  def handle_info({:nx_vulkan_event, kind, reason, commands, us}, state)
      when kind in [:submit, :flush] do
    :telemetry.execute([:nx_vulkan, kind], %{commands: commands, duration_us: us}, %{reason: reason})

    {:noreply, state}
  end

  def handle_info({:nx_vulkan_event, :pipeline, kernel, op, us}, state) do
    :telemetry.execute([:nx_vulkan, :pipeline, :create], %{duration_us: us}, %{
      kernel: kernel,
      op: op
    })

    {:noreply, state}
  end

  @impl true
  def terminate(_reason, _state), do: Nx.Vulkan.Native.set_event_sink(nil)
end
