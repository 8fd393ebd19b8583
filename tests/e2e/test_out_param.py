"""The wrappers' `out=` parameter (the PyTorch convention): the result is written into a tensor the
caller owns, with any strides; every element is written, which a NaN-poisoned `out` shows."""
import pytest
import torch

from conftest import load_module, run_dtc

PROGRAM = """Func s, f; In A, B; Var x, y; RVar k;
s[x] = rsum(A[x, k], k);
f[x, y] = exp(A[x, y]) * B[y, x] + s[x];
f.compile(); s.compile();
"""


def build(tmp_path, schedule=None):
    src = tmp_path / "prog.dt"
    src.write_text(PROGRAM)
    out = tmp_path / "prog.py"
    result = run_dtc(src, "-o", out, *(["--schedule", schedule] if schedule else []))
    assert result.returncode == 0, result.stderr
    return load_module(out)


def oracle(A, B):
    a, b = A.double(), B.double()
    s = a.sum(1)
    return a.exp() * b.t() + s[:, None], s


@pytest.mark.parametrize("schedule", [
    None,
    "f.block(x:2, y:4); f.tensorize(y:4); s.block(x:3); s.tensorize(x:0, k:4)",
    "f.block(y:8); f.tensorize(x:0, y:0); s.block(k:4); s.atomic(k)",
    "f.block(x:4, y:4); f.map(y, x); s.block(k:2)",
])
def test_out_is_written_whole(tmp_path, schedule):
    module = build(tmp_path, schedule)
    A, B = torch.randn(7, 7), torch.randn(7, 7)
    want_f, want_s = oracle(A, B)
    for fn, want in ((module.f, want_f), (module.s, want_s)):
        out = torch.full(tuple(want.shape), float("nan"))
        got = fn(A, B, out=out) if fn is module.f else fn(A, out=out)
        assert got is out
        assert not out.isnan().any()
        torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-5)


def test_out_with_strides(tmp_path):
    module = build(tmp_path, "f.block(x:2, y:4); f.tensorize(y:4)")
    A, B = torch.randn(5, 5), torch.randn(5, 5)
    want_f, _ = oracle(A, B)
    column_major = torch.full((5, 5), float("nan")).t().contiguous().t()
    module.f(A, B, out=column_major)
    torch.testing.assert_close(column_major.double(), want_f, rtol=1e-5, atol=1e-5)
    wide = torch.full((5, 12), float("nan"))
    module.f(A, B, out=wide[:, ::2][:, :5])
    torch.testing.assert_close(wide[:, ::2][:, :5].double(), want_f, rtol=1e-5, atol=1e-5)
    assert wide[:, 1::2].isnan().all()  # nothing written between the view's elements


@pytest.mark.parametrize("make, message", [
    (lambda: torch.empty(5, 4), r"out has shape \(5, 4\) but the result has shape \(5, 5\)"),
    (lambda: torch.empty(5, 5, dtype=torch.float64), "out is torch.float64 but the result is"),
    (lambda: torch.empty(5, 1).expand(5, 5), "share memory"),
    (lambda: [[0.0] * 5] * 5, "out must be a torch.Tensor"),
])
def test_bad_out(tmp_path, make, message):
    module = build(tmp_path)
    A, B = torch.randn(5, 5), torch.randn(5, 5)
    with pytest.raises(ValueError, match=message):
        module.f(A, B, out=make())


def test_out_is_a_reserved_name(tmp_path):
    src = tmp_path / "named.dt"
    src.write_text("Func out; In A; Var x;\nout[x] = A[x] * 2;\nout.compile();\n")
    target = tmp_path / "named.py"
    assert run_dtc(src, "-o", target).returncode == 0
    module = load_module(target)
    A = torch.randn(4)
    result = torch.empty(4)
    module.out_(A, out=result)
    torch.testing.assert_close(result, A * 2)
