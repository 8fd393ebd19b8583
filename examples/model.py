#!/usr/bin/env python3
"""A transformer decoder block on dtx kernels under torch.compile (docs/python.md).

    h = x + Attention(RMSNorm(x) @ W_qkv) @ W_o          causal self-attention over the tokens
    y = h + SwiGLU(RMSNorm(h) @ W_up) @ W_down

RMSNorm, the causal attention and SwiGLU are the best modules a dtx daemon knows for the block's
shapes (templates/rmsnorm.yaml, templates/flash_attention_causal.yaml, templates/swiglu.yaml),
called as torch custom ops; the attention reads its queries, keys and values as the head-major
views of one projection (`.transpose(1, 2)`, no copies). The projections are torch's. The block runs eagerly on torch alone, eagerly on dtx kernels, and under
torch.compile(fullgraph=True) on dtx kernels; they must agree with torch's block (and with
torch.compile's), and each is timed: on a GPU three ways, as dtx measures kernels (do_bench's
median, the GPU's own time in a CUDA graph, the host's time per call); on the CPU the host's.

    examples/model.py --url http://127.0.0.1:8080 [--token T] [--explore] [--tokens 64 --dim 256]
        [--heads 4] [--dtype bfloat16]

--explore: where the daemon knows no schedule for a shape, explore a few of its template's
schedules first (a small random search). On a machine without a GPU, run it with
TRITON_INTERPRET=1 (and small sizes)."""
from __future__ import annotations

import argparse
import pathlib
import sys
import time
import types
from collections.abc import Callable

import torch

import dtx  # the package deploy/setup.sh installs into .venv

TEMPLATES = pathlib.Path(__file__).resolve().parent.parent / "templates"


class Block(torch.nn.Module):
    def __init__(self, rmsnorm: types.ModuleType | None, attention: types.ModuleType | None,
                 swiglu: types.ModuleType | None, dim: int, heads: int, hidden: int,
                 eps: float = 1e-6) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.heads = heads
        self.norm1 = torch.nn.Parameter(1 + 0.1 * torch.randn(dim, generator=g))
        self.qkv = torch.nn.Parameter(torch.randn(dim, 3 * dim, generator=g) / dim ** 0.5)
        self.o = torch.nn.Parameter(torch.randn(dim, dim, generator=g) / dim ** 0.5)
        self.norm2 = torch.nn.Parameter(1 + 0.1 * torch.randn(dim, generator=g))
        self.up = torch.nn.Parameter(torch.randn(dim, 2 * hidden, generator=g) / dim ** 0.5)
        self.down = torch.nn.Parameter(torch.randn(hidden, dim, generator=g) / hidden ** 0.5)
        self.eps = eps
        # dtx's ops, or None: torch's own.
        self.rms = rmsnorm.custom_op() if rmsnorm else None
        self.attention = attention.custom_op() if attention else None
        self.swiglu = swiglu.custom_op() if swiglu else None

    def norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if self.rms is not None:
            return self.rms(x, weight, self.eps, 0.0)
        xf = x.float()  # in float32, as the dtx kernel computes it, rounded once to x's dtype
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
                * weight.float()).to(x.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens, dim = x.shape
        # Queries, keys and values as [1, heads, tokens, dim / heads] views of one product.
        q, k, v = (t.transpose(1, 2) for t in
                   (self.norm(x, self.norm1) @ self.qkv).view(1, tokens, 3, self.heads, -1)
                   .unbind(2))
        if self.attention is not None:
            a = self.attention(q, k, v)
        else:
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = x + a.transpose(1, 2).reshape(tokens, dim) @ self.o
        # Column views of one product: the kernels read them with their strides, no copies.
        gate, value = (self.norm(h, self.norm2) @ self.up).chunk(2, dim=-1)
        if self.swiglu is not None:
            s = self.swiglu(gate, value)
        else:
            s = torch.nn.functional.silu(gate) * value
        return h + s @ self.down


def best_module(client: dtx.Client, kernel: str, shape: dict[str, int], dtype: str,
                explore: bool, budget: int) -> types.ModuleType:
    try:
        return client.best(kernel, shape, dtype=dtype)
    except dtx.NotFound as e:
        if not explore:
            raise SystemExit(f"{kernel} at {shape}: {e.message}. Explore it first, or pass "
                             "--explore") from None
    print(f"exploring {kernel} at {shape} ({budget} schedules)", flush=True)
    created = client.explore(TEMPLATES / f"{kernel}.yaml", shapes=[shape], dtype=dtype,
                             strategy="random", budget=budget, baselines=["reference"],
                             screen_warmup_ms=1, screen_rep_ms=5, full_warmup_ms=1,
                             full_rep_ms=5, rounds=1, top=1)
    done = client.wait(created["id"], timeout=3600)
    if done["state"] != "done":
        raise SystemExit(f"exploration {created['id']} of {kernel} ended {done['state']}")
    return client.best(kernel, shape, dtype=dtype)


TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 3e-2}


