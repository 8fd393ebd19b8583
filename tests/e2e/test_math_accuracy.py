"""The accuracy of the element-wise helpers that dtc writes (`_dt_*`, compiler/src/ir/Builtins.cpp),
under the Triton interpreter in float32, against float64 torch: at most MAX_ULPS units in the last
place of the float32 result over the whole domain (small, large, every cut-off the formulas switch
at and around it, subnormals, ±0 with its sign, ±inf, NaN), NaN exactly where the oracle has NaN
and infinities exactly where it overflows.

The oracles are float64 torch, written so that float64 is exact enough: torch's own float64 GELUs
compute 1 + erf and 1 + tanh, which cancel for negative arguments (gelu(-8.4) is -2.2e-16, not 0),
so they are written with erfc and sigmoid here. The helpers build on tl.sin, tl.cos and tl.erf,
which the interpreter computes with numpy (float32 sin and cos within about 1.5 ulps) and
math.erf; the exponential and logarithm they need they compute themselves."""
import math

import numpy as np
import pytest
import torch

from conftest import load_module, run_dtc

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# tan = sin / cos adds the errors of numpy's float32 sin and cos (up to about 1.5 ulps each), the
# rest stay below 3: 4 leaves room for a numpy built for another processor.
MAX_ULPS = 4.0

F = torch.nn.functional
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)

ORACLES = {
    "tanh": torch.tanh,
    "sinh": torch.sinh,
    "cosh": torch.cosh,
    "tan": torch.tan,
    "log1p": torch.log1p,
    "expm1": torch.expm1,
    "log10": torch.log10,
    "erfc": torch.erfc,
    "softplus": F.softplus,  # x itself past 20, as torch's float32 softplus
    "silu": F.silu,
    "gelu": lambda x: torch.where(x < 0, 0.5 * x * torch.erfc(-x / math.sqrt(2.0)), F.gelu(x)),
    "gelu_tanh": lambda x: x * torch.sigmoid(2 * SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)),
    "sign": torch.sign,
    "sqrt_pow": lambda x: torch.pow(x, torch.tensor(0.5, dtype=torch.float64)),
}

# Literal non-integer exponents (_dt_pow_frac).
FRACTIONS = {"pow_frac_1_5": 1.5, "pow_frac_m0_5": -0.5, "pow_frac_third": 1.0 / 3.0,
             "pow_frac_m2_25": -2.25}

# Where the formulas switch: each is swept at and a few ulps around.
CUTS = [0.29289323, 0.41421357, 0.55, 0.5, 0.70710677, 1.0, 2.0, 2.828427, 9.0, 10.1, 17.0,
        20.0, 88.72, 89.4, 90.0, 104.0, 120.0, 150.0, 1e-4, 1e-5, 1.1754944e-38]


def sweep():
    g = torch.Generator().manual_seed(0)
    special = [0.0, -0.0, math.inf, -math.inf, math.nan, 1e-45, 1e-40, 1e-38, 1e-30, 1e-20,
               1e-8, 1e-6, 0.25, 1.5, 3.0, 5.0, 30.0, 50.0, 87.0, 89.0, 100.0, 200.0, 1e4, 1e6,
               1e10, 1e20, 1e30, 3e38, 3.4028235e38, math.pi / 2, math.pi, 3 * math.pi / 2]
    cuts = []
    for c in CUTS:
        base = torch.tensor(c, dtype=torch.float32)
        for step in range(-3, 4):
            cuts.append(torch.nextafter(base, torch.tensor(math.inf if step > 0 else 0.0))
                        if step else base)
        cuts += [base * (1 + 1e-6), base * (1 - 1e-6)]
    cuts = torch.stack(cuts).double()
    magnitudes = torch.exp(torch.rand(12000, generator=g, dtype=torch.float64) * 190 - 103)
    values = torch.cat([torch.tensor(special, dtype=torch.float64), cuts, magnitudes,
                        torch.rand(12000, generator=g, dtype=torch.float64) * 60 - 30,
                        torch.rand(6000, generator=g, dtype=torch.float64) * 4 - 2,
                        torch.rand(3000, generator=g, dtype=torch.float64) * 0.02 - 0.01])
    return torch.cat([values, -values]).float()


