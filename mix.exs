Code.require_file("mix/offline_deps.exs", __DIR__)
Code.require_file("mix/tasks/compile.nx_vulkan_native.ex", __DIR__)

defmodule NxVulkan.MixProject do
  use Mix.Project

  @deps_mode NxVulkan.OfflineDeps.mode()
  NxVulkan.OfflineDeps.setup!(@deps_mode)

  def project do
    [
      app: :nx_vulkan,
      version: "0.1.0",
      elixir: "~> 1.17",
      start_permanent: Mix.env() == :prod,
      compilers: [:nx_vulkan_native] ++ Mix.compilers(),
      elixirc_paths: elixirc_paths(Mix.env()),
      deps: deps()
    ]
  end

  def application do
    [extra_applications: [:logger], mod: {Nx.Vulkan.Application, []}]
  end

  defp elixirc_paths(:test), do: ["lib", "test/support"]
  defp elixirc_paths(_), do: ["lib"]

  defp deps do
    # telemetry: Nx depends on it too; nx_vulkan emits its own events (Nx.Vulkan moduledoc).
    [{:nx, "~> 0.13"}, {:telemetry, "~> 0.4.0 or ~> 1.0"}] ++ offline_overrides(@deps_mode)
  end

  # Nx 0.13.1 asks for complex ~> 0.7; the offline checkout may be 0.6, which Nx runs with (only
  # pinv on complex input notices). Mix still checks the requirement, hence the override.
  defp offline_overrides({:folder, _}), do: [{:complex, ">= 0.6.0", override: true}]
  defp offline_overrides(_), do: []
end
