"""Programs nobody tuned for: each class of silent wrong answer, crash or unimportable module once
found in the compiler, checked against torch written by hand here (not the module's reference,
which the same compiler prints). The module's reference is checked against the same oracle."""
import itertools
import math

import pytest
import torch

from conftest import load_module, run_dtc

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def build(tmp_path, source, schedule=None, name="prog"):
    src = tmp_path / f"{name}.dt"
    src.write_text(source)
    out = tmp_path / f"{name}.py"
    args = [src, "-o", out] + (["--schedule", schedule] if schedule else [])
    result = run_dtc(*args)
    assert result.returncode == 0, result.stderr
    return load_module(out)


def rejected(tmp_path, source, schedule=None):
    """Compiles a program that must be rejected with a diagnostic (exit 1, no crash)."""
    src = tmp_path / "bad.dt"
    src.write_text(source)
    args = [src, "--check"] + (["--schedule", schedule] if schedule else [])
    result = run_dtc(*args)
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert "internal" not in result.stderr and "report this" not in result.stderr
    return result.stderr


def close(got, want, rtol=1e-4, atol=1e-4):
    assert got.shape == want.shape, (got.shape, want.shape)
    torch.testing.assert_close(got.double(), want.double(), rtol=rtol, atol=atol, equal_nan=True)


# ----------------------------------------------------------------------------------------------
# 1. rdot on tl.dot follows the labels, whatever their order.

RDOT_SCHEDULES = {
    "tl.dot whole": "c.tensorize(m:0, n:0, k:0)",
    "tl.dot blocked": "c.block(m:16, n:16); c.tensorize(m:0, n:0, k:16)",
    "multiply-sum": "c.tensorize(m:0, k:0)",
}


@pytest.mark.parametrize("out_mn", [True, False], ids=["c[m,n]", "c[n,m]"])
@pytest.mark.parametrize("a_mk", [True, False], ids=["A[m,k]", "A[k,m]"])
@pytest.mark.parametrize("b_kn", [True, False], ids=["B[k,n]", "B[n,k]"])
@pytest.mark.parametrize("a_first", [True, False], ids=["rdot(A,B)", "rdot(B,A)"])
def test_rdot_label_orders(tmp_path, out_mn, a_mk, b_kn, a_first):
    a = "A[m, k]" if a_mk else "A[k, m]"
    b = "B[k, n]" if b_kn else "B[n, k]"
    out = "c[m, n]" if out_mn else "c[n, m]"
    operands = f"{a}, {b}" if a_first else f"{b}, {a}"
    source = f"Func c; In A, B; Var m, n; RVar k;\n{out} = rdot({operands}, k);\nc.compile();\n"
    m_, n_, k_ = 17, 20, 18
    gen = torch.Generator().manual_seed(1)
    A = torch.randn((m_, k_) if a_mk else (k_, m_), generator=gen)
    B = torch.randn((k_, n_) if b_kn else (n_, k_), generator=gen)
    product = (A.double() if a_mk else A.double().t()) @ (B.double() if b_kn else B.double().t())
    want = product if out_mn else product.t()
    for label, schedule in RDOT_SCHEDULES.items():
        module = build(tmp_path, source, schedule, name="c_" + label.replace(" ", "_").replace("-", "_"))
        close(module.c(A, B), want, rtol=1e-2, atol=1e-2)  # TF32 products on tl.dot
        close(module.reference(A, B), want)


# ----------------------------------------------------------------------------------------------
# 2. fuse_at through reads whose labels are in another order.

def test_fuse_at_transposed_read_rejected(tmp_path):
    err = rejected(tmp_path, "Func t, o; In A; Var x, y;\nt[x, y] = exp(A[x, y]);\n"
                             "o[x, y] = t[y, x];\nt.fuse_at(o, x);\no.compile();\n")
    assert "bad.dt:4:1: error: `t` is fused into `o` at `x`" in err and "t[y, x]" in err


def test_fuse_at_read_along_reduction_label_rejected(tmp_path):
    err = rejected(tmp_path, "Func t, o; In A; Var x, y; RVar k;\nt[x, y] = exp(A[x, y]);\n"
                             "o[x] = rsum(t[k, x], k);\no.tensorize(k:0);\nt.fuse_at(o, x);\n"
                             "o.compile();\n")
    assert "t[k, x]" in err


def test_fuse_at_transposed_read_inlined_is_right(tmp_path):
    # Fully tensorized inside the fuse level: t is inlined, which is right for any read.
    module = build(tmp_path, "Func t, o; In A; Var x, y;\nt[x, y] = exp(A[x, y]);\n"
                             "o[x, y] = t[y, x];\nt.fuse_at(o, x);\no.tensorize(y:0);\no.compile();\n")
    A = torch.randn(5, 5)
    close(module.o(A), A.double().exp().t())


@pytest.mark.parametrize("schedule", [
    "", "o.block(y:2, z:4)", "o.block(y:2, z:4); o.tensorize(z:2)",
    "o.block(x:2, y:2, z:4); o.tensorize(y:2)"])
