#!/usr/bin/env bash
# On a two-GPU machine, from the repository root, with Ray importable (on the lent machines: the
# wheels of .whl installed into PYTHONPATH) and a dtx built for it (cmake -B build-gpu
# -DDTX_STATIC_DEPS=ON): measurement throughput of 120 GeGLU schedules with one GPU and with
# two, through the local pool and through a local Ray cluster (`ray start --head`), then an
# exploration over both GPUs through Ray with one timing actor killed mid-run.
#   tests/gpu/ray_two_gpus.sh OUT_DIR [COMPILE_WORKERS]
set -uo pipefail
OUT="${1:?usage: ray_two_gpus.sh OUT_DIR [COMPILE_WORKERS]}"
CW="${2:-12}"
mkdir -p "$OUT"
export DTX="${DTX:-build-gpu/explorer/dtx}" PYTHONUNBUFFERED=1
export DTX_WORKER_SCRIPT="$PWD/src/dtx/worker.py"
export DTX_RAY_DRIVER="$PWD/explorer/ray/dtx_ray_pool.py"
RAY=(python3 -c "import sys; from ray.scripts.scripts import main; sys.argv[0] = 'ray'; main()")
start_cluster() { # PORT VISIBLE_GPUS COUNT
  CUDA_VISIBLE_DEVICES="$2" "${RAY[@]}" start --head --port "$1" --num-gpus "$3" --num-cpus 16 \
      --include-dashboard=false --disable-usage-stats --temp-dir "/tmp/ray$1" \
      > "$OUT/ray-$1.log" 2>&1 || { tail -20 "$OUT/ray-$1.log"; return 1; }
}
stop_cluster() { "${RAY[@]}" stop --force > /dev/null 2>&1; sleep 2; }

if [ -z "${SKIP_LOCAL:-}" ]; then
  echo "== local pool, 1 GPU then 2 ($CW compile workers)"
  OUT="$OUT" python3 tests/gpu/gpu_throughput.py --dtx "$DTX" --two-gpus --compile-workers "$CW"
fi
for gpus in 1 2; do
  echo "== Ray cluster with $gpus GPU(s), $CW compile actors"
  visible=$([ "$gpus" = 1 ] && echo 0 || echo 0,1)
  start_cluster $((6380 + gpus)) "$visible" "$gpus" || exit 1
  OUT="$OUT" python3 tests/gpu/gpu_throughput.py --dtx "$DTX" --two-gpus --compile-workers "$CW" \
      --ray-address "127.0.0.1:$((6380 + gpus))" --label "${gpus}gpu"
  stop_cluster
done

echo "== exploration over both GPUs through Ray, one timing actor killed mid-run"
start_cluster 6390 0,1 2 || exit 1
DB="$OUT/ray_kill.db"
rm -f "$DB"
(
  for _ in $(seq 600); do
    n=$(python3 -c "import sqlite3; print(sqlite3.connect('$DB').execute('SELECT COUNT(*) FROM measurements').fetchone()[0])" 2>/dev/null || echo 0)
    if [ "${n:-0}" -ge 20 ]; then
      actor=$(ps -eo ppid,args | grep "[d]tx_worker.py --role timing" | head -1 | awk '{print $1}')
      echo "killing timing actor pid $actor after $n measurements"
      kill -9 "$actor"
      break
    fi
    sleep 0.2
  done
) &
killer=$!
"$DTX" explore templates/geglu.yaml --python python3 --backend ray --ray-address 127.0.0.1:6390 \
    --ray-compile-per-node "$CW" --strategy random --budget 150 --seed 5 --top 0 \
    --shape x=4096,y=4096 --db "$DB" --json > "$OUT/ray_kill.json" 2> "$OUT/ray_kill.stderr"
echo "dtx exit $?"
wait $killer
grep -E "lost|ready:|Ray cluster" "$OUT/ray_kill.stderr" | head -20
python3 - "$OUT/ray_kill.json" "$DB" <<'PY'
import json, sqlite3, sys
s = json.load(open(sys.argv[1]))[0]
print({k: s[k] for k in ("state", "measured", "failed", "wall_s", "best_ms")})
c = sqlite3.connect(sys.argv[2])
print("by status:", c.execute("SELECT status, COUNT(*) FROM measurements GROUP BY status").fetchall())
print("by GPU:", c.execute("SELECT gpu, COUNT(*) FROM measurements WHERE schedule_id IS NOT NULL "
                           "GROUP BY gpu").fetchall())
PY
stop_cluster
