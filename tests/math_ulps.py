"""The float64 oracles, the sweep of float32 arguments and the ulp measure with which the
element-wise helpers dtc writes are checked: under the interpreter by
tests/e2e/test_math_accuracy.py, on a GPU by tests/gpu/math_accuracy.py."""
import math

import numpy as np
import torch

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
    "log": torch.log,  # tl.log: numpy's under the interpreter, libdevice's on the GPU
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
CUTS = [0.29289323, 0.41421357, 0.55, 0.5, 0.70710677, 0.75, 1.0, 2.0, 2.828427, 9.0, 10.1, 17.0,
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


def accuracy_program():
    """A DT program with one Func `f_NAME` per oracle, per literal fraction, and `f_pow` and
    `f_pow_scalar_base`, each in blocks of 4096 elements."""
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
    return "\n".join(src) + "\n"