def test_fuse_at_inner_dimension_read_with_other_label(tmp_path, schedule):
    # t's inner dimension y is read with z: the temporary must hold it whole.
    source = ("Func t, o; In A; Var x, y, z;\nt[x, y] = exp(A[x, y]);\n"
              "o[x, y, z] = t[x, z] + A[x, y];\no.compile();\n")
    module = build(tmp_path, source, (schedule + "; " if schedule else "") + "t.fuse_at(o, x)")
    A = torch.randn(5, 6)
    want = A.double().exp()[:, None, :] + A.double()[:, :, None]
    close(module.o(A), want)
    close(module.reference(A), want)


TWO_PRODUCERS = ("Func f, h, g; In A, B; Var x, y, z;\nf[x, y, z] = exp(A[x, z]) + B[y];\n"
                 "h[x, y, z] = f[x, y, z] * 2;\ng[x, y, z] = h[x, y, z] + 1;\ng.compile();\n")


@pytest.mark.parametrize("schedule", [
    "g.tensorize(z:0); f.fuse_at(g, y); h.fuse_at(g, x)",  # f inline inside h's temporary
    "g.block(y:2); g.tensorize(z:0); f.fuse_at(g, y); h.fuse_at(g, x)",
    "f.fuse_at(g, x); h.fuse_at(g, x)",  # two temporaries, the reader after its producer
    "f.fuse_at(g, x); h.fuse_at(g, y)",
    "f.fuse_at(h, y); h.fuse_at(g, x)",
    "f.fuse_at(h, x); h.fuse_at(g, x)",
])
def test_producers_computed_in_one_kernel(tmp_path, schedule):
    module = build(tmp_path, TWO_PRODUCERS, schedule)
    A, B = torch.randn(3, 4), torch.randn(5)
    want = (A.double().exp()[:, None, :] + B.double()[None, :, None]) * 2 + 1
    close(module.g(A, B), want)


def test_producer_temporary_read_before_it_is_computed_rejected(tmp_path):
    # h fills its temporary once per x, reading f, which is computed only once per y inside.
    err = rejected(tmp_path, TWO_PRODUCERS, "f.fuse_at(g, y); h.fuse_at(g, x)")
    assert "`h` is computed into a temporary at `x`, outside `y`" in err


def test_producer_reads_other_temporary_transposed_rejected(tmp_path):
    err = rejected(tmp_path, "Func f, h, g; In A; Var x, y;\nf[x, y] = exp(A[x, y]);\n"
                             "h[x, y] = f[y, x] * 2 + A[x, y];\ng[x, y] = h[x, y] + 1;\n"
                             "f.fuse_at(g, x);\nh.fuse_at(g, x);\ng.compile();\n")
    assert "but `h` reads `f[y, x]`" in err


# ----------------------------------------------------------------------------------------------
# 3. Labels that index a Func are size-checked like labels that index an input.

TRANSPOSED_SUM = ("Func t, o; In A; Var x, y; RVar k;\nt[x, y] = exp(A[x, y]);\n"
                  "o[x] = rsum(t[k, x], k);\no.compile();\n")


def test_func_index_sizes_checked(tmp_path):
    module = build(tmp_path, TRANSPOSED_SUM)
    A = torch.randn(5, 5)
    close(module.o(A), A.double().exp().sum(0))
    for fn in (module.o, module.reference):
        with pytest.raises(ValueError, match=r"size of k disagrees: A.shape\[0\] is 5 but k=9"):
            fn(A, k=9)
        with pytest.raises(ValueError, match=r"A.shape\[1\] is 3 but A.shape\[0\] is 5 "
                                             r"\(tied by t\[k, x\] reading t\[x, y\]\)"):
            fn(torch.randn(5, 3))
    A, = module.make_inputs({"x": 4})
    assert A.shape == (4, 4)


def test_func_index_sizes_checked_with_fusion(tmp_path):
    module = build(tmp_path, TRANSPOSED_SUM, "o.tensorize(k:0, y:0); t.fuse_at(o, x)")
    A = torch.randn(6, 6)
    close(module.o(A), A.double().exp().sum(0))
    with pytest.raises(ValueError, match="disagrees"):
        module.o(torch.randn(6, 4))


# ----------------------------------------------------------------------------------------------
# 4. make_inputs when one input dimension carries two labels.

def test_make_inputs_two_labels_one_dimension(tmp_path):
    module = build(tmp_path, "Func s, f; In X; Var x, y; RVar k;\ns[x] = rsum(X[x, k], k);\n"
                             "f[x, y] = X[x, y] / s[x];\nf.compile();\n")
    X, = module.make_inputs({"x": 5, "y": 7})
    assert X.shape == (5, 7)
    close(module.f(X), X.double() / X.double().sum(1, keepdim=True))


def test_make_inputs_symmetric_read(tmp_path):
    module = build(tmp_path, "Func s; In A; Var x, y;\ns[x, y] = A[x, y] + A[y, x];\ns.compile();\n")
    A, = module.make_inputs({"x": 6})
    assert A.shape == (6, 6)
    close(module.s(A), A.double() + A.double().t())


