"""The kernels' index type: int32 where every index of a call fits, int64 otherwise, decided by
the wrapper once per plan (`_dt_index_type` in the module runtime) and passed to every kernel as
the constexpr `_dt_index`. Both widths compute the same results; the int64 path is forced here by
lowering the module's limit, since tensors past 2**31 elements do not fit a test machine."""
import pathlib

import pytest
import torch
import triton.language as tl

from conftest import compile_dt

PROGRAMS = {
    # element-wise, a row reduction fused in, a split reduction with its temporary, tl.dot
    "fused": ("Func s, f; In A, B; Var x, y; RVar k;\ns[x] = rsum(A[x, k], k);\n"
              "f[x, y] = exp(A[x, y]) * B[y, x] + s[x];\nf.compile();\n",
              "f.block(x:2, y:4); f.tensorize(y:4); s.tensorize(x:0, k:4)"),
    "split": ("Func s; In A; Var x; RVar k;\ns[x] = rsum(A[x, k], k);\ns.compile();\n",
              "s.block(k:4); s.tensorize(k:4)"),
    "atomic": ("Func s; In A; Var x; RVar k;\ns[x] = rmax(A[x, k], k);\ns.compile();\n",
               "s.block(k:4); s.atomic(k); s.tensorize(k:4)"),
    "dot": ("Func c; In A, B; Var m, n; RVar k;\nc[m, n] = rdot(A[m, k], B[k, n], k);\n"
            "c.compile();\n", "c.block(m:16, n:16); c.tensorize(m:0, n:0, k:16); "
                              "c.map(n:ni/2, m, ni)"),
}


def oracle(name, A, B):
    a, b = A.double(), B.double()
    if name == "fused":
        return a.exp() * b.t() + a.sum(1)[:, None]
    if name == "split":
        return a.sum(1)
    if name == "atomic":
        return a.amax(1)
    return a @ b


def build(tmp_path, name):
    source, schedule = PROGRAMS[name]
    src = tmp_path / f"{name}.dt"
    src.write_text(source)
    return compile_dt(tmp_path, src, schedule)


def call(module, name, A, B):
    if name in ("split", "atomic"):
        return module.s(A)
    return (module.f if name == "fused" else module.c)(A, B)


def plans(module):
    return next(v for k, v in vars(module).items() if k.startswith("_dt_plans_"))


@pytest.mark.parametrize("name", PROGRAMS)
def test_both_index_widths_compute_the_same(tmp_path, name, monkeypatch):
    module = build(tmp_path, name)
    assert "_dt_index: tl.constexpr" in pathlib.Path(module.__file__).read_text()
    A, B = torch.randn(20, 20), torch.randn(20, 20)
    want = oracle(name, A, B).float()
    got32 = call(module, name, A, B)
    (plan,) = plans(module).values()
    assert tl.int32 in plan.values
    monkeypatch.setattr(module, "_DT_INDEX32_LIMIT", 0)
    plans(module).clear()
    got64 = call(module, name, A, B)
    (plan,) = plans(module).values()
    assert tl.int64 in plan.values
    tol = 1e-2 if name == "dot" else 1e-4  # TF32 products under the default precision
    torch.testing.assert_close(got32, want, rtol=tol, atol=tol)
    torch.testing.assert_close(got64, want, rtol=tol, atol=tol)


def test_the_index_type_is_decided_per_plan(tmp_path, monkeypatch):
    # The limit at the first call with given metadata holds for its plan; other metadata decide
    # again.
    module = build(tmp_path, "fused")
    A, B = torch.randn(8, 8), torch.randn(8, 8)
    call(module, "fused", A, B)
    monkeypatch.setattr(module, "_DT_INDEX32_LIMIT", 0)
    call(module, "fused", A, B)
    call(module, "fused", A[:6, :6], B[:6, :6])
    kinds = sorted(str(p.values[-3]) for p in plans(module).values())
    assert kinds == ["int32", "int64"]


def test_index_int64_keeps_every_index_in_int64(tmp_path):
    # The scheduling choice: no `_dt_index` parameter, int64 throughout, same results.
    source, schedule = PROGRAMS["dot"]
    src = tmp_path / "dot.dt"
    src.write_text(source)
    module = compile_dt(tmp_path, src, schedule + "; c.index(int64)")
    text = pathlib.Path(module.__file__).read_text()
    assert "_dt_index" not in text.split("def c_kernel(", 1)[1].split("\ndef ", 1)[0]
    assert "c.index(int64)" in module.SCHEDULE
    A, B = torch.randn(20, 20), torch.randn(20, 20)
    torch.testing.assert_close(module.c(A, B), oracle("dot", A, B).float(), rtol=1e-2, atol=1e-2)
