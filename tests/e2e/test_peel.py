"""The `peel` kernel pass (compiler/src/kir/PeelPartialTile.cpp): a loop over a dimension in
whole tiles runs its full tiles without the dimension's mask and its last, partial tile in a loop
of its own, masked as before. It changes no value: under the interpreter the peeled kernels
compute what hand-written torch computes, at sizes below one tile, at exact multiples of the
tile (no partial tile), one past them, and zero; and the peeled kernel compiles for sm_90."""
import math
import re

import pytest
import torch

from conftest import MATMUL, compile_source

KL_DIV = """Func kl;
In P, T;
SIn eps = 1e-10;
Var x;
RVar y;
kl[x] = rsum(T[x, y] * (log(maximum(T[x, y], eps)) - P[x, y]), y);
kl.compile();
"""

RMSNORM = """Func out;
In X, W;
Var x, y;
RVar k;
out[x, y] = X[x, y] * rsqrt(rsum(X[x, k] * X[x, k], k) / len(y) + 1e-6) * W[y];
out.compile();
"""

SUM_EXP = """Func out;
In X;
Var x;
RVar y;
out[x] = rsum(exp(X[x, y]), y);
out.compile();
"""


def loops(text):
    """The `for ... in range(lo, hi, step)` lines of the kernels, stripped."""
    return [line.strip() for line in text.splitlines() if re.match(r"\s+for \w+_iter in range\(", line)]


def close(got, want, rtol=1e-4, atol=1e-5):
    assert got.shape == want.shape, (got.shape, want.shape)
    torch.testing.assert_close(got.double(), want.double(), rtol=rtol, atol=atol, equal_nan=True)


def test_a_row_reduction_runs_its_whole_tiles_unmasked(tmp_path):
    module, text = compile_source(tmp_path, KL_DIV, "kl.block(x:1); kl.tensorize(x:0, y:64)")
    assert loops(text) == ["for y_iter in range(0, y_iter_full, 64):",
                           "for y_iter in range(y_iter_full, y_size, 64):"]
    assert "y_iter_full = y_size // 64 * 64" in text
    whole, partial = text.split("for y_iter in range(")[1:3]
    assert not re.search(r"\by_mask\b", whole) and "tl.where" not in whole
    assert "mask=x_mask," in whole
    assert re.search(r"\by_mask\b", partial) and "tl.where(y_mask" in partial


@pytest.mark.parametrize("y", [0, 1, 63, 64, 65, 128, 200])
def test_kl_divergence_at_every_remainder(tmp_path, y):
    module, _ = compile_source(tmp_path, KL_DIV, "kl.block(x:1); kl.tensorize(x:0, y:64)")
    gen = torch.Generator().manual_seed(y)
    P = torch.randn(3, y, generator=gen).log_softmax(1)
    T = torch.rand(3, y, generator=gen)
    T[:, ::7] = 0.0  # log(max(0, eps)) * 0
    want = (T.double() * (T.double().clamp_min(1e-10).log() - P.double())).sum(1)
    close(module.kl(P, T, 1e-10), want)
    close(module.reference(P, T, 1e-10), want)


@pytest.mark.parametrize("y", [5, 256, 300])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rmsnorm_stores_its_whole_tiles_unmasked(tmp_path, y, dtype):
    # Both loops are peeled: the sum of squares, and the output's loop with its stores.
    module, text = compile_source(tmp_path, RMSNORM, "out.block(x:1); out.tensorize(x:0, y:128, k:128)")
    assert len([l for l in loops(text) if "_full" in l]) == 4, loops(text)
    gen = torch.Generator().manual_seed(y)
    X, W = torch.randn(4, y, generator=gen).to(dtype), torch.randn(y, generator=gen).to(dtype)
    x, w = X.double(), W.double()
    want = x * torch.rsqrt((x * x).sum(1, keepdim=True) / y + 1e-6) * w
    tol = {torch.float32: (1e-4, 1e-5), torch.bfloat16: (2e-2, 2e-2)}[dtype]
    close(module.out(X, W), want, *tol)


@pytest.mark.parametrize("schedule", ["out.block(x:2); out.tensorize(x:0, y:32)",
                                      "out.tensorize(x:4, y:32)",
                                      "out.tensorize(y:16)"])
def test_blocks_of_rows_and_scalar_rows(tmp_path, schedule):
    module, _ = compile_source(tmp_path, SUM_EXP, schedule)
    X = torch.randn(5, 70)
    close(module.out(X), X.double().exp().sum(1))
    close(module.out(X[:, :64]), X[:, :64].double().exp().sum(1))


def test_non_finite_values_in_the_partial_tile(tmp_path):
    # The dropped lanes of the partial tile must not reach the sum: exp(0) = 1 there.
    module, _ = compile_source(tmp_path, SUM_EXP, "out.block(x:1); out.tensorize(x:0, y:32)")
    X = torch.full((2, 40), -math.inf)
    X[1, 35] = math.nan
    close(module.out(X), torch.tensor([0.0, math.nan], dtype=torch.float64))


def test_a_product_on_tl_dot_is_not_peeled(tmp_path):
    _, text = compile_source(tmp_path, MATMUL, "c.block(m:16, n:16); c.tensorize(m:0, n:0, k:16)")
    assert "_full" not in text


def test_the_peeled_kernel_compiles_for_sm90(tmp_path):
    from hopper import compile_for_hopper
    _, text = compile_source(tmp_path, KL_DIV, "kl.block(x:1); kl.tensorize(x:0, y:1024); kl.num_warps(8)")
    assert "y_iter_full" in text
    out = tmp_path / "prog.py"
    ptx = compile_for_hopper(out, "kl_kernel", "bf16", num_warps=8)["ptx"]
    assert "ld.global" in ptx


@pytest.mark.parametrize("warps, peeled", [(1, False), (2, False), (4, True)])
def test_tiles_of_many_elements_a_thread_are_not_peeled(tmp_path, warps, peeled):
    # 8192 elements: 256 a thread on one warp, 128 on two, 64 on four (the most peeled).
    module, text = compile_source(tmp_path, KL_DIV, f"kl.block(x:1); kl.tensorize(x:0, y:8192); kl.num_warps({warps})")
    assert ("y_iter_full" in text) == peeled
    P, T = torch.randn(2, 9000).log_softmax(1), torch.rand(2, 9000)
    close(module.kl(P, T, 1e-10), (T.double() * (T.double().clamp_min(1e-10).log() - P.double())).sum(1))
