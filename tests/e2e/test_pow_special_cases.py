"""pow's special cases, as IEEE 754 (C99 F.10.4.4) and torch.pow with a tensor exponent define
them, in every form dtc generates: a computed exponent (_dt_pow), an SIn exponent (a scalar, a
Python float under the interpreter), and literal exponents: small integers (repeated products),
0.5 (_dt_pow_half), other fractions (_dt_pow_frac) and larger or non-finite ones (_dt_pow).
Checked against torch.pow in float64, rounded to float32: NaN, infinities and zeros exactly,
signs of zeros included; finite values to a few ulps."""
import math

import numpy as np
import pytest
import torch

from conftest import load_module, run_dtc

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

INF, NAN = math.inf, math.nan
# Every row of the table: ±0, ±1, ±inf, NaN, bases below and above 1 in magnitude, both signs,
# subnormal and large ones.
BASES = [0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, 0.5, -0.5, 2.0, -2.0, 3.5, -3.5, 1e-40, -1e-40,
         1e20, -1e20, 0.999, -1.001]
# Exponents: ±0, ±1, ±inf, NaN, odd and even integers of both signs, non-integers, an odd
# integer too large for a product (9) and a large even one.
EXPONENTS = [0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, 1.5, -2.5,
             9.0, -9.0, 1e10, 0.25]
# Literal exponents and how DT writes them (1 / 0 folds to inf).
LITERALS = {"0": 0.0, "1": 1.0, "-1": -1.0, "2": 2.0, "-2": -2.0, "3": 3.0, "-3": -3.0,
            "7": 7.0, "-8": -8.0, "8": 8.0, "2.0": 2.0, "0.5": 0.5, "-0.5": -0.5, "1.5": 1.5,
            "-2.5": -2.5, "0.25": 0.25, "9": 9.0, "-9": -9.0, "10000000000.0": 1e10,
            "1 / 0": INF, "-1 / 0": -INF, "0 / 0": NAN}


def build(tmp_path, source, name):
    src = tmp_path / f"{name}.dt"
    src.write_text(source)
    out = tmp_path / f"{name}.py"
    result = run_dtc(src, "-o", out)
    assert result.returncode == 0, result.stderr
    return load_module(out)


def want_of(base, exponent):
    """torch.pow in float64 with a tensor exponent (IEEE 754; a Python scalar 0.5 would take
    torch's sqrt shortcut, -0 for -0), rounded to float32."""
    b = torch.as_tensor(base, dtype=torch.float32).double()
    e = torch.as_tensor(exponent, dtype=torch.float32).double()
    return torch.pow(b, e).float()


def check(got, want, base, exponent, ulps):
    got = got.float()
    assert got.shape == want.shape
    base = torch.as_tensor(base).float().expand(want.shape)
    exponent = torch.as_tensor(exponent).float().expand(want.shape)
    special = torch.isnan(want) | torch.isinf(want) | (want == 0)
    exact = (got == want) & (torch.signbit(got) == torch.signbit(want))
    exact |= torch.isnan(got) & torch.isnan(want)
    ulp = torch.from_numpy(np.spacing(np.abs(want.numpy())))
    close = (got - want).abs() <= ulps * ulp
    bad = ~exact & (special | ~close)
    if bool(bad.any()):
        rows = [f"pow({b!r}, {e!r}) = {g!r}, want {w!r}" for b, e, g, w in zip(
            base[bad].tolist(), exponent[bad].tolist(), got[bad].tolist(), want[bad].tolist())]
        pytest.fail(f"{len(rows)} wrong:\n" + "\n".join(rows[:40]))


@pytest.mark.parametrize("schedule", ["", "f.tensorize(x:0)"])
def test_computed_exponent(tmp_path, schedule):
    module = build(tmp_path, "Func f; In A, E; Var x;\nf[x] = pow(A[x], E[x]);\n"
                   + (schedule + ";\n" if schedule else "") + "f.compile();\n", "computed")
    grid_b, grid_e = torch.meshgrid(torch.tensor(BASES), torch.tensor(EXPONENTS), indexing="ij")
    A, E = grid_b.flatten().contiguous(), grid_e.flatten().contiguous()
    want = want_of(A, E)
    check(module.f(A, E), want, A, E, ulps=1)
    check(module.reference(A, E), want, A, E, ulps=1)


def test_scalar_exponent_and_scalar_base(tmp_path):
    module = build(tmp_path, "Func f, g; In A; SIn e; Var x;\nf[x] = pow(A[x], e);\n"
                   "g[x] = pow(e, A[x]);\nf.tensorize(x:0);\nf.compile();\ng.compile();\n",
                   "scalar")
    A = torch.tensor(BASES)
    for e in EXPONENTS:
        check(module.f(A, e=e), want_of(A, e), A, e, ulps=1)
    X = torch.tensor(EXPONENTS)
    # Not -0.0 as a base: under the interpreter a scalar argument is a Python float, and Triton
    # makes a constant of it with -0.0 as +0.0 (a GPU kernel gets the float itself).
    for b in BASES:
        if b == 0 and math.copysign(1.0, b) < 0:
            continue
        check(module.g(X, e=b), want_of(b, X), b, X, ulps=1)


@pytest.mark.parametrize("literal", list(LITERALS))
def test_literal_exponent(tmp_path, literal):
    module = build(tmp_path, f"Func f; In A; Var x;\nf[x] = pow(A[x], {literal});\n"
                   "f.tensorize(x:0);\nf.compile();\n", "literal")
    A = torch.tensor(BASES)
    e = LITERALS[literal]
    # A product x * x * ... of n factors rounds n - 1 times, and 1 / (x^n) once more.
    n = abs(e) if math.isfinite(e) and e == int(e) and abs(e) <= 8 else 1
    check(module.f(A), want_of(A, e), A, e, ulps=max(1, n))
    check(module.reference(A), want_of(A, e), A, e, ulps=max(1, n))
