"""GPU benchmark (not a test): FlashAttention schedules compiled by dtc (tests/gpu/flash_modules.sh,
carried as .gpu/flash) at the shapes of templates/flash_attention{,_causal}.yaml in bf16, against
torch's scaled_dot_product_attention (default backend and forced FLASH_ATTENTION) and a
hand-written Triton kernel of the same algorithm in its leanest form (2-D tiles, exp2 with the
scale folded in, no masks on full blocks, the causal diagonal apart): the ceiling that the
generated code is measured against. Prints TFLOP/s per shape.

    python3 tests/gpu/flash_probe.py [.gpu/flash] [--only causal|plain]
"""
import argparse
import concurrent.futures
import math
import multiprocessing
import pathlib
import sys

import torch
import triton
import triton.language as tl
import triton.testing
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from gpu_common import load

SHAPES = [  # b, h, s, d: the templates' shapes
    (16, 16, 1024, 128), (4, 16, 4096, 128), (1, 16, 16384, 128),
    (16, 32, 1024, 64), (4, 32, 4096, 64), (1, 32, 16384, 64),
]


@triton.jit
def _lean_step(acc, l_i, m_i, q, k_ptrs, v_ptrs, start, offs_m, offs_n, qk_scale,
               MASK: tl.constexpr):
    k = tl.load(k_ptrs)
    qk = tl.dot(q, k) * qk_scale
    if MASK:
        qk = tl.where(offs_m[:, None] >= start + offs_n[None, :], qk, float("-inf"))
    m_ij = tl.maximum(m_i, tl.max(qk, 1))
    p = tl.math.exp2(qk - m_ij[:, None])
    alpha = tl.math.exp2(m_i - m_ij)
    l_i = l_i * alpha + tl.sum(p, 1)
    v = tl.load(v_ptrs)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, l_i, m_ij


@triton.jit
def _lean_kernel(Q, K, V, O, sz, sh, sm, H, N, qk_scale, D: tl.constexpr, BM: tl.constexpr,
                 BN: tl.constexpr, CAUSAL: tl.constexpr):
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
    full_end = start_m * BM if CAUSAL else N
    for start in range(0, full_end, BN):
        k_ptrs = K + base + (start + offs_n)[None, :] * sm + offs_d[:, None]
        v_ptrs = V + base + (start + offs_n)[:, None] * sm + offs_d[None, :]
        acc, l_i, m_i = _lean_step(acc, l_i, m_i, q, k_ptrs, v_ptrs, start, offs_m, offs_n,
                                   qk_scale, False)
    if CAUSAL:
        for start in range(full_end, full_end + BM, BN):
            k_ptrs = K + base + (start + offs_n)[None, :] * sm + offs_d[:, None]
            v_ptrs = V + base + (start + offs_n)[:, None] * sm + offs_d[None, :]
            acc, l_i, m_i = _lean_step(acc, l_i, m_i, q, k_ptrs, v_ptrs, start, offs_m, offs_n,
                                       qk_scale, True)
    acc = acc / l_i[:, None]
    tl.store(O + base + offs_m[:, None] * sm + offs_d[None, :], acc.to(O.dtype.element_ty))


def lean(q, k, v, causal, bm, bn, warps, stages):
    b, h, n, d = q.shape
    o = torch.empty_like(q)
    grid = (triton.cdiv(n, bm), b * h)
    _lean_kernel[grid](q, k, v, o, q.stride(0), q.stride(1), q.stride(2), h, n,
                       1.4426950408889634 / math.sqrt(d), D=d, BM=bm, BN=bn, CAUSAL=causal,
                       num_warps=warps, num_stages=stages)
    return o


LEAN = [(128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3), (128, 64, 8, 4), (128, 128, 8, 2),
        (64, 64, 4, 3)]


def close(got, want):
    got, want = got.float(), want.float()
    return bool(torch.isfinite(got).all()) and (got - want).norm().item() / want.norm().item() < 2e-2


def inputs(shape, seed=1):
    b, h, s, d = shape
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=g)
            for _ in range(3)]


