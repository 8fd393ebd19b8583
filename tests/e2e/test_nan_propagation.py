"""NaN in maxima and minima, as torch computes them: torch.amax, torch.amin, torch.maximum,
torch.minimum, torch.relu and torch.clamp return NaN where an operand is NaN, and so must every
schedule of rmax, rmin, maximum, minimum, relu and clamp: a whole tile, a loop accumulator, split
reductions (partials) and atomic ones. Checked against torch written here, not the module's
reference.

The Triton interpreter computes tl.maximum's and tl.minimum's default (PropagateNan.NONE) with
np.maximum and np.minimum, which propagate NaN, where the GPU returns the other operand (maxnum).
The fixture `gpu_nan_semantics` makes the interpreter compute them as the GPU does, so that these
tests see what a GPU would compute. (tl.max and tl.min skip NaN on both: np.nanmax.)"""
import pathlib

import numpy as np
import pytest
import torch

from conftest import load_module, run_dtc

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

NAN = float("nan")
INF = float("inf")


@pytest.fixture(autouse=True)
def gpu_nan_semantics(monkeypatch):
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    monkeypatch.setattr(builder, "create_maxnumf",
                        lambda self, lhs, rhs: self.binary_op(lhs, rhs, np.fmax))
    monkeypatch.setattr(builder, "create_minnumf",
                        lambda self, lhs, rhs: self.binary_op(lhs, rhs, np.fmin))

    def clampf(self, arg, lo, hi, propagate_nan):
        if propagate_nan == tl.PropagateNan.ALL:
            return self.ternary_op(arg, lo, hi, np.clip)
        return self.ternary_op(arg, lo, hi, lambda v, a, b: np.fmin(np.fmax(v, a), b))

    monkeypatch.setattr(builder, "create_clampf", clampf)


def build(tmp_path, source, schedule, name):
    src = tmp_path / f"{name}.dt"
    src.write_text(source)
    out = tmp_path / f"{name}.py"
    args = [src, "-o", out] + (["--schedule", schedule] if schedule else [])
    result = run_dtc(*args)
    assert result.returncode == 0, result.stderr
    return load_module(out)


def same(got, want):
    """Equal, NaN where torch has NaN (and only there)."""
    assert got.shape == want.shape, (got.shape, want.shape)
    torch.testing.assert_close(got.double(), want.double(), rtol=0, atol=0, equal_nan=True)


# Rows: a NaN first, in the middle, last, alone, everywhere; a negative NaN (its sign bit set);
# NaN beside infinities; and rows without NaN, all negative (the identity of masked lanes must
# not win), infinite or mixed. 7 columns: no tile or block below divides it.
ROWS = [
    [NAN, 1.0, 2.0, 3.0, -4.0, 5.0, 6.0],
    [3.0, NAN, -1.0, 0.5, 2.0, -3.0, 1.0],
    [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, NAN],
    [NAN, NAN, NAN, NAN, NAN, NAN, NAN],
    [-2.0, -NAN, -5.0, -1.0, -3.0, -6.0, -7.0],
    [INF, -INF, NAN, INF, -INF, 0.0, 1.0],
    [-3.0, -5.0, -1.0, -2.0, -8.0, -9.0, -4.0],
    [INF, 1.0, -INF, 2.0, 0.0, -1.0, 3.0],
    [-INF, -INF, -INF, -INF, -INF, -INF, -INF],
    [INF, INF, INF, INF, INF, INF, INF],
    [-0.0, -1.0, -2.0, -3.0, -4.0, -5.0, -0.0],
]

REDUCTION_SCHEDULES = [
    "",                                                 # scalar loop accumulator
    "f.tensorize(y:0)",                                 # one whole tile
    "f.tensorize(y:2)",                                 # tensor accumulator, masked last step
    "f.tensorize(x:4, y:4)",
    "f.block(y:2)",                                     # partials, then a whole tile of them
    "f.block(y:2); f.tensorize(y:0)",
    "f.block(y:4); f.tensorize(y:2)",
    "f.block(y:2); f.atomic(y)",                        # atomics, one scalar per block
    "f.block(y:2); f.tensorize(y:0); f.atomic(y)",
    "f.block(x:4, y:3); f.tensorize(x:0, y:0); f.atomic(y)",  # masked atomics over x
    "f.block(y:1); f.atomic(y)",                        # one element per block
]


