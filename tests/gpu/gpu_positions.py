"""On the GPU machine, after tests/gpu/prepare.sh: the kernels of label values, shifted
positions, gathers and several outputs (docs/language.md) at realistic sizes, each checked
against PyTorch written by hand and timed beside it (do_bench median). Exits 1 on a mismatch.

    python3 tests/gpu/gpu_positions.py [.gpu]
"""
import importlib.util
import pathlib
import sys

import torch
import torch.nn.functional as F
import triton.testing


def load(path):
    spec = importlib.util.spec_from_file_location(pathlib.Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rotate_half(q):
    half = q.shape[-1] // 2
    return torch.cat([-q[..., half:], q[..., :half]], dim=-1)


def cases(d):
    dev = "cuda"
    m = {name: load(f"{d}/pos_{name}.py")
         for name in ("causal", "rope", "embedding", "add_rms", "ce")}
    for dtype in (torch.float32, torch.bfloat16):
        tol = 2e-5 if dtype == torch.float32 else 3e-2
        A = torch.randn(4096, 4096, device=dev, dtype=dtype)
        mask = torch.ones(4096, 4096, dtype=torch.bool, device=dev).triu(1)
        yield ("causal", dtype, tol, lambda A=A: m["causal"].s(A),
               lambda A=A, mask=mask: A.masked_fill(mask, float("-inf")))
        Q, C, S = (torch.randn(8192, 128, device=dev, dtype=dtype) for _ in range(3))
        yield ("rope", dtype, tol, lambda: m["rope"].out(Q, C, S),
               lambda: (Q.float() * C.float() + rotate_half(Q.float()) * S.float()).to(dtype))
        E = torch.randn(32000, 2048, device=dev, dtype=dtype)
        Tok = torch.randint(0, 32000, (8192,), device=dev)
        yield ("embedding", dtype, 0.0, lambda: m["embedding"].emb(E, Tok),
               lambda: F.embedding(Tok, E))
        X, R = (torch.randn(8192, 4096, device=dev, dtype=dtype) for _ in range(2))
        W = torch.randn(4096, device=dev, dtype=dtype)

        def add_rms(X=X, R=R, W=W):
            s = (X.float() + R.float())
            return ((s * torch.rsqrt(s.pow(2).mean(1, keepdim=True) + 1e-6)) * W.float()).to(dtype), \
                s.to(dtype)
        yield ("add_rmsnorm", dtype, tol, lambda: m["add_rms"].out(X, R, W, 1e-6),
               add_rms)
        P = torch.randn(4096, 32000, device=dev, dtype=dtype) * 3
        T = torch.randint(0, 32000, (4096,), device=dev)
        T[::7] = -100
        n = int((T != -100).sum())

        def ce(P=P, T=T, n=n):
            logits = P.float().requires_grad_()
            loss = F.cross_entropy(logits, T, ignore_index=-100, label_smoothing=0.1,
                                   reduction="none")
            (loss.sum() / n).backward()
            return logits.grad.to(dtype), loss.detach().to(dtype)
        yield ("cross_entropy", dtype, tol, lambda: m["ce"].grad(P, T, -100, 0.1, 1 / n),
               ce)


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else ".gpu"
    bad = 0
    print(f"{'kernel':14} {'dtype':9} {'max err':>9} {'dt ms':>8} {'torch ms':>9} {'ratio':>6}")
    for name, dtype, tol, run, want in cases(d):
        got, exp = run(), want()
        gots = got if isinstance(got, tuple) else (got,)
        exps = exp if isinstance(exp, tuple) else (exp,)
        err = 0.0
        for g, e in zip(gots, exps):
            scale = max(1.0, e.float().abs().nan_to_num(0, 0, 0).max().item())
            diff = (g.float() - e.float()).abs()
            diff = torch.where(torch.isinf(e.float()) & (g == e), 0.0, diff).nan_to_num(0, 1e30)
            err = max(err, diff.max().item() / scale)
        ok = err <= max(tol, 1e-6)
        bad += not ok
        t_dt = triton.testing.do_bench(run, return_mode="median")
        t_torch = triton.testing.do_bench(want, return_mode="median")
        print(f"{name:14} {str(dtype)[6:]:9} {err:9.2e} {t_dt:8.4f} {t_torch:9.4f} "
              f"{t_dt / t_torch:6.2f} {'' if ok else 'MISMATCH'}")
    print("FAILURES:", bad or "none")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