@pytest.mark.parametrize("schedule", [None, "ln.tensorize(c:0); mu.fuse_at(ln, r); var.fuse_at(ln, r); mu.tensorize(j:0); var.tensorize(i:0)"])
def test_layer_norm_with_mean_and_variance_funcs(tmp_path, schedule):
    module = build(tmp_path, "Func mu, var, ln; In X; Var r, c; RVar j, i;\n"
                             "mu[r] = rsum(X[r, j], j) / len(j);\n"
                             "var[r] = rsum(pow(X[r, i] - mu[r], 2), i) / len(i);\n"
                             "ln[r, c] = (X[r, c] - mu[r]) / sqrt(var[r] + 0.00001);\n"
                             "ln.compile();\n", schedule)
    X, = module.make_inputs({"r": 5, "c": 9})
    assert X.shape == (5, 9)
    want = torch.nn.functional.layer_norm(X.double(), (9,), eps=1e-5)
    close(module.ln(X), want)
    close(module.reference(X), want)
    with pytest.raises(ValueError, match="j indexes the same input dimension as c"):
        module.make_inputs({"r": 5, "c": 9, "j": 3})


# ----------------------------------------------------------------------------------------------
# 5. pow as torch computes it: NaN for a negative base and a non-integer exponent.

POW = ("Func f; In A; SIn e; Var x, y;\n"
       "f[x, y] = pow(A[x, y], 2.5) + pow(A[x, y], 0.5) + pow(A[x, y], e) + pow(A[x, y], 11)"
       " + pow(A[x, y], -9) + pow(A[x, y], A[y, x]) + pow(-2, 3);\nf.compile();\n")


@pytest.mark.parametrize("schedule", [None, "f.tensorize(x:0, y:0)",
                                      "f.block(x:2, y:4); f.tensorize(y:4)"])
def test_pow_non_integer_exponents(tmp_path, schedule):
    module = build(tmp_path, POW, schedule)
    A = torch.randn(6, 6, generator=torch.Generator().manual_seed(3))
    A[0, 0], A[1, 1], A[2, 2], A[3, 3] = 0.0, 1.0, -1.0, 2.0
    a = A.double()
    for e in (1.5, 2.0, 3.0, 0.0, -1.5):
        want = (a.pow(2.5) + a.pow(0.5) + a.pow(e) + a.pow(11) + a.pow(-9) + a.pow(a.t()) - 8)
        got = module.f(A, e)
        assert torch.equal(got.isnan(), want.isnan())
        finite = want.isfinite()
        torch.testing.assert_close(got.double()[finite], want[finite], rtol=1e-4, atol=1e-4)
        assert torch.equal(module.reference(A, e).isnan(), want.isnan())


# ----------------------------------------------------------------------------------------------
# 6. Literal division by zero is IEEE arithmetic.

def test_literal_division_by_zero(tmp_path):
    module = build(tmp_path, "Func p, n, z, l; In A; Var x;\np[x] = A[x] * 0 + 1 / 0;\n"
                             "n[x] = A[x] * 0 - 1 / 0;\nz[x] = A[x] * 0 + 0 % 0;\n"
                             "l[x] = A[x] * 0 + log(0) + 0 / 0 * 0;\n"
                             "p.compile(); n.compile(); z.compile(); l.compile();\n")
    A = torch.randn(4)
    for name, want in (("p", math.inf), ("n", -math.inf), ("z", math.nan), ("l", math.nan)):
        for fn in (getattr(module, name), getattr(module, "reference_" + name)):
            close(fn(A), torch.full((4,), want, dtype=torch.float64))


# ----------------------------------------------------------------------------------------------
# 7. Empty reductions yield the identity: 0 for rsum and rdot, -inf for rmax, inf for rmin.

EMPTY = ("Func s, mx, mn, d; In A, B; Var x, y; RVar k;\ns[x] = rsum(A[x, k], k);\n"
         "mx[x] = rmax(A[x, k], k);\nmn[x] = rmin(A[x, k], k);\nd[x, y] = rdot(A[x, k], B[k, y], k);\n"
         "s.compile(); mx.compile(); mn.compile(); d.compile();\n")


@pytest.mark.parametrize("schedule", [
    None,
    "s.tensorize(k:0); mx.tensorize(k:0); mn.tensorize(k:0); d.tensorize(x:0, y:0, k:0)",
    "s.block(k:4); s.atomic(k); mx.block(k:2); mx.tensorize(k:0); mn.block(k:4); "
    "d.block(x:16, y:16); d.tensorize(x:0, y:0, k:16)",
])
@pytest.mark.parametrize("k", [0, 3])
def test_empty_reductions(tmp_path, schedule, k):
    module = build(tmp_path, EMPTY, schedule)
    A, B = torch.randn(5, k), torch.randn(k, 6)
    a = A.double()
    cases = {"s": a.sum(1), "d": a @ B.double(),
             "mx": a.amax(1) if k else torch.full((5,), -math.inf, dtype=torch.float64),
             "mn": a.amin(1) if k else torch.full((5,), math.inf, dtype=torch.float64)}
    for name, want in cases.items():
        args = (A, B) if name == "d" else (A,)
        close(getattr(module, name)(*args), want, rtol=1e-2, atol=1e-2)
        close(getattr(module, "reference_" + name)(*args), want)


# ----------------------------------------------------------------------------------------------
# 8. Long expressions: what dtc accepts imports and runs; past the limits, a diagnostic.

def chain_of_fusions(n):
    lines = ["Func " + ", ".join(f"t{i}" for i in range(n)) + ";", "In A; Var x;",
             "t0[x] = exp(A[x]);"]
    lines += [f"t{i}[x] = 0.5 * t{i - 1}[x] + 1;" for i in range(1, n)]
    lines += [f"t{i}.fuse_at(t{i + 1}, x);" for i in range(n - 1)]
    return "\n".join(lines + [f"t{n - 1}.compile();", ""])


