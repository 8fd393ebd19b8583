"""The wrappers' lean host path: a call whose argument metadata (shapes, strides, dtype, device,
alignment, size keywords, `out`) was seen before launches from the plan the first call made,
skipping the checks; any other call takes the full path, with the full path's errors. Run under
the interpreter, so what is shown here is which path runs and that its results are right; the
direct launch of compiled kernels is checked on a GPU by tests/gpu/gpu_host_path.py."""
import pytest
import torch

from conftest import compile_dt

PROGRAM = """Func s, f; In A, B; SIn c; Var x, y; RVar k;
s[x] = rsum(A[x, k], k);
f[x, y] = exp(A[x, y]) * B[y, x] + s[x] * c;
f.compile(); s.compile();
"""


def build(tmp_path, schedule=None):
    src = tmp_path / "prog.dt"
    src.write_text(PROGRAM)
    return compile_dt(tmp_path, src, schedule)


def oracle(A, B, c):
    a, b = A.double(), B.double()
    s = a.sum(1)
    return (a.exp() * b.t() + s[:, None] * c).to(A.dtype), s.to(A.dtype)


def close(got, want):
    tol = 1e-4 if got.dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


SCHEDULES = [None, "f.block(x:2, y:4); f.tensorize(y:4); s.tensorize(x:0, k:4)",
             "s.block(k:4); s.atomic(k)"]


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_a_repeated_call_launches_from_its_plan(tmp_path, schedule, monkeypatch):
    module = build(tmp_path, schedule)
    A, B = torch.randn(6, 6), torch.randn(6, 6)
    want_f, want_s = oracle(A, B, 0.5)
    close(module.f(A, B, 0.5), want_f)
    close(module.s(A), want_s)
    assert len(module._dt_plans_f) == 1 and len(module._dt_plans_s) == 1
    # The second call must not check again: make the checks fail loudly and call once more.
    def no_checks(*args):
        raise AssertionError("the full path ran for metadata seen before")
    monkeypatch.setattr(module, "_dt_args_f", no_checks)
    monkeypatch.setattr(module, "_dt_args_s", no_checks)
    for _ in range(2):
        A.normal_(), B.normal_()
        want_f, want_s = oracle(A, B, 2.0)
        close(module.f(A, B, 2.0), want_f)
        close(module.s(A), want_s)
    assert len(module._dt_plans_f) == 1


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_other_metadata_takes_the_full_path(tmp_path, schedule):
    module = build(tmp_path, schedule)
    A, B = torch.randn(6, 6), torch.randn(6, 6)
    module.f(A, B, 1.0)
    cases = [
        (torch.randn(5, 5), torch.randn(5, 5)),                   # shape
        (torch.randn(6, 6).t(), torch.randn(6, 6)),               # strides
        (A.half(), B.half()),                                     # dtype
        (torch.randn(6 * 6 + 1)[1:].view(6, 6), B),               # alignment
    ]
    for i, (a, b) in enumerate(cases):
        want, _ = oracle(a, b, 1.0)
        close(module.f(a, b, 1.0), want)
        assert len(module._dt_plans_f) == i + 2
    out = torch.full((8, 6), float("nan"))[1:7]
    for _ in range(2):
        got = module.f(A, B, 1.0, out=out)
        assert got is out
        close(out, oracle(A, B, 1.0)[0])
        out.fill_(float("nan"))
    assert len(module._dt_plans_f) == len(cases) + 2


def test_bad_arguments_get_the_full_paths_errors_after_a_plan_exists(tmp_path):
    module = build(tmp_path)
    A, B = torch.randn(6, 6), torch.randn(6, 6)
    module.f(A, B, 1.0, x=6)
    module.f(A, B, 1.0)
    bad = [
        (lambda: module.f(A, B, 1.0, x=5), "size of x disagrees"),
        (lambda: module.f(A, B, 1.0, x=True), "must be a non-negative integer"),
        (lambda: module.f(A, B, 1.0, x=6.0), "must be a non-negative integer"),
        (lambda: module.f(A, B, 1.0, x=[6]), "must be a non-negative integer"),
        (lambda: module.f(A, B, "c"), "c must be a number"),
        (lambda: module.f(A, B.numpy(), 1.0), "must be a torch.Tensor"),
        (lambda: module.f(A, torch.randn(6, 7), 1.0), "disagrees"),
        (lambda: module.f(A, B, 1.0, out=torch.empty(6, 5)), "out has shape"),
        (lambda: module.f(A, B, 1.0, out=torch.empty(6, 6, dtype=torch.half)), "out is torch.float16"),
        (lambda: module.f(A, B, 1.0, out=torch.empty(6, 1).expand(6, 6)), "share memory"),
        (lambda: module.f(A, B, 1.0, out=[0.0]), "out must be a torch.Tensor"),
    ]
    for call, words in bad:
        with pytest.raises(ValueError, match=words):
            call()
    # A failed check keeps no plan; the good calls still run from theirs.
    assert len(module._dt_plans_f) == 2
    close(module.f(A, B, 1.0), oracle(A, B, 1.0)[0])


