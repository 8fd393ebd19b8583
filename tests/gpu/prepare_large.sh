#!/usr/bin/env bash
# Compiles, for the large-shape comparison with torch.compile, N schedules (default 100: the
# template's whole space when smaller) drawn with a fixed seed from each template's space at its
# shape, into .gpu/large_<case>/ (ignored by git; carry .gpu to the device). Then, on the GPU
# machine, for each case: python3 tests/gpu/sweep_schedules.py .gpu/large_<case> --shape SHAPE
#   --baseline TEMPLATE --compile --top 3 --first-pass-s 40
# Usage: tests/gpu/prepare_large.sh [N]
set -euo pipefail
cd "$(dirname "$0")/../.."
N="${1:-100}"
DTC="${DTC:-build/compiler/dtc}"
DTX="${DTX:-build/explorer/dtx}"
for spec in "geglu x=16384,y=16384" "geglu x=128,y=65536" "dyt x=16384,y=16384" \
            "dyt x=128,y=65536" "softmax x=4096,y=16384"; do
  read -r template shape <<<"$spec"
  dir=".gpu/large_${template}_${shape//[=,]/_}"
  rm -rf "$dir"
  mkdir -p "$dir"
  i=0
  "$DTX" expand "templates/$template.yaml" --shape "$shape" --list |
    shuf -n "$N" --random-source=<(yes) |
    while read -r schedule; do
      "$DTC" "templates/$template.dt" --schedule "$schedule" -o "$dir/s$((i++)).py"
    done
  echo "$dir: $(ls "$dir" | wc -l) modules"
done
