#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with a dtx built for it
# (cmake -B build-gpu -DDTX_STATIC_DEPS=ON; carry build-gpu/explorer/dtx): the small fused tl.dot
# chains against eager PyTorch and torch.compile, each explored with BUDGET random schedules of
# its template (seed 1), the best 5 and the baselines then measured with the thesis' protocol
# and all three times (do_bench median, GPU-only, host µs per call back to back). DTYPE (default:
# the templates' float32) runs copies of the templates in another dtype.
#   [DTYPE=bfloat16] tests/gpu/small_chains.sh OUT_DIR [BUDGET]
set -uo pipefail
OUT="${1:?usage: small_chains.sh OUT_DIR [BUDGET]}"
BUDGET="${2:-24}"
DTX="${DTX:-build-gpu/explorer/dtx}"
export PYTHONUNBUFFERED=1
TEMPLATES=templates
if [[ -n "${DTYPE:-}" ]]; then
  TEMPLATES="$OUT/templates-$DTYPE"
  mkdir -p "$TEMPLATES"
  cp templates/*.dt templates/baselines.py "$TEMPLATES/"
  for t in sigmoid_mm 2mm attention; do
    sed "s/^dtype: .*/dtype: $DTYPE/" "templates/$t.yaml" >"$TEMPLATES/$t.yaml"
  done
fi
COMMON=(--python python3 --compile-workers 8 --db "$OUT/chains${DTYPE:+-$DTYPE}.db" --timeout 120
        --times bench,gpu,host --top 5 --strategy random --budget "$BUDGET" --seed 1)
for spec in "sigmoid_mm m=1024,n=2048,k=32" "2mm m=1024,k=64,l=64,n=1024" \
            "attention m=256,n=256,k=256,l=256"; do
  read -r template shape <<<"$spec"
  "$DTX" explore "$TEMPLATES/$template.yaml" --shape "$shape" "${COMMON[@]}" 2>&1 |
    grep -v "hello:\|started pid"
done
