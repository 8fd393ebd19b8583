#!/usr/bin/env bash
# Compiles the programs gpu_ab.py compares with two compilers: into .gpu/a with DTC_A and .gpu/b
# with DTC_B (ignored by git; carry .gpu to the device). Usage:
#   tests/gpu/prepare_ab.sh DTC_A DTC_B
# then, on the GPU machine: bash tests/gpu/run_ab.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
CONF=tests/conformance
for side in a b; do
  DTC="$1"; [ "$side" = b ] && DTC="$2"
  D=.gpu/$side
  mkdir -p "$D"
  "$DTC" examples/geglu.dt -o "$D/geglu.py"
  "$DTC" templates/dyt.dt -o "$D/dyt.py"
  "$DTC" "$CONF/l3_03_softmax.dt" -o "$D/softmax_rows.py" --schedule "softmax_out.block(x:1); \
softmax_out.tensorize(y:0); exp_A.block(x:1); exp_A.tensorize(y:0); sum_exp_A.block(x:1); \
sum_exp_A.tensorize(y:0)"
  "$DTC" "$CONF/l4_02_softmax.dt" -o "$D/softmax_fused.py" --schedule "_softmax.block(x:1); \
_softmax.tensorize(y:0); _sum.fuse_at(_softmax, x); _softmax.num_warps(8)"
  "$DTC" "$CONF/l3_04_rms_norm.dt" -o "$D/rms_norm_rows.py" --schedule "rms_norm_out.block(x:1); \
rms_norm_out.tensorize(y:0, k:0); rms_norm_out.num_warps(8)"
  "$DTC" tests/gpu/matmul.dt -o "$D/matmul.py"
  # The best schedules of docs/benchmarks.md's small fused chains.
  "$DTC" templates/sigmoid_mm.dt -o "$D/sigmoid_mm.py" --schedule "mm.fuse_at(sigmoid_mm,n); \
sigmoid_mm.block(m:16,n:128); sigmoid_mm.tensorize(m:0,n:0,k:32); sigmoid_mm.map(n:ni/8,m,ni); \
sigmoid_mm.relayout(none); sigmoid_mm.num_stages(2)"
  "$DTC" templates/2mm.dt -o "$D/2mm.py" --schedule "_2mm.block(m:32,n:64); \
_2mm.tensorize(m:0,n:0,l:0,k:64); _2mm.num_warps(8); mm.fuse_at(_2mm,m)"
  "$DTC" templates/2mm.dt -o "$D/2mm_large.py" --schedule "_2mm.block(m:64,n:128); \
_2mm.tensorize(m:0,n:0,l:0,k:32); _2mm.num_warps(4); _2mm.num_stages(3); mm.fuse_at(_2mm,m)"
  "$DTC" templates/attention.dt -o "$D/attention.py" --schedule "attention.block(m:16,n:128); \
attention.tensorize(m:0,n:64,l:0,k:64); attention.num_stages(2); dvsr.fuse_at(sm,m); \
e.fuse_at(attention,m); mm.fuse_at(e,l); sm.fuse_at(attention,m)"
done
ls .gpu/a
