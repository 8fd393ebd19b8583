"""The accuracy of the element-wise helpers that dtc writes (`_dt_*`, compiler/src/codegen/TritonMath.cpp),
under the Triton interpreter in float32, against float64 torch: at most MAX_ULPS units in the last
place of the float32 result over the whole domain (small, large, every cut-off the formulas switch
at and around it, subnormals, ±0 with its sign, ±inf, NaN), NaN exactly where the oracle has NaN
and infinities exactly where it overflows.

The oracles are float64 torch, written so that float64 is exact enough: torch's own float64 GELUs
compute 1 + erf and 1 + tanh, which cancel for negative arguments (gelu(-8.4) is -2.2e-16, not 0),
so they are written with erfc and sigmoid here (tests/math_ulps.py). The helpers build on tl.sin
and tl.cos, which the interpreter computes with numpy (float32 sin and cos within about 1.5 ulps);
the exponential and logarithm they need they compute themselves. On a GPU, where a division is a
reciprocal and a product (within 1.5 ulps, where the interpreter rounds once),
tests/gpu/math_accuracy.py measures the same."""

import pytest
import torch

from conftest import load_module, run_dtc
from math_ulps import (FRACTIONS, MAX_ULPS, ORACLES, accuracy_program, sweep,
                       ulp_errors)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def assert_accurate(name, x, got, want, bound=MAX_ULPS):
    err = ulp_errors(got, want)
    i = int(err.argmax())
    assert err[i].item() <= bound, (
        f"{name}: {err[i].item():.3f} ulps at x={x[i].item()!r}: got {got[i].item()!r}, "
        f"float64 {want[i].item()!r}")


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    path = tmp_path_factory.mktemp("accuracy") / "accuracy.dt"
    path.write_text(accuracy_program())
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



def every_float(lo, hi):
    """Every float32 from lo to hi, 0 <= lo < hi."""
    a, b = (torch.tensor([v], dtype=torch.float32).view(torch.int32).item() for v in (lo, hi))
    return torch.arange(a, b, dtype=torch.int32).view(torch.float32)


# Windows where a formula's float32 evaluation loses most (the ends of a polynomial's range,
# where its terms cancel), each scanned float by float: the sweep samples them. gelu's worst
# were past 4.8 ulps near -2.77 before _dt_gelu_near.
WINDOWS = {"gelu": [(-2.8, -2.7), (-0.35, -0.3), (2.7, 2.9)], "erfc": [(1.9, 2.05)],
           "tanh": [(0.7, 0.8), (9.95, 10.05)], "silu": [(-2.0, -1.9)]}


@pytest.mark.parametrize("name", list(WINDOWS))
def test_every_float_of_the_hardest_windows_is_accurate(module, name):
    for lo, hi in WINDOWS[name]:
        x = every_float(abs(hi), abs(lo)) if hi <= 0 else every_float(lo, hi)
        x = -x if hi <= 0 else x
        assert_accurate(name, x, getattr(module, f"f_{name}")(x), ORACLES[name](x.double()))

# PTX instructions per element of sm_90, beyond a copy's: every tl.where computes both its sides,
# so a helper evaluating a polynomial per formula rather than per range pays for each. An
# element-wise kernel with tanh (DyT, GeGLU) or a GEMM's GELU epilogue is bound by these.
# (Before the helpers were made short: gelu 89, erfc 81, tanh 32, silu 38; tanh 28 before it
# used the GPU's exp2.)
MAX_INSTRUCTIONS = {"gelu": 76, "erfc": 70, "tanh": 22, "silu": 36}


def ptx_instructions(ptx):
    return sum(1 for line in ptx.splitlines()
               if line.strip().endswith(";") and not line.strip().startswith((".", "//")))


def test_helpers_stay_short_on_hopper(tmp_path):
    from hopper import compile_for_hopper
    names = ["copy"] + list(MAX_INSTRUCTIONS)
    src = ["Func " + ", ".join(f"f_{n}" for n in names) + ";", "In A;", "Var x;", "f_copy[x] = A[x];"]
    src += [f"f_{n}[x] = {n}(A[x]);" for n in MAX_INSTRUCTIONS]
    # One element a thread: 128 per program instance, 4 warps.
    src += [f"f_{n}.block(x:128); f_{n}.compile();" for n in names]
    path = tmp_path / "short.dt"
    path.write_text("\n".join(src) + "\n")
    out = path.with_suffix(".py")
    result = run_dtc(path, "-o", out)
    assert result.returncode == 0, result.stderr
    count = {n: ptx_instructions(compile_for_hopper(out, f"f_{n}_kernel", "fp32", num_warps=4)["ptx"])
             for n in names}
    cost = {n: count[n] - count["copy"] for n in MAX_INSTRUCTIONS}
    assert all(cost[n] <= MAX_INSTRUCTIONS[n] for n in cost), cost
    # The divisions are the GPU's reciprocal and a product (_dt_div), not div.full's sequence.
    ptx = compile_for_hopper(out, "f_tanh_kernel", "fp32", num_warps=4)["ptx"]
    assert "rcp.approx.ftz.f32" in ptx and "div.full" not in ptx