def test_long_flat_sum_imports_and_runs(tmp_path):
    module = build(tmp_path, "Func f; In A; Var x;\nf[x] = " + " + ".join(["A[x]"] * 999)
                   + ";\nf.compile();\n")
    A = torch.randn(5)
    close(module.f(A), 999 * A.double(), rtol=1e-4, atol=1e-3)
    close(module.reference(A), 999 * A.double(), rtol=1e-4, atol=1e-3)


def test_long_chain_of_fusions_imports_and_runs(tmp_path):
    module = build(tmp_path, chain_of_fusions(250))
    A = torch.randn(5)
    want = A.double().exp()
    for _ in range(249):
        want = 0.5 * want + 1
    close(module.t249(A), want)
    close(module.reference(A), want)


def test_too_long_expressions_are_diagnostics(tmp_path):
    err = rejected(tmp_path, "Func f; In A; Var x;\nf[x] = " + " + ".join(["A[x]"] * 8000)
                   + ";\nf.compile();\n")
    assert "more than 1000 nested operations" in err
    err = rejected(tmp_path, chain_of_fusions(600))
    assert "operations deep, more than the 1000" in err


# ----------------------------------------------------------------------------------------------
# 9. The command line refuses what it cannot mean.

@pytest.mark.parametrize("args, message", [
    (["DIR"], "is a directory"),
    (["FILE", "--schedule", "f.block(x:2)", "--schedule", "f.block(x:4)"],
     "`--schedule` is given more than once"),
    (["FILE", "--schedule=f.block(x:2)", "--schedule=f.block(x:4)"], "more than once"),
    (["FILE", "-o", "a.py", "-o", "b.py"], "`--output` is given more than once"),
    (["FILE", "--check", "--canonical"], "--check excludes --canonical"),
    (["FILE", "--emit=ir", "--canonical"], "excludes"),
    (["FILE", "--check", "--check"], "more than once"),
])
def test_cli_rejects_ambiguous_commands(tmp_path, args, message):
    src = tmp_path / "f.dt"
    src.write_text("Func f; In A; Var x;\nf[x] = A[x];\nf.compile();\n")
    args = [str(src) if a == "FILE" else str(tmp_path) if a == "DIR" else a for a in args]
    result = run_dtc(*args)
    assert result.returncode == 2, result
    assert message in result.stderr
    assert not (tmp_path / "a.py").exists() and not (tmp_path / "b.py").exists()


def test_cli_empty_file_is_an_empty_program(tmp_path):
    src = tmp_path / "empty.dt"
    src.write_text("")
    result = run_dtc(src, "--check")
    assert result.returncode == 0 and "no Func is compiled" in result.stderr


# ----------------------------------------------------------------------------------------------
# Found by the differential fuzzer (tests/fuzz): comparisons used as numbers, and len() of a
# label that nothing else uses.

COMPARISONS = ("Func f0, f1; In I0; Var u; RVar m, x, r;\nf0[u, m, x] = -(1 >= I0[m]);\n"
               "f1[r, x] = 1 - (1 < I0[r]) + rsum(I0[r] > 0, r) + exp(I0[r] < 0.5)"
               " + where(I0[r] > 0, 1, 2) + where(I0[r], 3, 4);\nf0.compile(); f1.compile();\n")


@pytest.mark.parametrize("schedule", [None, "f0.tensorize(m:0, x:0); f1.tensorize(r:0, x:0)",
                                      "f1.block(r:2); f1.tensorize(r:0)"])
def test_comparisons_count_as_zero_or_one(tmp_path, schedule):
    module = build(tmp_path, COMPARISONS, schedule)
    I0 = torch.randn(5)
    I0[0] = 0.0
    a = I0.double()
    want0 = (-(1 >= a).double())[None, :, None].expand(2, 5, 3)
    want1 = (1 - (1 < a).double() + (a > 0).double().sum() + (a < 0.5).double().exp()
             + torch.where(a > 0, 1.0, 2.0) + torch.where(a != 0, 3.0, 4.0))[:, None].expand(5, 3)
    for fn0, fn1 in ((module.f0, module.f1), (module.reference_f0, module.reference_f1)):
        close(fn0(I0, u=2, x=3), want0)
        close(fn1(I0, x=3), want1)


def test_len_of_a_label_nothing_else_uses(tmp_path):
    module = build(tmp_path, "Func f; In A; Var y; RVar m;\nf[m] = len(y) + A[m];\nf.compile();\n")
    A = torch.randn(5)
    for fn in (module.f, module.reference):
        close(fn(A, y=7), A.double() + 7)
        with pytest.raises(ValueError, match=r"the size of y cannot be inferred"):
            fn(A)
    assert module.SIZE_KEYWORDS == {"y": "y", "m": "m"}


def test_comparison_of_literals(tmp_path):
    module = build(tmp_path, "Func f, g; In A; Var x;\nf[x] = A[x] + (1 <= 2) * 2 + sin(1 <= 1);\n"
                             "g[x] = where(1 > 2, A[x], 3) + A[x];\nf.compile(); g.compile();\n")
    A = torch.randn(4)
    for fn, want in ((module.f, A.double() + 2 + math.sin(1)), (module.g, A.double() + 3)):
        close(fn(A), want)


