"""GPU benchmark (not a test): is any warp-specialized form of the lean attention loop correct and
faster on Hopper with Triton 3.6? The loop of flash_probe.py's lean kernel with Q, K and V read
through tensor descriptors, as `tl.range(..., warp_specialize=True)` and without, over query
blocks of 64 and 128, key steps of 64 and 128, 4 and 8 warps, 2 and 3 stages; each checked
against SDPA (relative L2 error below 2e-2, every row written) and timed (do_bench median).
Non-causal forward, bf16, d = 128 and 64.

    python3 tests/gpu/flash_ws_ab.py
"""
import itertools
import math
import sys

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
import triton.testing

from flash_probe import inputs

SHAPES = [(4, 16, 4096, 128), (4, 32, 4096, 64)]


@triton.jit
def _attn(Q, K, V, O, H, N, qk_scale, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
          WS: tl.constexpr):
    start_m = tl.program_id(0)
    zh = tl.program_id(1)
    rows = zh * N  # the [b * h * s, d] views: this head's first row
    q_desc = tl.make_tensor_descriptor(Q, [H * N, D], [D, 1], [BM, D])
    k_desc = tl.make_tensor_descriptor(K, [H * N, D], [D, 1], [BN, D])
    v_desc = tl.make_tensor_descriptor(V, [H * N, D], [D, 1], [BN, D])
    o_desc = tl.make_tensor_descriptor(O, [H * N, D], [D, 1], [BM, D])
    q = q_desc.load([rows + start_m * BM, 0])
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    for start in tl.range(0, N, BN, warp_specialize=WS):
        k = k_desc.load([rows + start, 0])
        qk = tl.dot(q, k.T) * qk_scale
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = v_desc.load([rows + start, 0])
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_ij
    acc = acc / l_i[:, None]
    o_desc.store([rows + start_m * BM, 0], acc.to(O.dtype.element_ty))


def run(q, k, v, bm, bn, warps, stages, ws):
    b, h, n, d = q.shape
    o = torch.full_like(q, float("nan"))
    _attn[(triton.cdiv(n, bm), b * h)](q, k, v, o, b * h, n, 1.4426950408889634 / math.sqrt(d),
                                       D=d, BM=bm, BN=bn, WS=ws, num_warps=warps,
                                       num_stages=stages)
    return o


def main():
    triton.set_allocator(lambda size, alignment, stream: torch.empty(size, device="cuda",
                                                                      dtype=torch.int8))
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}",
          flush=True)
    for shape in SHAPES:
        b, h, s, d = shape
        flop = 4 * b * h * s * s * d
        q, k, v = inputs(shape)
        want = F.scaled_dot_product_attention(q, k, v).float()
        sdpa = triton.testing.do_bench(lambda: F.scaled_dot_product_attention(q, k, v), warmup=25, rep=100)
        print(f"b{b} h{h} s{s} d{d}: sdpa {sdpa:.3f} ms {flop / sdpa / 1e9:.0f} TF", flush=True)
        for bm, bn, warps, stages, ws in itertools.product((64, 128), (64, 128), (4, 8), (2, 3),
                                                           (False, True)):
            name = f"  bm{bm} bn{bn} w{warps} s{stages} {'ws' if ws else '--'}"
            try:
                got = run(q, k, v, bm, bn, warps, stages, ws).float()
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 - a compile failure: the probe goes on
                print(f"{name} {type(e).__name__}: {str(e).splitlines()[0][:90]}", flush=True)
                continue
            nan_rows = int(torch.isnan(got).any(dim=-1).sum())
            err = ((torch.nan_to_num(got) - want).norm() / want.norm()).item()
            if nan_rows or not err < 2e-2:
                print(f"{name} WRONG: {nan_rows} rows unwritten, rel err {err:.3g}", flush=True)
                continue
            ms = triton.testing.do_bench(lambda: run(q, k, v, bm, bn, warps, stages, ws),
                                         warmup=25, rep=100)
            print(f"{name} {ms:.3f} ms {flop / ms / 1e9:.0f} TF", flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
