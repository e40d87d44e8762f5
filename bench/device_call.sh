#!/usr/bin/env bash
# One lent-GPU call's standard runs, for bench/h200_run.sh (which unpacks the bundle and sets the
# environment):
#
#   NXV_COMMIT=<sha> bash bench/h200_run.sh bash bench/device_call.sh [section...]
#
# Sections, in the order given (default: mnist host kernels suite):
#   mnist    the seed's MNIST step at the default cap, at cap 16, with count-based submission off
#            and again at the default, then PyTorch/JAX; the large step and its peers
#   mnist_short  the seed's step at the default cap and at cap 16, then PyTorch/JAX
#   mnist_large  the large step and its peers
#            (`host mnist_short kernels slice mnist_large` after the warm-up: ~125 s on an H100,
#            2026-12-06, for a session with little device time left)
#   host     bench/host_overhead.exs (both steady passes)
#   record   where the GPU thread's recording goes: bench/record_probe (the driver alone, call by
#            call; build it here first and carry bench/record_probe/target/release/record_probe),
#            then bench/host_overhead.exs with NXV_PROFILE_RECORDING=1 (opening command buffers
#            and the driver's share of the NIF's recording), and again with NXV_REORDER=0
#   slice    bench/dynamic_slice_loop.exs and its peers
#   kernels  bench/kernels.exs and PyTorch's table, joined (bench/kernels_table.py)
#   suite    bench/gpu_suite.exs (the device-independent suites; > 240 s on the H200)
# A warm-up VM runs the kernel bench first (a cold driver cache slows a VM's kernels for its
# whole life: README, Kernels beside PyTorch; NXV_WARMUP=0 skips it). What a lent machine sends back is limited (its
# last 12,000 characters of output, 8 files), so the console gets the summary lines and $OUT
# gets one file per section with everything.
set -uo pipefail
cd "$(dirname "$0")/.."
o=${OUT:-/tmp/nxv_out}
mkdir -p "$o"
t0=$(date +%s)
el() { echo "== $* (t=$(($(date +%s) - t0))s)"; }

mnist_row() { # name args -- env...
  local name=$1 args=$2
  shift 2
  el "mnist $name"
  env "$@" timeout 90 elixir examples/mnist_mlp_step_bench.exs $args > "$o/m.txt" 2>&1
  { echo "### $name"; cat "$o/m.txt"; } >> "$o/mnist.txt"
  grep -E "^\| (compiled once|jit, re-traced|compiler: Nx.Vulkan, compiled|floor, compiled)" "$o/m.txt" | cut -d'|' -f1-5
}

peers() { # args
  el "peers mnist $*"
  timeout 90 python3 bench/peers_mnist_step.py "$@" > "$o/p.txt" 2>&1
  tail -3 "$o/p.txt"
  cat "$o/p.txt" >> "$o/mnist.txt"
}

seed_rows() { # the seed's step at the default cap and at cap 16
  mnist_row default "" NXV_X=1
  mnist_row cap16 "" NXV_BATCH_MAX=16
}

large_step() { # batch 512, hidden 2048, and its peers
  mnist_row large "--batch 512 --hidden 2048" NXV_X=1
  peers --batch 512 --hidden 2048
}

if [ "${NXV_WARMUP:-1}" != 0 ]; then
  el warmup
  timeout 150 elixir bench/kernels.exs > /dev/null 2>&1
fi

for section in "${@:-mnist host kernels suite}"; do
  for s in $section; do
    case $s in
      mnist)
        seed_rows
        mnist_row submit_commands_off "" NXV_SUBMIT_COMMANDS=0
        mnist_row default_again "" NXV_X=1
        peers
        large_step
        ;;
      mnist_short)
        seed_rows
        peers
        ;;
      mnist_large)
        large_step
        ;;
      host)
        el host_overhead
        timeout 90 elixir bench/host_overhead.exs > "$o/host.txt" 2>&1
        grep -A9 "^steady state" "$o/host.txt"
        ;;
      record)
        el record
        probe=bench/record_probe/target/release/record_probe
        if [ -x "$probe" ]; then "$probe" 2000 | tee "$o/record.txt"; else echo "no $probe: build it and carry it"; fi
        for env in NXV_PROFILE_RECORDING=1 "NXV_PROFILE_RECORDING=1 NXV_REORDER=0"; do
          echo "### $env" | tee -a "$o/record.txt"
          env $env timeout 90 elixir bench/host_overhead.exs 2>&1 | tee -a "$o/record.txt" | grep -A9 "^steady state"
        done
        ;;
      slice)
        el dynamic_slice
        timeout 120 elixir bench/dynamic_slice_loop.exs > "$o/slice.txt" 2>&1
        timeout 60 python3 bench/peers_dynamic_slice_loop.py >> "$o/slice.txt" 2>&1
        grep "^|" "$o/slice.txt"
        ;;
      kernels)
        el kernels
        timeout 200 elixir bench/kernels.exs > "$o/kernels.txt" 2>&1
        timeout 150 python3 bench/peers_kernels.py > "$o/peers_kernels.txt" 2>&1
        python3 bench/kernels_table.py "$o/kernels.txt" "$o/peers_kernels.txt" > "$o/table.txt" 2>&1
        cat "$o/table.txt"
        cat "$o/peers_kernels.txt" >> "$o/kernels.txt"
        rm -f "$o/peers_kernels.txt"
        ;;
      suite)
        el gpu_suite
        timeout 400 elixir bench/gpu_suite.exs > "$o/suite.txt" 2>&1
        echo "suite rc=$?"
        grep -E "tests?, .* failures?" "$o/suite.txt"
        ;;
      *)
        echo "unknown section: $s" >&2
        ;;
    esac
  done
done
rm -f "$o/m.txt" "$o/p.txt"
el done
