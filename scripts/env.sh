# Sourced by the project's scripts: the toolchain that scripts/setup.sh installs.
NXV_HOME=${NXV_HOME:-$HOME/.nx_vulkan}
export PATH="$NXV_HOME/elixir-1.18.3/bin:$HOME/.cargo/bin:$PATH"
