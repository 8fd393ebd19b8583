#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after prepare.sh filled .gpu/:
# every conformance program at realistic sizes, then the matmul benchmark.
set -uo pipefail
export PYTHONUNBUFFERED=1
G=.gpu
C="python3 tests/gpu/gpu_conformance.py"
E="$G/fma.py $G/l3_01_add_out.py $G/l3_08_relu_block.py $G/l3_10_relu_block_tensorize.py"
E="$E $G/l3_11_relu_map.py $G/l3_13_swish_fuse_y.py $G/l3_14_swish_fuse_x.py $G/l3_15_swish_fuse_x_tensorized.py"
E="$E $G/l4_01_geglu.py $G/l3_09_relu_tensorize.py $G/l3_05_relu.py $G/l3_16_relu_warps_stages.py $G/l3_12_swish.py"
$C --size 4096 $E
$C --size 4096 $G/l4_02_softmax.py $G/softmax_rows.py $G/rms_norm_rows.py $G/l3_03_softmax.py
$C --size 256 --dtypes float32 $G/l3_04_rms_norm.py
$C --sizes x=4096,k=65536 $G/sum_split.py $G/sum_atomic.py $G/l3_19_sum_tensorize.py
$C --sizes x=64,k=65536 --dtypes float32 $G/l3_20_sum_block_reduction.py
$C --size 256 $G/l4_03_2mm.py $G/attention_stages2.py
$C --sizes m=128,n=64,k=64,l=64 $G/l4_04_attention.py
$C --size 1024 --dtypes float32 $G/l3_17_sum.py
python3 tests/gpu/gpu_matmul.py $G/matmul_tf32.py $G/matmul_ieee.py --sizes 4096,8192
python3 tests/gpu/gpu_worker.py $G
