#!/usr/bin/env bash
# On the GPU machine, after prepare_ab.sh: every gpu_ab.py case, one run.
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 tests/gpu/gpu_ab.py .gpu/a .gpu/b \
  geglu:x=16384,y=16384:float16 dyt:x=16384,y=16384:float16 dyt:x=128,y=65536:float16 \
  softmax_rows:x=4096,y=16384:float32 softmax_fused:x=4096,y=16384:float32 \
  rms_norm_rows:x=16384,y=16384:float16 \
  matmul:m=4096,n=4096,k=4096:float16 matmul:m=8192,n=8192,k=8192:bfloat16 \
  matmul:m=8192,n=8192,k=8192:float32 \
  sigmoid_mm:m=1024,n=2048,k=32:float32 sigmoid_mm:m=1024,n=2048,k=32:bfloat16 \
  2mm:m=1024,k=64,l=64,n=1024:float32 2mm:m=1024,k=64,l=64,n=1024:bfloat16 \
  2mm_large:m=1024,k=256,l=256,n=4096:float16 \
  attention:m=256,n=256,k=256,l=256:float32 attention:m=256,n=256,k=256,l=256:bfloat16
