defmodule Mix.Tasks.Compile.NxVulkanNative do
  @moduledoc false
  # Builds the Rust crate in native/nx_vulkan (release mode) and installs the NIF as
  # priv/native/libnx_vulkan.so. Runs cargo only when a Rust, shader or Cargo file is newer than
  # the installed library; cargo itself then rebuilds only what changed.
  use Mix.Task.Compiler

  @crate "native/nx_vulkan"
  @target "priv/native/libnx_vulkan.so"

  @impl true
  def run(_args) do
    sources =
      Path.wildcard(Path.join(@crate, "{src,shaders}/**/*.{rs,comp,glsl}")) ++
        Enum.map(["Cargo.toml", "Cargo.lock", ".cargo/config.toml"], &Path.join(@crate, &1))

    if Mix.Utils.stale?(Enum.filter(sources, &File.exists?/1), [@target]) do
      build!()
      Mix.Project.build_structure()
      {:ok, []}
    else
      Mix.Project.build_structure()
      {:noop, []}
    end
  end

  defp build! do
    Mix.shell().info("Compiling nx_vulkan NIF (cargo build --release)")
    # cargo reads .cargo/config.toml (the shaderc link override) from its working directory.
    {_, status} =
      System.cmd("cargo", ["build", "--release", "--quiet"],
        cd: @crate,
        into: IO.stream(:stdio, :line),
        stderr_to_stdout: true
      )

    if status != 0, do: Mix.raise("cargo build failed (exit #{status}); see the output above")
    File.mkdir_p!(Path.dirname(@target))
    built = Path.join([@crate, "target", "release", "libnx_vulkan.so"])
    # Copy through a temporary name so a running BEAM that has the old file mapped is unaffected.
    tmp = @target <> ".tmp"
    File.cp!(built, tmp)
    File.rename!(tmp, @target)
  end

  @impl true
  def clean do
    File.rm_rf!("priv/native")
    :ok
  end
end
