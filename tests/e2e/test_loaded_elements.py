"""How many elements of each input a kernel loads, counted under the Triton interpreter.

A row that a program reads twice under two labels (`X[x, k]` for a reduction, `X[x, y]` for the
output) is loaded once when both labels are one whole tile: the reduction runs over the output's
own label (lower/FoldTiedReductions.h), so both accesses are one. Each count is checked together
with the values against a PyTorch oracle."""
import contextlib

import pytest
import torch
from triton.runtime import interpreter

from conftest import compile_source

RMS_NORM = """Func out; In X, W; SIn Eps; Var x, y; RVar k;
out[x, y] = X[x, y] * rsqrt(rsum(pow(X[x, k], 2), k) / len(y) + Eps) * W[y];
out.compile();
"""

LAYER_NORM = """Func out; In X, W, B; SIn Eps; Var x, y; RVar k, j;
out[x, y] = (X[x, y] - rsum(X[x, k], k) / len(y)) *
    rsqrt(rsum(pow(X[x, j] - rsum(X[x, k], k) / len(y), 2), j) / len(y) + Eps) * W[y] + B[y];
out.compile();
"""


@contextlib.contextmanager
def loaded_elements(*tensors):
    """Counts the elements the interpreter loads in range of each tensor's storage: the list
    yielded holds the counts once the block ends."""
    counts = [0] * len(tensors)
    spans = [(t.data_ptr(), t.data_ptr() + t.untyped_storage().nbytes()) for t in tensors]
    original = interpreter.InterpreterBuilder.create_masked_load

    def counting(self, ptrs, mask, *args, **kwargs):
        addresses = ptrs.data[mask.data]
        for i, (lo, hi) in enumerate(spans):
            counts[i] += int(((addresses >= lo) & (addresses < hi)).sum())
        return original(self, ptrs, mask, *args, **kwargs)

    interpreter.InterpreterBuilder.create_masked_load = counting
    try:
        yield counts
    finally:
        interpreter.InterpreterBuilder.create_masked_load = original


def rms_norm(X, W, eps):
    X = X.double()
    return X * torch.rsqrt((X * X).mean(dim=1, keepdim=True) + eps) * W.double()


def layer_norm(X, W, B, eps):
    return torch.nn.functional.layer_norm(X.double(), (X.shape[1],), W.double(), B.double(), eps)


@pytest.mark.parametrize("schedule, programs", [
    ("out.block(x:1); out.tensorize(x:0, y:0, k:0)", 8),
    ("out.block(x:4); out.tensorize(x:0, y:0, k:0)", 2),
    ("out.tensorize(y:0, k:0)", 1),
])
def test_rms_norm_with_whole_row_tiles_loads_each_row_once(tmp_path, schedule, programs):
    module, text = compile_source(tmp_path, RMS_NORM, schedule + "; out.compile()")
    assert "tl.reshape" not in text and text.count("tl.load(X_ptr") == 1
    X, W = torch.randn(8, 512), torch.randn(512)
    with loaded_elements(X, W) as counts:
        got = module.out(X, W, 1e-5)
    x_count, w_count = counts
    torch.testing.assert_close(got.double(), rms_norm(X, W, 1e-5), rtol=1e-4, atol=1e-4)
    assert x_count == X.numel(), "X loaded more than once"
    assert w_count == programs * 512  # W once per program


def test_rms_norm_whose_output_is_blocked_loads_the_row_for_the_reduction_and_each_block(tmp_path):
    # `y` blocked: an output tile is a part of the row, not the elements the reduction read.
    module, text = compile_source(tmp_path, RMS_NORM,
                         "out.block(x:1, y:128); out.tensorize(x:0, y:0, k:0); out.compile()")
    assert "tl.reshape" not in text
    X, W = torch.randn(8, 512), torch.randn(512)
    with loaded_elements(X, W) as counts:
        got = module.out(X, W, 1e-5)
    x_count = counts[0]
    torch.testing.assert_close(got.double(), rms_norm(X, W, 1e-5), rtol=1e-4, atol=1e-4)
    # 4 blocks of y per row, each reducing the whole row and loading its own part
    assert x_count == 4 * X.numel() + X.numel()


def test_layer_norm_reads_its_row_once_for_three_accesses(tmp_path):
    module, text = compile_source(tmp_path, LAYER_NORM,
                         "out.block(x:1); out.tensorize(x:0, y:0, k:0, j:0); out.compile()")
    X, W, B = torch.randn(8, 300) * 4 + 1, torch.randn(300), torch.randn(300)
    with loaded_elements(X, W, B) as counts:
        got = module.out(X, W, B, 1e-5)
    x_count, w_count, b_count = counts
    torch.testing.assert_close(got.double(), layer_norm(X, W, B, 1e-5), rtol=1e-4, atol=1e-4)
    assert x_count == X.numel(), text
    assert w_count == b_count == X.numel()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_reused_row_keeps_the_inputs_dtype_semantics(tmp_path, dtype):
    module, _ = compile_source(tmp_path, RMS_NORM, "out.block(x:1); out.tensorize(x:0, y:0, k:0); out.compile()")
    X, W = torch.randn(3, 70).to(dtype), torch.randn(70).to(dtype)
    got = module.out(X, W, 1e-6)
    assert got.dtype == dtype
    torch.testing.assert_close(got.double(), rms_norm(X, W, 1e-6), rtol=2e-2, atol=2e-2)
