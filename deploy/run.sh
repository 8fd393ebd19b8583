#!/usr/bin/env bash
# Main job: installs everything, then compiles the example kernel with dtc and runs it against
# its PyTorch reference (on the GPU when there is one, else under the Triton interpreter).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/deploy/setup.sh"
cd "$ROOT"
mkdir -p out
./build/compiler/dtc examples/geglu.dt -o out/geglu.py
echo "dtc: examples/geglu.dt -> out/geglu.py"
.venv/bin/python examples/run_example.py out/geglu.py --sizes x=64,y=1000