@pytest.mark.parametrize("schedule", [None, "f.tensorize(x:0)"])
def test_modulo_of_scalars_is_fmod(tmp_path, schedule):
    module = build(tmp_path, "Func f; In A; SIn s; Var x;\n"
                             "f[x] = A[x] * 0 + (s - 1) % 1 + (0 - len(x)) % 3 + A[x] % 0.75;\n"
                             "f.compile();\n", schedule)
    A = torch.randn(5)
    want = math.fmod(0.525 - 1, 1) + math.fmod(-5, 3) + torch.fmod(A.double(), 0.75)
    close(module.f(A, 0.525), want)
    close(module.reference(A, 0.525), want)


def test_math_of_integer_size_expressions(tmp_path):
    module = build(tmp_path, "Func f; In A; Var x;\n"
                             "f[x] = A[x] + sqrt(len(x) * len(x)) + erf(len(x) + len(x)) + sin(-len(x))"
                             " + pow(len(x), 1.5);\nf.compile();\n")
    A = torch.randn(3)
    close(module.f(A), A.double() + 3 + math.erf(6) + math.sin(-3) + 3 ** 1.5)


@pytest.mark.parametrize("schedule", [None, "f.tensorize(m:0)", "f.tensorize(m:0, z:0)"])
def test_pow_with_tensor_exponent(tmp_path, schedule):
    module = build(tmp_path, "Func f; In I; RVar m, z;\nf[m, z] = pow(I[z] * I[z], I[m]);\n"
                             "f.compile();\n", schedule)
    I = torch.randn(3)
    close(module.f(I), (I.double() ** 2)[None, :] ** I.double()[:, None])


def test_fused_constant_producer_under_a_reduction(tmp_path):
    module = build(tmp_path, "Func f0, f1; In A; Var n; RVar j;\nf0[j] = 1;\n"
                             "f1[j, n] = rsum(f0[j], j) + A[n];\nf0.fuse_at(f1, j);\nf1.compile();\n")
    A = torch.randn(4)
    close(module.f1(A, j=3), (A.double() + 3)[None, :].expand(3, 4))
    for schedule in ("f1.tensorize(j:0); f0.fuse_at(f1, j)", "f1.tensorize(j:2, n:0); f0.fuse_at(f1, j)"):
        module = build(tmp_path, "Func f0, f1; In A; Var n; RVar j;\nf0[j] = 1;\n"
                                 "f1[j, n] = rsum(f0[j], j) + A[n];\nf1.compile();\n", schedule,
                       name="again")
        close(module.f1(A, j=3), (A.double() + 3)[None, :].expand(3, 4))


@pytest.mark.parametrize("schedule", [
    "f.block(n:4); f.tensorize(u:0); f.atomic(n)",
    "f.block(n:4); f.tensorize(u:0)",
    "f.tensorize(u:0, n:0)",
])
def test_reduction_broadcast_over_a_tensorized_output_label(tmp_path, schedule):
    module = build(tmp_path, "Func f; In A; Var u; RVar n;\nf[u] = rsum(A[n], n);\nf.compile();\n",
                   schedule)
    A = torch.randn(5)
    close(module.f(A, u=3), A.double().sum().expand(3))


def test_fuse_label_rebound_by_a_reduction_rejected(tmp_path):
    err = rejected(tmp_path, "Func f0, f3; In I1; RVar z, r;\nf0[r, z] = 1;\n"
                             "f3[r] = rdot(rdot(I1[r], f0[r, z], r), I1[z], z);\n"
                             "f0.fuse_at(f3, r);\nf3.compile();\n")
    assert "`f0` is fused into `f3` at `r`" in err


def test_fma_in_the_reference_keeps_its_precedence(tmp_path):
    module = build(tmp_path, "Func f; In A; Var x;\nf[x] = fma(1, 2, 1) * A[x];\nf.compile();\n")
    A = torch.randn(4)
    close(module.f(A), 3 * A.double())
    close(module.reference(A), 3 * A.double())


def test_scalar_divided_by_zero_is_inf(tmp_path):
    module = build(tmp_path, "Func f; SIn s; Var v; RVar p;\nf[p, v] = s / 0 + s / (1 - 1);\n"
                             "f.compile();\n")
    for fn in (module.f, module.reference):
        close(fn(0.5, p=2, v=2), torch.full((2, 2), math.inf, dtype=torch.float64))
        close(fn(-0.5, p=1, v=1), torch.full((1, 1), -math.inf, dtype=torch.float64))
        close(fn(0.0, p=1, v=1), torch.full((1, 1), math.nan, dtype=torch.float64))


def test_fuse_label_reduced_by_the_consumer_rejected(tmp_path):
    # f1 sums f0 over j, the fuse level: a temporary holding one j cannot serve the sum.
    err = rejected(tmp_path, "Func f0, f1; In A; RVar j, k, v;\nf0[j, k] = A[j, k];\n"
                             "f1[j, v] = rsum(f0[j, v], j);\nf0.fuse_at(f1, j);\nf1.compile();\n")
    assert "`f0` is fused into `f1` at `j`" in err


