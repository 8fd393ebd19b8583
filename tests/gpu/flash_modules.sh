#!/usr/bin/env bash
# Compiles schedules of the FlashAttention templates here into .gpu/flash (carry it to the GPU
# machine for tests/gpu/flash_probe.py): query blocks 64/128, key steps 32/64/128, 4 or 8 warps,
# 2 to 4 stages, for the plain and the causal program.
#   tests/gpu/flash_modules.sh [DTC]
set -euo pipefail
cd "$(dirname "$0")/../.."
DTC="${1:-build/compiler/dtc}"
rm -rf .gpu/flash && mkdir -p .gpu/flash
for variant in flash_attention flash_attention_causal; do
  for bm in 64 128; do for bl in 32 64 128; do for w in 4 8; do for st in 2 3 4; do
    "$DTC" templates/$variant.dt -o .gpu/flash/${variant}_m${bm}_l${bl}_w${w}_s${st}.py --schedule "
      p.fuse_at(out, m); e.fuse_at(out, m); s.fuse_at(out, m); qk.fuse_at(out, m);
      mx.fuse_at(out, m); out.block(b:1, h:1, m:$bm); out.tensorize(m:0, n:0, k:0, l:$bl);
      out.map(b, h, m); out.online(l); out.num_warps($w); out.num_stages($st)" &
  done; done; done; done
done
wait
ls .gpu/flash | wc -l
