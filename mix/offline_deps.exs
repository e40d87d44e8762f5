defmodule NxVulkan.OfflineDeps do
  @moduledoc false
  # Where dependencies come from, decided once when mix.exs loads:
  #
  #   1. NX_VULKAN_DEPS_DIR set                -> that folder (one checkout per app: nx, complex,
  #                                               telemetry), even if Hex is installed;
  #   2. Hex installed                         -> Hex, exactly as any Mix project;
  #   3. $HOME/.nx_vulkan/deps holds the apps  -> that folder;
  #   4. none of these                         -> stop with one message saying what to provide.
  #
  # In folder mode this module is registered as a Mix SCM that resolves any Hex-style requirement
  # ({:nx, "~> 0.13"}, also inside Nx's own mix.exs) to <folder>/<app>, like a path dependency.
  @behaviour Mix.SCM
  @apps ~w(nx complex telemetry)

  def mode do
    explicit = System.get_env("NX_VULKAN_DEPS_DIR")
    default = Path.join([System.user_home!(), ".nx_vulkan", "deps"])

    cond do
      explicit not in [nil, ""] -> {:folder, Path.expand(explicit)}
      hex_installed?() -> :hex
      Enum.all?(@apps, &File.dir?(Path.join(default, &1))) -> {:folder, default}
      true -> {:missing, default}
    end
  end

  def setup!(mode) do
    case mode do
      :hex ->
        :ok

      {:folder, dir} ->
        missing = Enum.reject(@apps, &File.exists?(Path.join([dir, &1, "mix.exs"])))

        if missing != [] do
          Mix.raise(
            "nx_vulkan: the offline deps folder #{dir} lacks #{Enum.join(missing, ", ")} " <>
              "(each must be a source checkout with a mix.exs; see README, 'Dependencies')"
          )
        end

        Process.put(__MODULE__, dir)
        :persistent_term.put(__MODULE__, dir)

        unless __MODULE__ in Mix.SCM.available() do
          Mix.SCM.append(__MODULE__)
        end

        :ok

      {:missing, default} ->
        Mix.raise("""
        nx_vulkan: cannot resolve dependencies: Hex is not installed and no offline deps folder \
        was found at #{default}.
        Either install Hex (mix local.hex) where hex.pm is reachable, or provide a folder with \
        source checkouts named nx (the nx/ app of elixir-nx/nx, v0.13.x), complex and telemetry, \
        at #{default} or at the path in NX_VULKAN_DEPS_DIR.\
        """)
    end
  end

  defp hex_installed? do
    Code.ensure_loaded?(Hex) or
      Path.wildcard(Path.join(Mix.path_for(:archives), "hex-*")) != []
  end

  defp folder, do: :persistent_term.get(__MODULE__)

  @impl true
  def fetchable?, do: false

  @impl true
  def format(opts), do: "offline #{opts[:dest]}"

  @impl true
  def format_lock(_opts), do: nil

  @impl true
  def accepts_options(app, opts) do
    cond do
      opts[:path] || opts[:git] || opts[:github] || opts[:in_umbrella] ->
        nil

      true ->
        # Also deps the folder lacks (Nx's docs-only ex_doc, say): Mix then reports them as
        # missing only in the environments that actually need them.
        Keyword.put(opts, :dest, Path.join(folder(), to_string(app)))
    end
  end

  @impl true
  def checked_out?(opts), do: File.dir?(opts[:dest])

  @impl true
  def lock_status(_opts), do: :ok

  @impl true
  def equal?(opts1, opts2), do: opts1[:dest] == opts2[:dest]

  @impl true
  def managers(_opts), do: []

  @impl true
  def checkout(opts),
    do: Mix.raise("nx_vulkan: #{opts[:dest]} is missing from the offline deps folder")

  @impl true
  def update(opts), do: checkout(opts)
end