def test_rdot_of_a_producer_constant_along_the_reduced_label(tmp_path):
    # f0 does not vary along v (it reduces over its own v): rdot over v cannot use tl.dot.
    module = build(tmp_path, "Func f0, f1; In I0; Var x; RVar v, w;\n"
                             "f0[x, w, v] = rsum(where(1, I0[x, w], I0[v, w]), v);\n"
                             "f1[x, v, w] = rdot(I0[w, v], f0[x, w, v], v);\n"
                             "f1.tensorize(w:0, v:0, x:0);\nf0.fuse_at(f1, x);\nf1.compile();\n")
    I0 = torch.randn(3, 3)
    a = I0.double()
    want = (3 * a[:, None, :] * a.sum(1)[None, None, :]).expand(3, 3, 3)
    close(module.f1(I0), want)
    close(module.reference(I0), want)


@pytest.mark.parametrize("schedule", [None, "f.tensorize(x:0)"])
def test_comparison_of_a_scalar_input(tmp_path, schedule):
    module = build(tmp_path, "Func f; In A; SIn s; Var x;\nf[x] = A[x] * 0 + (1 > s) + (s <= len(x));\n"
                             "f.compile();\n", schedule)
    A = torch.randn(4)
    for s, want in ((0.5, 2.0), (1.5, 1.0), (5.0, 0.0)):
        close(module.f(A, s), torch.full((4,), want, dtype=torch.float64))
        close(module.reference(A, s), torch.full((4,), want, dtype=torch.float64))


def test_split_reduction_tile_stays_within_tritons_tensor_limit(tmp_path):
    module = build(tmp_path, "Func f; In I; Var n, j, k; RVar z;\nf[n, j, k] = rsum(I[k, z, n], z);\n"
                             "f.compile();\n",
                   "f.block(k:16, z:32, n:16); f.tensorize(k:0, j:0, n:0); f.block(j:32)")
    I = torch.randn(2, 40, 3)
    close(module.f(I, j=2), I.double().sum(1).t()[:, None, :].expand(3, 2, 2))


def test_nested_rdots_over_one_label_on_tl_dot(tmp_path):
    # The outer tl.dot kept a reference to its label's mask while lowering an operand that
    # holds rdots over the same label, which moved the vector it pointed into (a crash, or
    # std::bad_alloc from a garbage string).
    module = build(tmp_path, "Func f; In I0, I1, I2; Var x; RVar w, m, j;\n"
                             "f[w, x, j] = rdot(rdot(I0[j], I2[j], j) + I0[m], "
                             "rdot(rdot(floor(I2[m] + I0[j]), I0[j], j) + I2[j], I1[w, j], j), m);\n"
                             "f.tensorize(w:16, j:16, m:0);\nf.compile();\n")
    gen = torch.Generator().manual_seed(5)
    I0, I1, I2 = torch.randn(3, generator=gen), torch.randn(2, 3, generator=gen), torch.randn(3, generator=gen)
    a0, a1, a2 = I0.double(), I1.double(), I2.double()
    inner = (a0 * a2).sum()                                    # rdot(I0[j], I2[j], j)
    left = inner + a0                                          # [m]
    fl = torch.floor(a2[:, None] + a0[None, :])                # [m, j]
    d2 = (fl * a0[None, :]).sum(1)                             # [m]
    right = ((d2[:, None] + a2[None, :]) * a1[:, None, :]).sum(2)  # [w, m] summed over j
    want = (left[None, :] * right).sum(1)                      # [w]
    close(module.f(I0, I1, I2, x=2), want[:, None, None].expand(2, 2, 3), rtol=1e-3, atol=1e-3)


def test_capture_through_a_chain_of_fusions_rejected(tmp_path):
    # f2 reads f1 with m; f1 is f0, which reduces over m: inlining the chain would capture it.
    err = rejected(tmp_path, "Func f0, f1, f2; In I0; RVar m, r;\nf0[r] = rsum(I0[m, r], m);\n"
                             "f1[r] = f0[r];\nf2[r] = rsum(f1[m], m);\nf1.fuse_at(f2, r);\n"
                             "f0.fuse_at(f1, r);\nf2.compile();\n")
    assert "cannot fuse `f1` here: this access indexes it with `m`" in err


@pytest.mark.parametrize("exponent", ["1.5", "0.5", "3", "-2"])
def test_pow_of_a_comparison_with_a_literal_exponent(tmp_path, exponent):
    module = build(tmp_path, f"Func f; In I; Var k; RVar x, u;\nf[u, k, x] = pow(1 == I[k, u, x], {exponent});\n"
                             "f.compile();\n")
    I = torch.tensor([[[1.0, 2.0]]])
    base = (I == 1).double().permute(1, 0, 2)
    close(module.f(I), base ** float(exponent))


def test_split_reduction_beside_a_whole_unblocked_output_dimension(tmp_path):
    # n's tile is next_power_of_2(n) at run time: the partial results are then reduced one at a
    # time, not 256 wide beside it (over Triton's 2^20 elements at n=17).
    module = build(tmp_path, "Func f; In A, B; Var y; RVar p, n, i;\n"
                             "f[n, p, y] = rdot(B[i, n], A[p, i], i);\nf.compile();\n",
                   "f.block(i:16); f.tensorize(y:16); f.tensorize(n:0, p:16)")
    A, B = torch.randn(1, 1), torch.randn(1, 17)
    want = (B.double().t() @ A.double().t())[:, :, None]
    close(module.f(A, B, y=1), want)


