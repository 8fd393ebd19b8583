"""The `evict` kernel pass (compiler/src/kir/KeepReReadsInCache.cpp): a loop's loads of an input
that a later statement reads again carry `eviction_policy="evict_last"`, so a row reduction's
second pass over its row finds it in L2; nothing else does. The hint changes no value: under the
interpreter a hinted kernel computes what the same program with whole-row tiles (no loop, no
hint) and the module's reference compute."""
import re

import pytest
import torch

from conftest import MATMUL, compile_source

RMSNORM = """Func out;
In X, W;
Var x, y;
RVar k;
out[x, y] = X[x, y] * rsqrt(rsum(X[x, k] * X[x, k], k) / len(y) + 1e-6) * W[y];
out.compile();
"""

LAYERNORM = """Func out, mean, rstd;
In X, W, B;
Var x, y;
RVar k;
mean[x] = rsum(X[x, k], k) / len(k);
rstd[x] = rsqrt(rsum(pow(X[x, k] - mean[x], 2), k) / len(k) + 1e-5);
out[x, y] = (X[x, y] - mean[x]) * rstd[x] * W[y] + B[y];
mean.fuse_at(out, x);
rstd.fuse_at(out, x);
out.compile();
"""

HINT = 'eviction_policy="evict_last"'


def without_full_tiles(text):
    """The text without the loops over whole tiles that the `peel` pass puts before a loop's
    partial tile (`for y_iter in range(0, y_iter_full, 64):`): each is that loop's twin."""
    out, skip = [], None
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip())
        if skip is not None and (not line.strip() or indent > skip):
            continue
        skip = None
        if re.match(r"\s+for \w+ in range\([^,]+, \w+_full(_\d+)?, ", line):
            skip = indent
            continue
        out.append(line)
    return "\n".join(out)


def loads(text):
    """Each tl.load of the kernels: (the tensor it reads, hinted or not), in order, those of
    the loops over whole tiles left out (each is a twin of the loop after it, hints included:
    test_the_whole_tiles_loop_has_its_twins_hints)."""
    return [(m.group(1), HINT in m.group(0))
            for m in re.finditer(r"tl\.load\((\w+)_ptr \+ [^\n]*", without_full_tiles(text))]


def run(module, sizes, dtype=torch.float32):
    fn = module.out
    inputs = module.make_inputs_out(sizes, dtype=dtype, seed=3)
    return fn(*inputs), module.reference_out(*inputs), inputs


def test_the_first_pass_over_a_row_keeps_it_in_cache(tmp_path):
    module, text = compile_source(tmp_path, RMSNORM,
                                  "out.block(x:2); out.tensorize(x:0, y:64, k:64)")
    assert loads(text) == [("X", True), ("X", False), ("W", False)]
    whole, whole_text = compile_source(tmp_path, RMSNORM,
                                       "out.block(x:2); out.tensorize(x:0, y:0, k:0)", name="whole")
    assert HINT not in whole_text
    sizes = {"x": 5, "y": 300}
    got, want, inputs = run(module, sizes)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got, whole.out(*inputs), rtol=1e-5, atol=1e-5)


def test_every_pass_but_the_last_keeps_the_row(tmp_path):
    module, text = compile_source(tmp_path, LAYERNORM,
                                  "mean.fuse_at(out, x); rstd.fuse_at(out, x); out.block(x:1); "
                                  "out.tensorize(x:0, y:128, k:128)")
    assert loads(text) == [("X", True), ("X", True), ("X", False), ("W", False), ("B", False)]
    for dtype in (torch.float32, torch.bfloat16):
        got, want, _ = run(module, {"x": 3, "y": 700}, dtype)
        torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("schedule", [
    "out.block(x:1); out.tensorize(x:0, y:0, k:0)",  # one pass: nothing is read again
    "out.block(x:1); out.tensorize(x:0, y:0, k:64)",  # the loop's reads are not the output's
])
def test_a_row_read_once_has_no_hint(tmp_path, schedule):
    src = RMSNORM.replace("X[x, y] * rsqrt", "W[y] * rsqrt")
    _, text = compile_source(tmp_path, src, schedule)
    assert HINT not in text


def test_a_matrix_product_has_no_hint(tmp_path):
    _, text = compile_source(tmp_path, MATMUL, "c.block(m:32, n:32); c.tensorize(m:0, n:0, k:16)")
    assert HINT not in text


def test_a_gather_is_no_second_pass(tmp_path):
    """Cross-entropy's shape: the row's sum, then one element of the row at a position an
    integer input gives. The sum's loop is the last pass over the row: no hint."""
    src = """Func out;
In P;
In T: int(y);
Var x;
RVar y;
out[x] = rsum(P[x, y], y) - P[x, T[x]];
out.compile();
"""
    module, text = compile_source(tmp_path, src, "out.block(x:1); out.tensorize(x:0, y:64)")
    assert loads(text) == [("P", False), ("T", False), ("P", False)]
    sizes = {"x": 3, "y": 200}
    inputs = module.make_inputs_out(sizes, dtype=torch.float32, seed=3)
    torch.testing.assert_close(module.out(*inputs), module.reference_out(*inputs))


def test_a_tensor_the_kernel_writes_is_not_hinted(tmp_path):
    """A Func fused into its consumer through a temporary the kernel writes and reads back
    twice: only inputs are hinted."""
    src = """Func out, t;
In X;
Var x, y;
RVar k;
t[x, y] = sigmoid(X[x, y]);
out[x, y] = t[x, y] * rsum(t[x, k], k);
t.fuse_at(out, x);
out.compile();
"""
    module, text = compile_source(tmp_path, src)
    assert "_fuse_ptr" in text and HINT not in text
    inputs = module.make_inputs_out({"x": 3, "y": 50}, dtype=torch.float32, seed=3)
    torch.testing.assert_close(module.out(*inputs), module.reference_out(*inputs))


def test_the_whole_tiles_loop_has_its_twins_hints(tmp_path):
    _, text = compile_source(tmp_path, RMSNORM, "out.block(x:2); out.tensorize(x:0, y:64, k:64)")
    every = [(m.group(1), HINT in m.group(0))
             for m in re.finditer(r"tl\.load\((\w+)_ptr \+ [^\n]*", text)]
    # Each loop's whole tiles, then its partial tile.
    assert every == [("X", True), ("X", True), ("X", False), ("W", False), ("X", False), ("W", False)]
