#!/usr/bin/env bash
# Load benchmark of dtxd (not a test): GET /v1/best under 64 concurrent keep-alive clients for
# 10 s on loopback, with wrk (Debian's wrk). Needs a database with a finished exploration; by
# default it makes one: a tiny exhaustive GeGLU exploration on the interpreter.
#   tests/bench/best_load.sh [DB]   prints wrk's latency distribution and requests per second
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WORK="$(mktemp -d)"
trap 'kill "${PID:-0}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
DB="${1:-$WORK/bench.db}"
if [[ -z "${1:-}" ]]; then
  "$ROOT/build/explorer/dtx" explore "$ROOT/templates/geglu.yaml" --shape x=3,y=1000 \
      --strategy random --budget 4 --top 1 --rounds 1 --screen-rep 2 --full-rep 2 \
      --db "$DB" >/dev/null 2>&1
fi
"$ROOT/build/server/dtxd" --port 0 --db "$DB" --data-dir "$WORK" --no-example \
    --log-level warn >"$WORK/out" 2>"$WORK/err" &
PID=$!
for _ in $(seq 100); do grep -q http "$WORK/out" 2>/dev/null && break; sleep 0.1; done
URL="$(sed -n 's/^dtxd: \(http[^ ]*\)/\1/p' "$WORK/out")"
KERNEL_SHAPE="$(sqlite3 "$DB" "select kernel || '&shape=' || shape || '&dtype=' || dtype from explorations where state = 'done' limit 1")"
curl -sf "${URL}v1/best?kernel=$KERNEL_SHAPE" >/dev/null
echo "GET ${URL}v1/best?kernel=$KERNEL_SHAPE, 64 connections, 10 s, $(nproc) cores"
wrk -t"$(( $(nproc) > 4 ? 4 : 2 ))" -c64 -d10s --latency "${URL}v1/best?kernel=$KERNEL_SHAPE"
