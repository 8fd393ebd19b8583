#!/usr/bin/env bash
# Compiles the modules that run_all.sh checks on a GPU machine into .gpu/ (ignored by git;
# carry it to the device). Usage: tests/gpu/prepare.sh [DTC]
set -euo pipefail
cd "$(dirname "$0")/../.."
DTC="${1:-build/compiler/dtc}"
CONF=tests/conformance
mkdir -p .gpu
for f in "$CONF"/*.dt; do "$DTC" "$f" -o ".gpu/$(basename "$f" .dt).py"; done
# Realistic schedules for the kernels whose printed schedule is sequential.
"$DTC" "$CONF/l3_04_rms_norm.dt" -o .gpu/rms_norm_rows.py \
  --schedule "rms_norm_out.block(x:1); rms_norm_out.tensorize(y:0, k:0); rms_norm_out.num_warps(8)"
"$DTC" "$CONF/l3_17_sum.dt" -o .gpu/sum_split.py \
  --schedule "sum_out.block(x:1, k:8192); sum_out.tensorize(k:0); sum_out.num_warps(8)"
"$DTC" "$CONF/l3_17_sum.dt" -o .gpu/sum_atomic.py \
  --schedule "sum_out.block(x:1, k:8192); sum_out.tensorize(k:0); sum_out.atomic(k); sum_out.num_warps(8)"
"$DTC" "$CONF/l3_03_softmax.dt" -o .gpu/softmax_rows.py \
  --schedule "softmax_out.block(x:1); softmax_out.tensorize(y:0); exp_A.block(x:1); exp_A.tensorize(y:0); sum_exp_A.block(x:1); sum_exp_A.tensorize(y:0)"
# The printed attention schedule pipelines 8 stages: too much shared memory at 256.
"$DTC" "$CONF/l4_04_attention.dt" -o .gpu/attention_stages2.py \
  --schedule "$("$DTC" "$CONF/l4_04_attention.dt" --canonical | sed 's/num_stages(8)/num_stages(2)/')"
"$DTC" tests/gpu/matmul.dt -o .gpu/matmul_tf32.py
"$DTC" tests/gpu/matmul.dt -o .gpu/matmul_ieee.py \
  --schedule "$("$DTC" tests/gpu/matmul.dt --canonical); C.precision(ieee)"
# The measurement worker's GPU run (gpu_worker.py): geglu, and a matmul tile too large for
# shared memory.
"$DTC" examples/geglu.dt -o .gpu/geglu.py
"$DTC" tests/gpu/matmul.dt -o .gpu/matmul_huge.py \
  --schedule "C.block(m:256, n:256); C.tensorize(m:0, n:0, k:128); C.num_warps(8); C.num_stages(8)"
# The host-path benchmark (gpu_host_path.py): the templates' small fused chains.
for t in sigmoid_mm 2mm attention softmax; do "$DTC" "templates/$t.dt" -o ".gpu/template_$t.py"; done
ls .gpu
# Label values, shifted positions, gathers and several outputs (gpu_positions.py).
P=tests/gpu/positions
"$DTC" "$P/causal.dt" -o .gpu/pos_causal.py --schedule "s.block(m:16, l:128); s.tensorize(m:0, l:0); s.compile()"
"$DTC" "$P/rope.dt" -o .gpu/pos_rope.py --schedule "out.block(s:4); out.tensorize(s:0, d:0); out.compile()"
"$DTC" "$P/embedding.dt" -o .gpu/pos_embedding.py --schedule "emb.block(t:4, d:512); emb.tensorize(t:0, d:0); emb.compile()"
"$DTC" "$P/add_rms.dt" -o .gpu/pos_add_rms.py --schedule "s.fuse_at(out, x); s.store_in(out); out.block(x:1); out.tensorize(x:0, y:0, k:0); out.num_warps(8); out.compile()"
"$DTC" "$P/ce.dt" -o .gpu/pos_ce.py --schedule "m.fuse_at(grad, x); lse.fuse_at(grad, x); loss.store_in(grad); grad.block(x:1); grad.tensorize(y:4096); grad.num_warps(16); grad.compile()"
