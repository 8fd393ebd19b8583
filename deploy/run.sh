#!/usr/bin/env bash
# The main job: installs and builds what is missing, then runs dtxd, the dtx daemon, on an
# embedded SQLite database under data/ on localhost. A first start queues the example
# exploration (GeGLU from templates/; small shapes on the Triton interpreter when there is no
# GPU). Ctrl-C stops it cleanly; running explorations resume on the next start.
#   deploy/run.sh [dtxd options, e.g. --port 8080 --config deploy/dtxd.yaml]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/deploy/setup.sh"
cd "$ROOT"
exec ./build/server/dtxd --config deploy/dtxd.yaml "$@"
