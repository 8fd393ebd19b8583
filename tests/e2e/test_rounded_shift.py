"""The kernel pass round (kir/RoundBeforeShift.h): a product that a maximum is subtracted from,
or that a maximum is, or that a shift under an exponential reads, is rounded on its own
(`_dt_mul_rn`, PTX mul.rn) so that the GPU compiler cannot fuse it into a multiply-add, whose
largest score minus the maximum is a rounding error (a NaN row for scores beyond 2^31 where
PyTorch's row is finite). Compiled for sm_90: no multiply-add in these kernels. Under the
interpreter (which never fuses) the softmaxes match PyTorch's with a row of 1e21."""
import pytest
import torch

from conftest import compile_source
from hopper import compile_for_hopper

SOFTMAX = """Func y, mx, e, s; In X; Var m, n; RVar l;
mx[m] = rmax(X[m, l] * 0.1, l);
e[m, n] = exp(X[m, n] * 0.1 - mx[m]);
s[m] = rsum(e[m, l], l);
y[m, n] = e[m, n] / s[m];
"""
LOG_SOFTMAX = SOFTMAX.replace("y[m, n] = e[m, n] / s[m];",
                              "y[m, n] = X[m, n] * 0.1 - mx[m] - log(s[m]);")
FUSED = "mx.fuse_at(y, m); e.fuse_at(y, m); s.fuse_at(y, m); y.block(m:4); " \
    "y.tensorize(m:0, n:0, l:0); y.compile();"

CASES = {
    # The row in one tile: the maximum is max(x) * 0.1 (maxfirst), a product of its own.
    "fused": (SOFTMAX, FUSED, ["y_kernel"]),
    "log-softmax": (LOG_SOFTMAX, FUSED.replace("e.fuse_at(y, m); ", "e.fuse_at(s, m); "),
                    ["y_kernel"]),
    # Each Func a kernel: the exponential's kernel loads the maximum another kernel stored.
    "unfused": (SOFTMAX, "y.compile();", ["e_kernel", "mx_kernel"]),
}


@pytest.mark.parametrize("case", CASES)
def test_no_multiply_add_in_a_shift(tmp_path, case):
    source, schedule, kernels = CASES[case]
    module, text = compile_source(tmp_path, source + schedule)
    assert "_dt_mul_rn(" in text
    for kernel in kernels:
        ptx = compile_for_hopper(tmp_path / "prog.py", kernel, "fp32", tiles=64)["ptx"]
        assert "fma.rn.f32" not in ptx, kernel
    X = torch.randn(6, 50)
    X[2, 7] = 1e21
    X[3] = -1e21
    X[3, 4] = 1e21
    want = torch.softmax(X.double() * 0.1, -1)
    if case == "log-softmax":
        want = torch.log_softmax(X.double() * 0.1, -1)
    got = module.y(X).double()
    assert not got.isnan().any()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