def ulp_errors(got, want):
    """|got - want| in ulps of float32 at `want` (at least the smallest subnormal); 0 where they
    are equal (NaN to NaN), inf where NaN, an infinity or a zero's sign differs."""
    got = got.double()
    want32 = want.float()
    ulp = torch.from_numpy(np.spacing(np.abs(want32.numpy()))).double().clamp(min=2.0 ** -149)
    err = (got - want).abs() / ulp
    same = (got == want32.double()) | (got == want) | (torch.isnan(got) & torch.isnan(want))
    err = torch.where(same, torch.zeros_like(err), err)
    special = torch.isnan(want) | torch.isnan(got) | torch.isinf(want32) | torch.isinf(got)
    err = torch.where(special & ~same, torch.full_like(err, math.inf), err)
    zero_sign = (got == 0) & (want32 == 0) & (torch.signbit(got) != torch.signbit(want32))
    return torch.where(zero_sign, torch.full_like(err, math.inf), err)


def assert_accurate(name, x, got, want, bound=MAX_ULPS):
    err = ulp_errors(got, want)
    i = int(err.argmax())
    assert err[i].item() <= bound, (
        f"{name}: {err[i].item():.3f} ulps at x={x[i].item()!r}: got {got[i].item()!r}, "
        f"float64 {want[i].item()!r}")


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    funcs = list(ORACLES) + list(FRACTIONS) + ["pow", "pow_scalar_base"]
    src = ["Func " + ", ".join(f"f_{n}" for n in funcs) + ";", "In A, E;", "SIn s;", "Var x;"]
    for n in ORACLES:
        call = "pow(A[x], 0.5)" if n == "sqrt_pow" else f"{n}(A[x])"
        src.append(f"f_{n}[x] = {call};")
    for n, e in FRACTIONS.items():
        src.append(f"f_{n}[x] = pow(A[x], {e!r});")
    src.append("f_pow[x] = pow(A[x], E[x]);")
    src.append("f_pow_scalar_base[x] = pow(s, E[x]);")
    # One program instance per 4096 elements: under the interpreter, a tensor at a time.
    src += [f"f_{n}.block(x:4096); f_{n}.tensorize(x:0); f_{n}.compile();" for n in funcs]
    path = tmp_path_factory.mktemp("accuracy") / "accuracy.dt"
    path.write_text("\n".join(src) + "\n")
    out = path.with_suffix(".py")
    result = run_dtc(path, "-o", out)
    assert result.returncode == 0, result.stderr
    return load_module(out)


@pytest.mark.parametrize("name", list(ORACLES))
def test_helper_is_accurate_to_a_few_ulps(module, name):
    x = sweep()
    got = getattr(module, f"f_{name}")(x)
    assert_accurate(name, x, got, ORACLES[name](x.double()))


@pytest.mark.parametrize("name", list(FRACTIONS))
def test_pow_with_a_literal_fraction_is_accurate(module, name):
    x = sweep()
    e = torch.tensor(FRACTIONS[name], dtype=torch.float64)
    got = getattr(module, f"f_{name}")(x)
    assert_accurate(name, x, got, torch.pow(x.double(), e))


def test_pow_with_computed_exponents_is_accurate(module):
    g = torch.Generator().manual_seed(1)
    x = sweep()
    # Exponents small and large, integral (odd and even) and not, so that results span the
    # float32 range, overflow and underflow.
    e = torch.cat([torch.rand(x.numel() // 2, generator=g) * 8 - 4,
                   torch.randint(-40, 41, (x.numel() - x.numel() // 2,), generator=g).float()])
    e = e[torch.randperm(e.numel(), generator=g)]
    got = module.f_pow(x, e)
    assert_accurate("pow", x, got, torch.pow(x.double(), e.double()))
    # A large exponent: e log2|v| far from 0, where float32 logarithms would lose ulps.
    base = torch.rand(4000, generator=g) * 1.5 + 0.25
    big = (torch.rand(4000, generator=g) * 2 - 1) * 120 / torch.log2(base).abs().clamp(min=1e-3)
    assert_accurate("pow", base, module.f_pow(base, big), torch.pow(base.double(), big.double()))


@pytest.mark.parametrize("s", [2.0, 0.5, 10.0, 1.0])
def test_helpers_take_a_scalar_argument(module, s):
    # An SIn base is a Python float under the interpreter, not a tensor.
    e = torch.tensor([-3.0, -0.5, 0.0, 0.5, 3.0, 20.5])
    got = module.f_pow_scalar_base(e, s=s)
    assert_accurate("pow", e, got, torch.pow(torch.tensor(s, dtype=torch.float64), e.double()))
