#!/usr/bin/env bash
# Installs everything nx_vulkan needs on a fresh Debian 12 (bookworm) x86-64 machine, from Debian's
# packages only (Rust comes with the machine, crates from crates.io at build time):
#   - Erlang/OTP 25 (bookworm), Elixir 1.18.3 built from the upstream tarball Debian trixie serves
#     as a source package (bookworm's Elixir 1.14 is too old for Nx 0.13),
#   - Vulkan: the loader and Mesa's lavapipe (software device) for machines without a GPU,
#   - shaderc/glslang/SPIRV-Tools static libraries for vulkano-shaders' build-time GLSL compiler.
# Idempotent: every step checks first, so a second run takes a second or two.
# Prints nothing but progress lines; exits non-zero on the first failure.
set -euo pipefail

NXV_HOME=${NXV_HOME:-$HOME/.nx_vulkan}
ELIXIR_VERSION=1.18.3
ELIXIR_DIR=$NXV_HOME/elixir-$ELIXIR_VERSION
APT_PACKAGES=(erlang-nox erlang-dev erlang-src mesa-vulkan-drivers libvulkan1 vulkan-tools
              libshaderc-dev glslang-dev spirv-tools xz-utils ca-certificates)

log() { echo "[setup] $*"; }

# Rust comes with machines of this kind (rustup); it cannot be installed from Debian's packages
# at the version the crates need, so say so clearly if it is missing.
export PATH="$HOME/.cargo/bin:$PATH"
command -v cargo >/dev/null || { echo "[setup] cargo not found: install Rust (rustup) first" >&2; exit 1; }
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -x "$ELIXIR_DIR/bin/elixir" ]; then
  log "building Elixir $ELIXIR_VERSION from Debian trixie's source tarball"
  work=$(mktemp -d)
  mkdir -p "$work/lists/partial" "$work/src"
  echo "deb-src http://deb.debian.org/debian trixie main" > "$work/trixie-src.list"
  apt_opts=(-o "Dir::Etc::SourceList=$work/trixie-src.list" -o "Dir::Etc::SourceParts=/dev/null"
            -o "Dir::State::Lists=$work/lists")
  apt-get "${apt_opts[@]}" update -qq
  (cd "$work/src" && apt-get "${apt_opts[@]}" source --tar-only --download-only "elixir-lang=$ELIXIR_VERSION.dfsg-*" >/dev/null 2>&1 \
     || apt-get "${apt_opts[@]}" source --tar-only --download-only elixir-lang >/dev/null)
  tarball=$(ls "$work"/src/elixir-lang_"$ELIXIR_VERSION"*.orig.tar.* | head -1)
  mkdir -p "$work/build"
  tar -xf "$tarball" -C "$work/build"
  srcdir=$(find "$work/build" -mindepth 1 -maxdepth 1 -type d | head -1)
  make -C "$srcdir" compile >/dev/null
  rm -rf "$ELIXIR_DIR"; mkdir -p "$NXV_HOME"
  mv "$srcdir" "$ELIXIR_DIR"
  rm -rf "$work"
fi
export PATH="$ELIXIR_DIR/bin:$PATH"
elixir -e 'IO.puts("[setup] Elixir #{System.version()} on OTP #{System.otp_release()}")'

# Local Hex/rebar are not needed (nor reachable): deps come from Hex when it is reachable, else
# from the offline deps folder (see mix.exs).
deps=${NX_VULKAN_DEPS_DIR:-$NXV_HOME/deps}
if [ ! -d "$deps/nx" ]; then
  log "note: no offline deps folder at $deps (fine when Hex is reachable)"
fi