def test_empty_results_are_returned_without_a_plan(tmp_path):
    module = build(tmp_path)
    for _ in range(2):
        assert module.f(torch.randn(0, 0), torch.randn(0, 0), 1.0).shape == (0, 0)
        assert module.s(torch.randn(0, 3)).shape == (0,)
    assert not module._dt_plans_f and not module._dt_plans_s


def test_the_plan_cache_is_bounded(tmp_path, monkeypatch):
    module = build(tmp_path)
    monkeypatch.setattr(module, "_DT_PLANS_MAX", 3)
    for n in range(1, 8):
        A = torch.randn(n, 2)
        close(module.s(A), oracle(A, A.t(), 0.0)[1])
        assert 1 <= len(module._dt_plans_s) <= 3


def test_cuda_graph_needs_cuda(tmp_path):
    module = build(tmp_path)
    if torch.cuda.is_available():
        pytest.skip("checked on a GPU by tests/gpu/gpu_host_path.py")
    with pytest.raises(ValueError, match="needs a CUDA device"):
        module.CudaGraph(module.s, torch.randn(3, 3))


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_out_that_shares_memory_with_an_input(tmp_path, schedule):
    """`out` may be an input, or a view of one: f reads B transposed and s reduces rows of A,
    so writing in place would overwrite elements before they are read. The kernels write a new
    tensor and the wrapper copies it into `out`; a call without sharing still uses the plan."""
    module = build(tmp_path, schedule)
    for _ in range(2):  # the second time with a plan for this metadata (made without sharing)
        A, B = torch.randn(6, 6), torch.randn(6, 6)
        want_f, want_s = oracle(A, B, 0.5)
        plain = torch.empty(6, 6)
        assert module.f(A, B, 0.5, out=plain) is plain
        close(plain, want_f)
        assert module.f(A, B, 0.5, out=B) is B
        close(B, want_f)
        column = A[:, 2]               # a view of A: s reads all of A's rows
        assert module.s(A, out=column) is column
        close(A[:, 2], want_s)
    A, B = torch.randn(6, 6), torch.randn(6, 6)
    want_f, _ = oracle(A, B, 0.5)
    assert module.f(A, B, 0.5, out=A) is A  # in place on the element-wise operand
    close(A, want_f)
    # The same memory through another storage object (DLPack, NumPy), partly overlapping B.
    for reach in (lambda t: torch.from_dlpack(t), lambda t: torch.from_numpy(t.numpy())):
        base = torch.randn(7, 6)
        A, B = torch.randn(6, 6), base[:6]
        want_f, _ = oracle(A, B, 0.5)
        out = reach(base[1:])
        assert out.untyped_storage().data_ptr() != B.untyped_storage().data_ptr()
        assert module.f(A, B, 0.5, out=out) is out
        close(base[1:], want_f)
    # Memory of the same storage that does not overlap needs no copy, and is not touched.
    base = torch.randn(12, 6)
    A, B, out = base[:6], torch.randn(6, 6), base[6:]
    keep = A.clone()
    close(module.f(A, B, 0.5, out=out), oracle(keep, B, 0.5)[0])
    assert torch.equal(A, keep)


def test_negative_views_are_refused_on_either_path(tmp_path):
    module = build(tmp_path)
    A, B = torch.randn(6, 6), torch.randn(6, 6)
    module.f(A, B, 0.5)
    assert len(module._dt_plans_f) == 1
    for args in ((torch._neg_view(A), B), (A, torch._neg_view(B))):
        with pytest.raises(ValueError, match="negative view.*resolve_neg"):
            module.f(*args, 0.5)
    with pytest.raises(ValueError, match="negative view"):
        module.reference_f(torch._neg_view(A), B, 0.5)
    with pytest.raises(ValueError, match="out is a negative view"):
        module.f(A, B, 0.5, out=torch._neg_view(torch.empty(6, 6)))
    close(module.f(torch._neg_view(A).resolve_neg(), B, 0.5), oracle(-A, B, 0.5)[0])


def test_the_output_is_allocated_alike_on_either_path(tmp_path):
    """The full path and the lean one allocate the output the same way (the first input's
    new_empty): the same type, dtype and device, contiguous, whatever the inputs' layout."""
    module = build(tmp_path)

    class Marked(torch.Tensor):
        pass

    A, B = torch.randn(5, 7).as_subclass(Marked), torch.randn(5, 7).t()
    outputs = [module.f(A, B, 1.5) for _ in range(3)]
    assert len(module._dt_plans_f) == 1
    for out in outputs:
        assert type(out) is type(outputs[0]) and out.dtype == A.dtype and out.is_contiguous()
    close(outputs[-1].as_subclass(torch.Tensor), oracle(A.as_subclass(torch.Tensor), B, 1.5)[0])