def host_ms(fn: Callable[[], object], repeat: int) -> float:
    """Wall time per call, the device's queue drained before and after."""
    fn()
    synchronize()
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    synchronize()
    return (time.perf_counter() - start) / repeat * 1e3


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def times_ms(fn: Callable[[], object], repeat: int) -> dict[str, float]:
    """do_bench's median, the median of the GPU's own time in a CUDA graph, and the host's time
    per call (ms); on the CPU only the last."""
    if not torch.cuda.is_available():
        return {"host": host_ms(fn, repeat)}
    import triton.testing
    return {"do_bench": triton.testing.do_bench(fn, return_mode="median"),
            "gpu": triton.testing.do_bench_cudagraph(fn, return_mode="median"),
            "host": host_ms(fn, max(repeat, 100))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="dtxd's address, e.g. http://127.0.0.1:8080")
    parser.add_argument("--token", help="dtxd's token, where it asks for one")
    parser.add_argument("--tokens", type=int, default=64, help="rows of x (default 64)")
    parser.add_argument("--dim", type=int, default=256, help="the model's width (default 256)")
    parser.add_argument("--heads", type=int, default=4,
                        help="attention heads (default 4); the width must divide among them")
    parser.add_argument("--hidden", type=int, default=512, help="SwiGLU's width (default 512)")
    parser.add_argument("--explore", action="store_true",
                        help="explore a kernel the daemon knows no schedule for")
    parser.add_argument("--budget", type=int, default=4, help="schedules per exploration")
    parser.add_argument("--dtype", default="float32", choices=sorted(TOLERANCE),
                        help="the block's dtype (default float32)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="calls timed by the host's clock (default 3; 100 at least on a GPU)")
    args = parser.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"

    if args.dim % args.heads:
        parser.error(f"--dim {args.dim} does not divide among --heads {args.heads}")
    head = args.dim // args.heads
    client = dtx.Client(args.url, token=args.token)
    rmsnorm = best_module(client, "rmsnorm", {"x": args.tokens, "y": args.dim}, args.dtype,
                          args.explore, args.budget)
    attention = best_module(client, "flash_attention_causal",
                            {"b": 1, "h": args.heads, "m": args.tokens, "l": args.tokens,
                             "k": head, "n": head}, args.dtype, args.explore, args.budget)
    swiglu = best_module(client, "swiglu", {"x": args.tokens, "y": args.hidden}, args.dtype,
                         args.explore, args.budget)

    dtype = getattr(torch, args.dtype)
    torch_block = Block(None, None, None, args.dim, args.heads, args.hidden).to(device, dtype)
    dtx_block = Block(rmsnorm, attention, swiglu, args.dim, args.heads,
                      args.hidden).to(device, dtype)
    x = torch.randn(args.tokens, args.dim, device=device, dtype=dtype)
    tolerance = TOLERANCE[args.dtype]
    agree = True
    with torch.no_grad():
        want = torch_block(x)
        blocks = {"eager torch": torch_block,
                  "compiled torch": torch.compile(torch_block, fullgraph=True),
                  "eager, dtx kernels": dtx_block,
                  "compiled, dtx kernels": torch.compile(dtx_block, fullgraph=True)}
        for name, block in list(blocks.items())[1:]:
            got = block(x)
            diff = (got.float() - want.float()).abs().max().item()
            if torch.allclose(got.float(), want.float(), rtol=tolerance, atol=tolerance):
                print(f"{name}: matches torch (max |difference| {diff:.3g})")
            else:
                print(f"{name}: DIFFERS from torch (max |difference| {diff:.3g}, tolerance "
                      f"{tolerance:g})")
                agree = False
        print(f"{'ms per block':24} {'do_bench':>10} {'GPU':>10} {'host':>10}")
        for name, block in blocks.items():
            t = times_ms(lambda block=block: block(x), args.repeat)
            cells = [f"{t[k]:10.4f}" if k in t else f"{'-':>10}"
                     for k in ("do_bench", "gpu", "host")]
            print(f"{name:24} {' '.join(cells)}")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
