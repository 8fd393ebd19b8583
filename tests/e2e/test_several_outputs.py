"""Several outputs from one kernel (`g.store_in(f)`, docs/language.md): each program under
several schedules, run under the Triton interpreter against PyTorch written by hand (autograd for
the gradient of cross-entropy), through every path of the wrapper (first call, planned call,
`out=` tuples, empty outputs)."""
import pytest
import torch

from conftest import compile_source, run_dtc

ADD_RMS_NORM = """Func s, out; In X, R, W; SIn eps; Var x, y; RVar k;
s[x, y] = X[x, y] + R[x, y];
out[x, y] = s[x, y] * rsqrt(rsum(s[x, k] * s[x, k], k) / len(y) + eps) * W[y];
out.compile();
"""

CROSS_ENTROPY = """Func m, lse, loss, grad;
In P; In T: int(y); SIn ignore: int; SIn eps, scale;
Var x; RVar y;
m[x] = rmax(P[x, y], y);
lse[x] = log(rsum(exp(P[x, y] - m[x]), y)) + m[x];
loss[x] = where(T[x] == ignore, 0,
    lse[x] - (1 - eps) * P[x, T[x]] - eps * rsum(P[x, y], y) / len(y));
grad[x, y] = where(T[x] == ignore, 0,
    (exp(P[x, y] - lse[x]) - (1 - eps) * (y == T[x]) - eps / len(y)) * scale);
grad.compile();
"""


def add_rms_norm(X, R, W, eps):
    S = X.double() + R.double()
    return S * torch.rsqrt((S * S).mean(1, keepdim=True) + eps) * W.double(), S


def close(got, want, tol=1e-5):
    assert got.shape == want.shape, (got.shape, want.shape)
    torch.testing.assert_close(got.double(), want.double(), rtol=tol, atol=tol)


