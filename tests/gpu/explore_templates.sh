#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with a dtx built for it
# (cmake -B build-gpu -DDTX_STATIC_DEPS=ON; carry build-gpu/explorer/dtx): short explorations of
# every template at its first shape (are its schedules correct and timeable on a GPU?), and an
# evolutionary search of GeGLU with a tenth of its space as budget.
#   tests/gpu/explore_templates.sh OUT_DIR [BUDGET]
set -uo pipefail
OUT="${1:?usage: explore_templates.sh OUT_DIR [BUDGET]}"
BUDGET="${2:-24}"
DTX="${DTX:-build-gpu/explorer/dtx}"
export PYTHONUNBUFFERED=1
COMMON=(--python python3 --compile-workers 8 --db "$OUT/templates.db" --timeout 120)
python3 - <<'PY' | tee "$OUT/roofline.txt"
import torch, triton.testing as tt
for shape in [(16384, 16384), (128, 65536)]:
    A, B = torch.randn(*shape, device="cuda"), torch.randn(*shape, device="cuda")
    C = torch.empty_like(A)
    ms = tt.do_bench(lambda: torch.add(A, B, out=C), warmup=25, rep=100)
    print(f"copy roofline (C = A + B, 2 reads + 1 write) {shape[0]}x{shape[1]} float32: {ms:.4f} ms")
PY
"$DTX" explore templates/geglu.yaml --strategy evolution --budget 62 --seed 1 \
    --shape x=16384,y=16384 "${COMMON[@]}" 2>&1 | grep -v "hello:\|started pid"
for t in dyt swiglu rmsnorm sum matmul sigmoid_mm 2mm attention; do
  first=$(python3 -c "
import re, sys
text = open('templates/$t.yaml').read()
m = re.search(r'^shapes:\s*\n\s*-\s*\{([^}]*)\}', text, re.M)
print(','.join(p.replace(':', '=').replace(' ', '') for p in m.group(1).split(',')))")
  "$DTX" explore "templates/$t.yaml" --strategy random --budget "$BUDGET" --seed 1 --top 3 \
      --shape "$first" "${COMMON[@]}" 2>&1 | grep -v "hello:\|started pid"
done