# ----------------------------------------------------------------------------------------------
# A fused producer whose value varies along nothing (a constant, a scalar input) stored into its
# temporary inside a kernel with tensor axes (the fuzzer's find: `tl.reshape(1.0, [])`).

@pytest.mark.parametrize("value, want", [("1", lambda s: 1.0), ("2 * s + 1", lambda s: 2 * s + 1)],
                         ids=["constant", "scalar input"])
def test_fused_producer_of_a_constant(tmp_path, value, want):
    source = ("Func f0, f2;\nSIn s;\nVar p;\nRVar y, j;\n"
              f"f0[j, p] = {value};\nf2[j, y] = f0[j, y];\n"
              "f0.fuse_at(f2, j);\nf2.tensorize(y:4);\nf2.compile();\n")
    m = build(tmp_path, source)
    sizes = {"j": 3, "y": 5, "p": 5}
    out = m.f2(2.5, **{m.SIZE_KEYWORDS[k]: v for k, v in sizes.items()}) if "s" in value else \
        m.f2(**{m.SIZE_KEYWORDS[k]: v for k, v in sizes.items()})
    close(out, torch.full((3, 5), want(2.5)))


def test_scalar_result_of_a_tensorized_reduction_with_an_unused_label(tmp_path):
    # A reduction's result is a tensor even where its Func's own labels are not tensorized.
    m = build(tmp_path, "Func f0;\nIn I1;\nRVar w, k;\nf0[k] = rsum(I1[w], w);\n"
                        "f0.tensorize(w:0);\nf0.compile();\n")
    I1 = torch.randn(7)
    close(m.f0(I1, k=3), I1.double().sum().expand(3))


# A reduction inside a producer computed into a temporary (partial fusion) ran once per element
# of the temporary's loop: softmax's row max, O(y^2) loads of A a row. It runs once per row now,
# as the kernel's own reductions do.
SOFTMAX_FOUR_FUNCS = """Func mx, e, s, o; In A; Var x; RVar y;
mx[x] = rmax(A[x, y], y);
e[x, y] = exp(A[x, y] - mx[x]);
s[x] = rsum(e[x, y], y);
o[x, y] = e[x, y] / s[x];
mx.fuse_at(o, x);
s.fuse_at(o, x);
e.fuse_at(o, x);
o.compile();
"""


@pytest.mark.parametrize("schedule", ["", "o.tensorize(y:4)", "o.tensorize(y:0)"])
def test_reduction_of_a_materialized_producer_runs_once_per_row(tmp_path, schedule):
    source = SOFTMAX_FOUR_FUNCS.replace("o.compile();", schedule + ";\no.compile();" if schedule
                                        else "o.compile();")
    module = build(tmp_path, source)
    kernel = (tmp_path / "prog.py").read_text().split("def o_kernel(")[1].split("\ndef ")[0]
    # Loads of A sit in one loop inside the row loop (def 4, x 8, y 12), none deeper.
    depths = [len(line) - len(line.lstrip()) for line in kernel.splitlines()
              if "tl.load(A_ptr" in line]
    assert depths and max(depths) <= 12, kernel
    for x, y in ((1, 1), (3, 7), (2, 33)):
        A = torch.randn(x, y) * 3
        close(module.o(A), torch.softmax(A.double(), dim=1))
        close(module.reference_o(A), torch.softmax(A.double(), dim=1))


