#!/usr/bin/env python3
"""A generated matmul module against cuBLAS, Triton's tutorial kernel with the same tiles, and
hand-edited copies of itself (which masks cost what), float16 4096^3 and bfloat16 8192^3.

    build/compiler/dtc tests/gpu/matmul.dt -o .gpu-run/mm/mm64.py --schedule \
      "C.block(m:128, n:256); C.tensorize(m:0, n:0, k:64); C.map(m:mi/8, n, mi); C.num_warps(8); C.num_stages(3)"
    python3 tests/gpu/matmul_variants.py .gpu-run/mm/mm64.py     # on the GPU machine

Prints, per case, the median of 9 do_bench medians (25/100 ms) of each, interleaved, and its
ratio to cuBLAS. Every variant is checked against torch.matmul first."""
import importlib.util, sys, pathlib, torch, triton, triton.language as tl
from triton.testing import do_bench
MODULE = pathlib.Path(sys.argv[1]).resolve()
HERE = MODULE.parent

def load(name, text):
    p = HERE / f"_{name}.py"; p.write_text(text)
    spec = importlib.util.spec_from_file_location(name, p); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m

@triton.jit
def tut(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, G: tl.constexpr):
    pid = tl.program_id(0)
    npm = tl.cdiv(M, BM); npn = tl.cdiv(N, BN)
    nig = G * npn; gid = pid // nig; fm = gid * G; gs = min(npm - fm, G)
    pm = fm + ((pid % nig) % gs); pn = (pid % nig) // gs
    oam = (pm * BM + tl.arange(0, BM)) % M
    obn = (pn * BN + tl.arange(0, BN)) % N
    ok = tl.arange(0, BK)
    a_ptrs = a_ptr + (oam[:, None] * sam + ok[None, :] * sak)
    b_ptrs = b_ptr + (ok[:, None] * sbk + obn[None, :] * sbn)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=ok[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=ok[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * sak; b_ptrs += BK * sbk
    c = acc.to(c_ptr.dtype.element_ty)
    ocm = pm * BM + tl.arange(0, BM); ocn = pn * BN + tl.arange(0, BN)
    tl.store(c_ptr + scm * ocm[:, None] + scn * ocn[None, :], c, mask=(ocm[:, None] < M) & (ocn[None, :] < N))

def tutorial(a, b, BM, BN, BK, w, s):
    M, K = a.shape; _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
    tut[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1), BM, BN, BK, 8, num_warps=w, num_stages=s)
    return c

for src, (BM, BN, BK) in ((MODULE.name, (128, 256, 64)),):
    text = (HERE / src).read_text()
    variants = {"generated": text}
    v1 = text.replace("mask=m_vec_mask[:, None] & k_vec_mask[None, :]", "mask=k_vec_mask[None, :]").replace("mask=k_vec_mask[:, None] & n_vec_mask[None, :]", "mask=k_vec_mask[:, None]")
    assert v1 != text
    variants["no m/n load masks"] = v1
    v2 = v1.replace(", mask=k_vec_mask[None, :], other=0.0)", ")").replace(", mask=k_vec_mask[:, None], other=0.0)", ")")
    assert v2 != v1
    variants["no load masks"] = v2

    mods = {k: load(f"{src[:-3]}_{i}", t) for i, (k, t) in enumerate(variants.items())}
    for dtype, size in ((torch.float16, 4096), (torch.bfloat16, 8192)):
        a = torch.randn(size, size, device="cuda", dtype=dtype); b = torch.randn(size, size, device="cuda", dtype=dtype)
        want = torch.matmul(a, b)
        fns = {"cuBLAS": lambda: torch.matmul(a, b), "tutorial": lambda: tutorial(a, b, BM, BN, BK, 8, 3)}
        for k, m in mods.items():
            fns[k] = (lambda m=m: m.C(a, b))
        res = {}
        for rep in range(9):
            for k, f in fns.items():
                if rep == 0:
                    got = f(); err = ((got.float() - want.float()).norm() / want.float().norm()).item()
                    assert err < 1e-2, (k, err)
                res.setdefault(k, []).append(do_bench(f, warmup=25, rep=100))
        base = min(res["cuBLAS"])
        import statistics
        base = statistics.median(res["cuBLAS"])
        print(f"{src} BK={BK} {dtype} {size}^3 (median of 9 do_bench medians): " + ", ".join(f"{k} {statistics.median(v):.4f} ms ({statistics.median(v)/base:.3f}x)" for k, v in res.items()), flush=True)