@pytest.mark.parametrize("schedule", [
    # s inline (the row is one tile): X and R are loaded once, s stored from registers
    "out.block(x:1); out.tensorize(x:0, y:0, k:0)",
    "out.block(x:2); out.tensorize(x:0, y:0, k:0)",
    # s computed into a temporary one row at a time, stored from there too
    "out.tensorize(y:8, k:8)",
    "out.block(x:2); out.tensorize(x:0, y:16, k:0)",
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_fused_add_and_rms_norm_returns_the_sum_and_the_norm(tmp_path, schedule, dtype):
    module, text = compile_source(tmp_path, ADD_RMS_NORM,
                         "s.fuse_at(out, x); s.store_in(out); " + schedule + "; out.compile()")
    assert text.count("def out__kernel(") == 1 and "def s_kernel(" not in text
    X, R, W = (torch.randn(5, 33).to(dtype), torch.randn(5, 33).to(dtype),
               torch.randn(33).to(dtype))
    want_out, want_s = add_rms_norm(X, R, W, 1e-6)
    tol = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 5e-2}[dtype]
    for _ in range(2):  # the first call plans, the second launches from the plan
        out, s = module.out(X, R, W, 1e-6)
        assert out.dtype == s.dtype == dtype
        close(out, want_out, tol)
        close(s, want_s, tol)
    ref_out, ref_s = module.reference_out(X, R, W, 1e-6)
    close(ref_out, want_out, tol)
    close(ref_s, want_s, tol)


@pytest.mark.parametrize("tiles", ["y:16, k:16", "y:8, k:0", "y:16, k:8"])
def test_s_fused_at_its_innermost_label_is_recomputed_in_both_loops(tmp_path, tiles):
    """`s.fuse_at(out, y)` with the row in steps: no temporary, s recomputed from X and R in the
    sum of squares and again where out stores it (Inductor's two passes, the first one's loads
    kept in the cache), at a row that is not a multiple of the step."""
    module, text = compile_source(tmp_path, ADD_RMS_NORM, "s.fuse_at(out, y); s.store_in(out); "
                                  f"out.block(x:2); out.tensorize(x:0, {tiles}); out.compile()")
    assert "s_fuse_ptr" not in text and "debug_barrier" not in text
    body = text[text.index("def out__kernel("):text.index("def _dt_args_out")]
    assert body.count("tl.store(s_ptr") >= 1 and body.count("X_ptr +") >= 2
    if "k:0" not in tiles:
        assert 'eviction_policy="evict_last"' in body
    X, R, W = torch.randn(5, 41), torch.randn(5, 41), torch.randn(41)
    want_out, want_s = add_rms_norm(X, R, W, 1e-6)
    out, s = module.out(X, R, W, 1e-6)
    close(out, want_out)
    close(s, want_s)


def test_results_given_overlapping_memory_are_refused(tmp_path):
    module, _ = compile_source(tmp_path, ADD_RMS_NORM, "s.fuse_at(out, y); s.store_in(out); "
                               "out.block(x:2); out.tensorize(x:0, y:8, k:16); out.compile()")
    X, R, W = torch.randn(5, 33), torch.randn(5, 33), torch.randn(33)
    T = torch.empty(5, 33)
    big = torch.empty(5, 40)
    for given in [(T, T), (big[:, :33], big[:, 7:])]:
        with pytest.raises(ValueError, match="share memory"):
            module.out(X, R, W, 1e-6, out=given)
    # Disjoint parts of one buffer are fine.
    want_out, want_s = add_rms_norm(X, R, W, 1e-6)
    pair = torch.empty(2, 5, 33)
    out, s = module.out(X, R, W, 1e-6, out=(pair[0], pair[1]))
    assert out.data_ptr() == pair[0].data_ptr() and s.data_ptr() == pair[1].data_ptr()
    close(out, want_out)
    close(s, want_s)


def test_every_element_of_every_result_is_written_into_out(tmp_path):
    module, _ = compile_source(tmp_path, ADD_RMS_NORM, "s.fuse_at(out, x); s.store_in(out); "
                      "out.block(x:4); out.tensorize(x:0, y:16, k:16); out.compile()")
    X, R, W = torch.randn(9, 70), torch.randn(9, 70), torch.randn(70)
    given = (torch.full((9, 70), float("nan")), torch.full((9, 70), float("nan")))
    out, s = module.out(X, R, W, 1e-6, out=given)
    assert out is given[0] and s is given[1]
    want_out, want_s = add_rms_norm(X, R, W, 1e-6)
    close(out, want_out)
    close(s, want_s)
    # One result given, the other new; a transposed `out` gets the values through a copy.
    t = torch.empty(70, 9).t()
    out, s = module.out(X, R, W, 1e-6, out=(None, t))
    assert s is t and out is not given[0]
    close(s, want_s)
    with pytest.raises(ValueError, match=r"out must be None or a tuple of 2 tensors .*\(out, s\)"):
        module.out(X, R, W, 1e-6, out=given[0])
    with pytest.raises(ValueError, match="out has shape"):
        module.out(X, R, W, 1e-6, out=(None, torch.empty(9, 71)))


@pytest.mark.parametrize("schedule", [
    "grad.tensorize(y:0)",
    "grad.block(x:2); grad.tensorize(x:0, y:0)",
    "grad.tensorize(y:8)",
    "grad.block(x:1, y:16); grad.tensorize(y:0)",  # several programs a row: each stores loss
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cross_entropy_returns_the_gradient_and_the_loss(tmp_path, schedule, dtype):
    module, _ = compile_source(tmp_path, CROSS_ENTROPY, "m.fuse_at(grad, x); lse.fuse_at(grad, x); "
                      "loss.store_in(grad); " + schedule + "; grad.compile()")
    P = (torch.randn(6, 37) * 3).to(dtype)
    T = torch.randint(0, 37, (6,))
    T[2] = -100
    n = int((T != -100).sum())
    logits = P.double().requires_grad_()
    mean = torch.nn.functional.cross_entropy(logits, T, ignore_index=-100, label_smoothing=0.1)
    mean.backward()
    per_row = torch.nn.functional.cross_entropy(P.double(), T, ignore_index=-100,
                                                label_smoothing=0.1, reduction="none")
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    grad, loss = module.grad(P, T, -100, 0.1, 1 / n)
    close(grad, logits.grad, tol)
    close(loss, per_row, tol)
    assert torch.all(grad[2] == 0) and loss[2] == 0


def test_a_stored_func_the_kernel_does_not_read(tmp_path):
    # The row maximum of a softmax, returned beside it.
    module, text = compile_source(tmp_path, """Func mx, o; In A; Var x; RVar y;
        mx[x] = rmax(A[x, y], y);
        o[x, y] = exp(A[x, y] - rmax(A[x, y], y)) / rsum(exp(A[x, y] - rmax(A[x, y], y)), y);
        o.compile();""", "mx.store_in(o); o.tensorize(y:0); o.compile()")
    assert "def mx_kernel(" not in text
    A = torch.randn(7, 19)
    o, mx = module.o(A)
    close(o, torch.softmax(A.double(), 1))
    assert torch.equal(mx, A.amax(1))


def test_an_empty_output_still_returns_the_others(tmp_path):
    module, _ = compile_source(tmp_path, CROSS_ENTROPY, "m.fuse_at(grad, x); lse.fuse_at(grad, x); "
                      "loss.store_in(grad); grad.tensorize(y:0); grad.compile()")
    P, T = torch.randn(4, 0), torch.tensor([0, -100, 0, 0])
    grad, loss = module.grad(P, T, -100, 0.0, 1.0)
    assert grad.shape == (4, 0) and loss.shape == (4,)
    # No program instance runs: the loss is the reference's, 0 where ignored (an empty row's
    # log-sum-exp is -inf and its mean 0 / 0).
    assert loss[1] == 0
    torch.testing.assert_close(loss, module.reference_grad(P, T, -100, 0.0, 1.0)[1],
                               equal_nan=True)


def test_the_canonical_schedule_names_the_stored_func(tmp_path):
    src = tmp_path / "prog.dt"
    src.write_text(ADD_RMS_NORM)
    r = run_dtc(src, "--canonical", "--schedule",
                "s.fuse_at(out, x); s.store_in(out); out.block(x:1); out.tensorize(x:0, y:0, k:0)"
                "; out.compile()")
    assert r.returncode == 0, r.stderr
    assert "s.store_in(out)" in r.stdout


def test_a_kernel_that_stores_another_func_computed_for_a_third(tmp_path):
    """`h` reads `f`, whose kernel stores `g` too: h's wrapper runs f's kernel for f's values and
    gives the stored `g` a temporary of its own (only f's wrapper returns it)."""
    src = ("Func g, f, h;\nIn A;\nVar x;\nRVar y;\ng[x] = A[x] * 3.0;\nf[x, y] = g[x] + A[x];\n"
           "h[y, x] = f[x, y] * 2.0;\ng.fuse_at(f, x);\ng.store_in(f);\nf.compile();\nh.compile();\n")
    module, _ = compile_source(tmp_path, src)
    A = torch.randn(5)
    want_f = (A * 4)[:, None].expand(5, 3)
    torch.testing.assert_close(module.h(A, y=3), 2 * want_f.T)
    f, g = module.f(A, y=3)
    torch.testing.assert_close(f, want_f)
    torch.testing.assert_close(g, A * 3)
    torch.testing.assert_close(module.h(A, y=3), 2 * want_f.T)  # planned call
