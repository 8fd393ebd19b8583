"""GPU benchmark (not a test): does issuing the next key tile's product Q·Kᵀ before the current
tile's softmax (the overlap FlashAttention-3 gets within a warp group, written as a software
pipeline a loop iteration deep, without warp specialization) speed up the leanest Triton kernel
of flash_probe.py on Hopper? Non-causal forward, bf16, against SDPA's default backend; do_bench
medians, TFLOP/s.

    python3 tests/gpu/flash_pipe_ab.py
"""
import math
import sys

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
import triton.testing

from flash_probe import inputs, lean

SHAPES = [(16, 16, 1024, 128), (4, 16, 4096, 128), (4, 32, 4096, 64)]
CONFIGS = [(128, 64, 8, 3), (128, 128, 8, 3), (128, 64, 8, 4), (128, 128, 8, 2), (128, 64, 4, 3)]


@triton.jit
def _pipelined(Q, K, V, O, sz, sh, sm, H, N, qk_scale, D: tl.constexpr, BM: tl.constexpr,
               BN: tl.constexpr):
    start_m = tl.program_id(0)
    zh = tl.program_id(1)
    base = (zh // H) * sz + (zh % H) * sh
    offs_m = start_m * BM + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_d = tl.arange(0, D)
    q = tl.load(Q + base + offs_m[:, None] * sm + offs_d[None, :])
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    k = tl.load(K + base + offs_n[None, :] * sm + offs_d[:, None])
    qk = tl.dot(q, k)
    for start in range(0, N, BN):
        # the next tile's product first (a wrapped-around, unused one at the last step)
        nxt = (start + BN) % N
        k_next = tl.load(K + base + (nxt + offs_n)[None, :] * sm + offs_d[:, None])
        qk_next = tl.dot(q, k_next)
        s = qk * qk_scale
        m_ij = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + base + (start + offs_n)[:, None] * sm + offs_d[None, :])
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_ij
        qk = qk_next
    acc = acc / l_i[:, None]
    tl.store(O + base + offs_m[:, None] * sm + offs_d[None, :], acc.to(O.dtype.element_ty))


def pipelined(q, k, v, bm, bn, warps, stages):
    b, h, n, d = q.shape
    o = torch.empty_like(q)
    _pipelined[(triton.cdiv(n, bm), b * h)](q, k, v, o, q.stride(0), q.stride(1), q.stride(2), h,
                                            n, 1.4426950408889634 / math.sqrt(d), D=d, BM=bm,
                                            BN=bn, num_warps=warps, num_stages=stages)
    return o


def plain(q, k, v, bm, bn, warps, stages):
    """flash_probe.py's lean kernel, non-causal."""
    return lean(q, k, v, False, bm, bn, warps, stages)


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}",
          flush=True)
    for shape in SHAPES:
        b, h, s, d = shape
        flop = 4 * b * h * s * s * d
        q, k, v = inputs(shape)
        want = F.scaled_dot_product_attention(q, k, v).float()
        sdpa = triton.testing.do_bench(lambda: F.scaled_dot_product_attention(q, k, v), warmup=25, rep=100)
        line = [f"b{b} h{h} s{s} d{d}: sdpa {sdpa:.3f} ms {flop / sdpa / 1e9:.0f} TF"]
        for cfg in CONFIGS:
            for name, kernel in (("plain", plain), ("pipe", pipelined)):
                try:
                    got = kernel(q, k, v, *cfg).float()
                    err = ((got - want).norm() / want.norm()).item()
                    if not err < 2e-2:
                        line.append(f"{name}{cfg} WRONG {err:.3g}")
                        continue
                    ms = triton.testing.do_bench(lambda: kernel(q, k, v, *cfg), warmup=25, rep=100)
                    line.append(f"{name}{cfg} {ms:.3f} {flop / ms / 1e9:.0f}")
                except Exception as e:  # noqa: BLE001 - out of shared memory: the probe goes on
                    line.append(f"{name}{cfg} {type(e).__name__}")
        print("\n   ".join(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