@pytest.mark.parametrize("op", ["rmax", "rmin"])
@pytest.mark.parametrize("schedule", REDUCTION_SCHEDULES)
@pytest.mark.parametrize("branch", ["interpreter", "gpu"])
def test_reduction_propagates_nan_in_every_schedule(tmp_path, op, schedule, branch):
    source = f"Func f; In A; Var x; RVar y;\nf[x] = {op}(A[x, y], y);\nf.compile();\n"
    module = build(tmp_path, source, schedule, op)
    if branch == "gpu":
        # The helpers' GPU form (one tl.reduce with a NaN-propagating combine), which the
        # interpreter otherwise skips for its slowness; these kernels call no inline PTX. (A
        # schedule that reduces pairwise in a loop, or atomically, has no such helper.)
        import triton.language as tl
        text = pathlib.Path(module.__file__).read_text()
        if f"_dt_{op[1:]}(" not in text:
            pytest.skip("no tile reduction in this schedule")
        module._DT_PTX = tl.constexpr(True)
    A = torch.tensor(ROWS, dtype=torch.float32)
    want = torch.amax(A, dim=1) if op == "rmax" else torch.amin(A, dim=1)
    same(module.f(A), want)
    same(module.reference(A), want)
    # Transposed: the NaN in every column, the reduction along the other axis of the input.
    same(module.f(A.t().contiguous().t()), want)


ELEMENTWISE = {
    "maximum": ("maximum(A[x], B[x])", lambda A, B: torch.maximum(A, B)),
    "minimum": ("minimum(A[x], B[x])", lambda A, B: torch.minimum(A, B)),
    "relu": ("relu(A[x])", lambda A, B: torch.relu(A)),
    "clamp": ("clamp(A[x], -1, 1)", lambda A, B: torch.clamp(A, -1, 1)),
    "clamp bounds": ("clamp(0.5, A[x], B[x])", lambda A, B: torch.minimum(
        torch.maximum(torch.full_like(A, 0.5), A), B)),
    "maximum scalar": ("maximum(A[x], 0)", lambda A, B: torch.clamp_min(A, 0)),
}


@pytest.mark.parametrize("fn", list(ELEMENTWISE))
@pytest.mark.parametrize("schedule", ["", "f.tensorize(x:4)"])
def test_elementwise_max_min_propagate_nan(tmp_path, fn, schedule):
    expr, oracle = ELEMENTWISE[fn]
    source = f"Func f; In A, B; Var x;\nf[x] = {expr};\nf.compile();\n"
    module = build(tmp_path, source, schedule, "elementwise")
    A = torch.tensor([NAN, 1.0, NAN, -2.0, 3.0, -NAN, INF, -INF, 0.25, -0.0])
    B = torch.tensor([2.0, NAN, NAN, -3.0, 3.5, 1.0, NAN, 5.0, 0.5, 0.0])
    want = oracle(A, B)
    args = (A, B) if "B[x]" in expr else (A,)  # the wrapper takes the inputs the program reads
    same(module.f(*args), want)
    same(module.reference(*args), want)


def test_max_of_accumulated_nan_across_tiles(tmp_path):
    # A NaN in one tile of a tensor accumulator must survive later tiles' maxima, and the final
    # reduction of the accumulator's lanes.
    source = "Func f; In A; Var x; RVar y;\nf[x] = rmax(A[x, y], y) + rmin(A[x, y], y);\nf.compile();\n"
    module = build(tmp_path, source, "f.tensorize(y:4)", "acc")
    A = torch.randn(3, 37)
    A[0, 1] = NAN       # first tile
    A[2, 36] = NAN      # the last, partial tile
    want = torch.amax(A, 1) + torch.amin(A, 1)
    same(module.f(A), want)