def warm(path, shape):
    """In a pool process: compile the module at this shape (Triton's cache is shared)."""
    try:
        module = load(path)
        q, k, v = inputs(shape)
        fn = getattr(module, module.COMPILED[0])
        fn(q, k, v)
        torch.cuda.synchronize()
        return ""
    except Exception as e:  # out of shared memory, a compile error: the probe goes on
        return f"{type(e).__name__}: {str(e).splitlines()[0][:100]}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir", nargs="?", default=".gpu/flash")
    parser.add_argument("--only", choices=["causal", "plain"])
    parser.add_argument("--workers", type=int, default=16)
    args = parser.parse_args()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}",
          flush=True)
    variants = [c for c in (False, True) if args.only is None or args.only == ("causal" if c else "plain")]
    paths = {c: sorted(pathlib.Path(args.dir).glob(
        "flash_attention_causal_*.py" if c else "flash_attention_m*.py")) for c in variants}
    jobs = [(str(p), s) for c in variants for p in paths[c] for s in SHAPES]
    ctx = multiprocessing.get_context("spawn")
    failed = {}
    with concurrent.futures.ProcessPoolExecutor(args.workers, mp_context=ctx) as pool:
        for (p, s), why in zip(jobs, pool.map(warm, *zip(*jobs))):
            if why:
                failed[(p, s)] = why
    print(f"compiled {len(jobs) - len(failed)} of {len(jobs)}; failures: "
          f"{sorted(set(failed.values()))[:5]}", flush=True)
    rows = []
    for causal in variants:
        mods = [(p.stem.split("causal_")[-1].split("attention_")[-1], load(p)) for p in paths[causal]]
        for shape in SHAPES:
            b, h, s, d = shape
            flop = 4 * b * h * s * s * d / (2 if causal else 1)
            q, k, v = inputs(shape)
            want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)

            def sdpa_flash():
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            runs = {"sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                    "sdpa_flash": sdpa_flash}
            screen = {}
            for name, m in mods:
                if (str(pathlib.Path(args.dir) / f"{m.__name__}.py"), shape) in failed:
                    continue
                fn = getattr(m, m.COMPILED[0])
                if not close(fn(q, k, v), want):
                    print("WRONG", m.__name__, shape)
                    continue
                screen[name] = triton.testing.do_bench(lambda: fn(q, k, v), warmup=5, rep=25)
            for cfg in LEAN:
                try:
                    if not close(lean(q, k, v, causal, *cfg), want):
                        print("WRONG lean", cfg, shape)
                        continue
                except Exception as e:
                    print("lean", cfg, type(e).__name__, str(e)[:100])
                    continue
                screen["lean%s" % (cfg,)] = triton.testing.do_bench(
                    lambda: lean(q, k, v, causal, *cfg), warmup=5, rep=25)
            dt_best = sorted((t, n) for n, t in screen.items() if not n.startswith("lean"))[:2]
            lean_best = sorted((t, n) for n, t in screen.items() if n.startswith("lean"))[:1]
            for _, n in dt_best:
                m = dict(mods)[n]
                runs[n] = (lambda f: lambda: f(q, k, v))(getattr(m, m.COMPILED[0]))
            for _, n in lean_best:
                cfg = eval(n[4:])
                runs[n] = (lambda c: lambda: lean(q, k, v, causal, *c))(cfg)
            t = {n: triton.testing.do_bench(f, warmup=25, rep=100) for n, f in runs.items()}
            tf = {n: flop / (ms * 1e-3) / 1e12 for n, ms in t.items()}
            best_dt = dt_best[0][1] if dt_best else None
            line = (f"{'causal' if causal else 'plain '} b{b} h{h} s{s} d{d}: "
                    + ", ".join(f"{n} {t[n]:.3f} ms {tf[n]:.0f} TF" for n in runs)
                    + (f" | dt/sdpa {t['sdpa'] / t[best_dt]:.2f}x dt/flash "
                       f"{t['sdpa_flash'] / t[best_dt]:.2f}x" if best_dt else ""))
            print(line, flush=True)
            rows.append(line)
            top = sorted(screen.items(), key=lambda kv: kv[1])[:6]
            print("   screen top:", ", ".join(f"{n} {ms:.3f}" for n, ms in top), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
