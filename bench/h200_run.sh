#!/usr/bin/env bash
# Runs the benchmarks on a lent machine that has a GPU but no Erlang, Elixir or Vulkan loader
# (the H200 host), from what bench/make_bundle.sh packed into .dev/ and the libvulkan1 .deb in
# .gl/. Writes the outputs to $OUT (or /tmp/nxv_out).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/nxv_out}
mkdir -p "$out"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
mkdir -p /opt/nxv && tar -xJf .dev/nxv_bundle.tar.xz -C /opt/nxv
# erl finds its root at the path it was built for.
[ -e /usr/lib/erlang ] || cp -a /opt/nxv/erlang /usr/lib/erlang
export PATH=/opt/nxv/elixir/bin:/usr/lib/erlang/bin:$PATH ERL_LIBS=/opt/nxv/apps
export NXV_COMMIT=${NXV_COMMIT:-unknown}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
nproc | tee -a "$out/gpu.txt"
# On a fresh host the first VM runs some kernels up to 2.6x slower for its whole life (the
# NVIDIA driver's shader cache, ~/.cache/nvidia, is cold; README, Kernels beside PyTorch):
# NXV_WARMUP=1 first runs the kernel table once and drops its output.
# The driver's cache goes to a directory of our own, so a warm-up VM fills it whatever HOME is
# on the host (a cache it cannot write leaves every VM cold); its size is printed at the end.
export __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=${__GL_SHADER_DISK_CACHE_PATH:-/tmp/nxv_nvidia_cache}
mkdir -p "$__GL_SHADER_DISK_CACHE_PATH"
if [ "${NXV_WARMUP:-0}" = 1 ]; then elixir bench/kernels.exs > /dev/null 2>&1; fi
"${@:-true}"
status=$?
echo "driver shader cache: $(du -sh "$__GL_SHADER_DISK_CACHE_PATH" 2>/dev/null | cut -f1) in $__GL_SHADER_DISK_CACHE_PATH; HOME=${HOME:-unset}"
exit $status