# A product fused at the outer label of a consumer that computes the inner one in tiles is
# computed into a temporary, one tile of the inner label at a time: its k ran as a loop tile of
# the consumer's layout, and lowering stopped with an internal error ("ill-typed kernel IR: `&`:
# shapes [64, 1] and [16]"). Its products now run on the kernel's axes, k among them.
@pytest.mark.parametrize("schedule", ["out.block(m:64, n:64); out.tensorize(m:0, n:32, k:16)",
                                      "out.block(m:32, n:64); out.tensorize(m:0, n:16, k:16)",
                                      "out.block(m:32, n:32); out.tensorize(m:16, n:16, k:0)"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_a_product_fused_at_an_outer_label_is_computed_into_a_temporary(tmp_path, schedule, dtype):
    module = build(tmp_path, "Func out, mm; In A, W; Var m, n; RVar k;\n"
                             "mm[m, n] = rdot(A[m, k], W[k, n], k);\n"
                             "out[m, n] = mm[m, n] * 2 + A[m, 0];\nout.compile();\n",
                   schedule + "; mm.fuse_at(out, m)")
    assert "mm fused at m: computed into mm_fuse" in (tmp_path / "prog.py").read_text()
    for m, n, k in ((64, 64, 16), (70, 100, 40), (1, 33, 17)):
        A, W = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
        want = (A.double() @ W.double()).to(dtype).double() * 2 + A[:, :1].double()
        tol = 1e-4 if dtype == torch.float32 else 3e-2
        torch.testing.assert_close(module.out(A, W).double(), want, rtol=tol, atol=tol)


def test_sizes_that_make_a_whole_dimension_tile_too_large_are_refused(tmp_path):
    """A tile as wide as a dimension takes its width from the call's sizes: at sizes for which a
    kernel's tensor would pass Triton's 2^20 elements the wrapper refuses the call with a
    ValueError saying what to change (dtfuzz found Triton's own error deep in its launch), and
    smaller sizes still compute the right values."""
    module = build(tmp_path, """Func f; In A, B; Var x, y; RVar k;
        f[x, y] = rsum(A[x, k] * B[k, y], k) + A[x, y];
        f.compile();""", "f.tensorize(x:0, y:0, k:4)")
    assert '_dt_check_numel("f"' in (tmp_path / "prog.py").read_text()
    A, B = torch.randn(1100, 1100), torch.randn(1100, 1100)
    with pytest.raises(ValueError, match=r"f: at these sizes its kernel would compute a tensor "
                                         r"of \d+ elements \(2048 x 2048.*tensorize fewer"):
        module.f(A, B)
    A, B = torch.randn(9, 9), torch.randn(9, 9)
    close(module.f(A, B), A @ B + A)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_products_under_the_interpreter(tmp_path, dtype):
    """Triton's interpreter multiplied bfloat16 tiles in tl.dot as the integers it stores them
    as (every bfloat16 GEMM wrong on the CPU); the module's runtime has it take them in float32,
    as the tensor cores do. Checked against the product of the same rounded values."""
    src = tmp_path / "mm.dt"
    src.write_text("Func c;\nIn A, B;\nVar m, n;\nRVar k;\nc[m, n] = rdot(A[m, k], B[k, n], k);\n"
                   "c.block(m:32, n:32);\nc.tensorize(m:0, n:0, k:16);\nc.compile();\n")
    out = tmp_path / "mm.py"
    assert run_dtc(src, "-o", out).returncode == 0
    module = load_module(out)
    A, B = torch.randn(40, 24).to(dtype), torch.randn(24, 33).to(dtype)
    got = module.c(A, B)
    assert got.dtype == dtype
    want = (A.double() @ B.double()).to(dtype)
    torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)


# A producer fused into a product on tl.dot, along a dimension that the product only tiles as
# its operands' (the rdot's label): the kernel kept that label off its axes, and filling the
# producer's temporary along it ended in "ill-typed kernel IR" (the fuzzer's find, seeds 12 and
# 13). The temporary is now filled on an axis of that label.
@pytest.mark.parametrize("value", ["1", "C[m, k] * 2"])
def test_producer_along_the_label_of_a_product_on_tl_dot(tmp_path, value):
    module = build(tmp_path, "Func f0, f1; In A, B, C; Var m, n; RVar k;\n"
                             f"f0[m, k] = {value};\n"
                             "f1[m, n] = rdot(A[m, k], B[k, n], k) + f0[m, n] + C[m, n] * 0;\n"
                             "f0.fuse_at(f1, m);\nf1.tensorize(m:16, k:16, n:0);\nf1.compile();\n")
    gen = torch.Generator().manual_seed(3)
    A, B, C = (torch.randn(20, 24, generator=gen), torch.randn(24, 24, generator=gen),
               torch.randn(20, 24, generator=gen))
    f0 = torch.ones(20, 24, dtype=torch.float64) if value == "1" else 2 * C.double()
    want = A.double() @ B.double() + f0
    close(module.f1(A, B, C), want, rtol=1e-3, atol=1e-3)
    close(module.reference(A, B, C), want, rtol=1e-3, atol=1e-3)


def test_two_levels_of_producers_along_the_label_of_a_product_on_tl_dot(tmp_path):
    # f1 sums f0 = 1 over w, its own dimension too, and is read along m: f1 is len(w) everywhere.
    module = build(tmp_path, "Func f0, f1, f2; In I1, I2; Var m, r; RVar w;\n"
                             "f0[r, w] = 1;\nf1[r, w] = rdot(f0[r, w], f0[r, w], w);\n"
                             "f2[r, m] = rdot(I1[w, m], I2[w, r], w) + f1[r, m];\n"
                             "f2.tensorize(r:0);\nf2.tensorize(m:0, w:16);\n"
                             "f0.fuse_at(f1, w);\nf1.fuse_at(f2, r);\nf2.compile();\n")
    gen = torch.Generator().manual_seed(4)
    I1, I2 = torch.randn(24, 24, generator=gen), torch.randn(24, 20, generator=gen)
    want = I2.double().t() @ I1.double() + 24
    close(module.f2(I1, I2), want, rtol=1e-3, atol=1e-3)
    close(module.reference(I1, I2), want, rtol=1e-3, atol=1e-3)


# A reduction over k whose operand itself reduces over w, where k and w index one dimension of
# the input and w is the Func's own (whole-tile) dimension: folding the outer reduction onto w
# renamed k to w inside the inner one, which then reduced over w twice ("IR verification failed
# after folding tied reductions: bad reduction", the fuzzer's find, seed 78). The fold now leaves
# a reduction alone when its operand reduces over the label it would take.
@pytest.mark.parametrize("size", [1, 5, 33])
def test_a_tied_reduction_whose_operand_reduces_over_the_output_label(tmp_path, size):
    module = build(tmp_path, "Func f0; In I0; RVar w, k;\n"
                             "f0[w] = rsum(rsum(I0[k] + I0[w], w), k);\n"
                             "f0.tensorize(w:0, k:0);\nf0.compile();\n")
    I0 = torch.randn(size, generator=torch.Generator().manual_seed(5))
    want = (I0.double()[:, None] + I0.double()[None, :]).sum().expand(size)
    close(module.f0(I0), want, rtol=1e-4, atol=1e-4)
    close(module.reference(I0), want, rtol=1e-4, atol=1e-4)
