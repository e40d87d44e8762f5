#!/usr/bin/env bash
# README's main job: installs what is missing (scripts/setup.sh), builds, and runs the MNIST MLP
# training-step benchmark. Arguments go to the example (e.g. --binary to add the BinaryBackend).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh
export MIX_ENV=${MIX_ENV:-prod}
mix deps.get >/dev/null
mix compile
mix run examples/mnist_mlp_step_bench.exs "$@"
