#!/usr/bin/env bash
# All tests: installs everything, then runs the C++ unit tests (ctest) and the Python and
# end-to-end tests (pytest, generated kernels under the Triton interpreter).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/deploy/setup.sh"
cd "$ROOT"
ctest --test-dir build --output-on-failure -j "$(nproc)"
TRITON_INTERPRET=1 .venv/bin/python -m pytest -q tests "$@"
