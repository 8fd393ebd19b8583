"""The generated module's interface (wrapper argument checks, size inference, dtypes, layouts) and
the `dtc` command line."""
import ast
import re
import textwrap

import pytest
import torch

from conftest import (CONFORMANCE, DTC, assert_matches_oracle, check_module, compile_dt, load_module,
                      run_dtc)
from oracles import ORACLES

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0")

# Fast schedules (tensorized) so that the interpreter runs these in milliseconds.
ADD_OUT_FAST = "add_out.block(x:2,y:8);add_out.tensorize(x:0,y:0)"


def write_dt(tmp_path, text, name="prog"):
    path = tmp_path / f"{name}.dt"
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture(scope="module")
def add_out(tmp_path_factory):
    return compile_dt(tmp_path_factory.mktemp("add_out"), CONFORMANCE / "l3_01_add_out.dt",
                      schedule=ADD_OUT_FAST)


@pytest.fixture(scope="module")
def rms_norm(tmp_path_factory):
    return compile_dt(tmp_path_factory.mktemp("rms"), CONFORMANCE / "l3_04_rms_norm.dt",
                      schedule="rms_norm_out.tensorize(x:0,y:0,k:0)")


def inputs(x=3, y=5, dtype=torch.float32):
    g = torch.Generator().manual_seed(1)
    return torch.randn(x, y, generator=g).to(dtype), torch.randn(x, y, generator=g).to(dtype)


# ----------------------------------------------------------------------------------------------
# Argument checks: ValueError with a message naming the culprit.

def test_module_attributes(add_out):
    assert add_out.COMPILED == ("add_out",)
    assert add_out.SCHEDULE == ADD_OUT_FAST
    assert add_out.SIZE_KEYWORDS == {"x": "x", "y": "y"}
    assert add_out.reference is add_out.reference_add_out
    assert add_out.make_inputs is add_out.make_inputs_add_out
    assert add_out.DOT_PRECISION is None


@pytest.mark.parametrize("make_args,kwargs,pattern", [
    (lambda A, B: (A[0], B, 1.0), {}, r"A must have 2 dimension\(s\), got shape \(5,\)"),
    (lambda A, B: (A, B[None], 1.0), {}, r"B must have 2 dimension\(s\), got shape \(1, 3, 5\)"),
    (lambda A, B: (A, B[:, :4], 1.0), {}, r"size of y disagrees: B.shape\[1\] is 4 but A.shape\[1\] is 5"),
    (lambda A, B: (A, B[:2], 1.0), {}, r"size of x disagrees: B.shape\[0\] is 2 but A.shape\[0\] is 3"),
    (lambda A, B: (A, B, 1.0), {"x": 4}, r"size of x disagrees: A.shape\[0\] is 3 but x=4"),
    (lambda A, B: (A, B, 1.0), {"y": 0}, r"size of y disagrees"),
    (lambda A, B: (A, B.half(), 1.0), {}, r"B is torch.float16 but A is torch.float32"),
    (lambda A, B: (A.bfloat16(), B, 1.0), {}, r"B is torch.float32 but A is torch.bfloat16"),
    (lambda A, B: (A.int(), B.int(), 1.0), {}, r"A must be float32, float16 or bfloat16, got torch.int32"),
    (lambda A, B: (A, B.long(), 1.0), {}, r"B must be float32, float16 or bfloat16, got torch.int64"),
    (lambda A, B: (A.double(), B.double(), 1.0), {}, r"A must be float32, float16 or bfloat16"),
    (lambda A, B: (A.bool(), B, 1.0), {}, r"A must be float32, float16 or bfloat16, got torch.bool"),
    (lambda A, B: (A.tolist(), B, 1.0), {}, r"A must be a torch.Tensor, got list"),
    (lambda A, B: (A, B, "2"), {}, r"alpha must be a number, got str"),
    (lambda A, B: (A, B, None), {}, r"alpha must be a number, got NoneType"),
    (lambda A, B: (A, B, True), {}, r"alpha must be a number, got bool"),
    (lambda A, B: (A, B, torch.ones(2)), {}, r"alpha must be a number, got Tensor"),
    (lambda A, B: (A, B, [1.0]), {}, r"alpha must be a number, got list"),
    (lambda A, B: (A, B, 1.0), {"x": 3.0}, r"x must be a non-negative integer, got 3.0"),
    (lambda A, B: (A, B, 1.0), {"x": "3"}, r"x"),
])
def test_wrapper_rejects(add_out, make_args, kwargs, pattern):
    A, B = inputs()
    with pytest.raises(ValueError, match=pattern):
        add_out.add_out(*make_args(A, B), **kwargs)
    # the reference checks its arguments the same way
    with pytest.raises(ValueError, match=pattern):
        add_out.reference(*make_args(A, B), **kwargs)


def test_wrapper_signature(add_out):
    A, B = inputs()
    with pytest.raises(TypeError):
        add_out.add_out(A, B)                    # missing the scalar
    with pytest.raises(TypeError):
        add_out.add_out(A, B, 1.0, z=3)          # unknown size keyword
    with pytest.raises(TypeError):
        add_out.add_out(A, B, 1.0, 3, 5)         # sizes are keyword-only


def test_sizes_inferred_and_keywords_agree(add_out):
    A, B = inputs(3, 5)
    want = 2.5 * (A + B)
    for kwargs in ({}, {"x": 3}, {"y": 5}, {"x": 3, "y": 5}):
        got = add_out.add_out(A, B, 2.5, **kwargs)
        assert got.shape == (3, 5)
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("scalar", [2, 2.5, torch.tensor(2.5), torch.tensor([2.5]),
                                    torch.tensor(2, dtype=torch.int32)])
def test_scalar_forms(add_out, scalar):
    A, B = inputs()
    got = add_out.add_out(A, B, scalar)
    torch.testing.assert_close(got, float(scalar) * (A + B))


@pytest.mark.parametrize("shape", [(0, 5), (3, 0), (0, 0)])
def test_zero_size_dimension(add_out, shape):
    A, B = inputs(*shape)
    got = add_out.add_out(A, B, 1.0)
    assert got.shape == shape and got.dtype == torch.float32
    assert add_out.reference(A, B, 1.0).shape == shape


def test_zero_size_reduction_dimension(tmp_path):
    """rsum over an empty RVar is 0 (output not empty: the kernel runs with k = 0)."""
    module = compile_dt(tmp_path, CONFORMANCE / "l3_17_sum.dt", schedule="sum_out.tensorize(x:0,k:4)")
    A = torch.randn(4, 0)
    torch.testing.assert_close(module.sum_out(A), torch.zeros(4))
    torch.testing.assert_close(module.reference(A), torch.zeros(4))


def test_zero_size_softmax(tmp_path):
    module = compile_dt(tmp_path, CONFORMANCE / "l3_03_softmax.dt")
    assert module.softmax_out(torch.randn(0, 7)).shape == (0, 7)
    assert module.softmax_out(torch.randn(3, 0)).shape == (3, 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_output_keeps_input_dtype(add_out, dtype):
    A, B = inputs(dtype=dtype)
    got = add_out.add_out(A, B, 2.0)
    assert got.dtype == dtype
    assert add_out.reference(A, B, 2.0).dtype == dtype
    torch.testing.assert_close(got.float(), (2.0 * (A.float() + B.float())).to(dtype).float(),
                               rtol=2e-2, atol=2e-2)


def test_non_contiguous_inputs(add_out):
    """Transposed, sliced and expanded views: kernels index through strides."""
    g = torch.Generator().manual_seed(2)
    A = torch.randn(7, 6, generator=g).t()                  # (6, 7), strides (1, 6)
    B = torch.randn(6, 14, generator=g)[:, ::2]             # (6, 7), strides (14, 2)
    assert not A.is_contiguous() and not B.is_contiguous()
    torch.testing.assert_close(add_out.add_out(A, B, 1.5), 1.5 * (A + B))
    C = torch.randn(1, 7, generator=g).expand(6, 7)         # stride 0
    torch.testing.assert_close(add_out.add_out(A, C, 1.5), 1.5 * (A + C))


def test_non_contiguous_reduction_input(rms_norm):
    g = torch.Generator().manual_seed(3)
    X = torch.randn(16, 5, generator=g).t()
    W = torch.randn(32, generator=g)[::2]
    got = rms_norm.rms_norm_out(X, W, 1e-5, 1.0)
    torch.testing.assert_close(got, rms_norm.reference(X.contiguous(), W.contiguous(), 1e-5, 1.0))


@pytest.mark.parametrize("stem", ["l4_03_2mm", "l4_04_attention", "l3_20_sum_block_reduction",
                                  "l4_02_softmax", "l3_14_swish_fuse_x"])
def test_column_major_inputs(tmp_path, stem):
    """Column-major copies of every 2-D input, through tl.dot, split reductions and fusion."""
    from conftest import file_sizes, tolerance
    module = compile_dt(tmp_path, CONFORMANCE / f"{stem}.dt")
    sizes = {k: v + 3 for k, v in file_sizes(CONFORMANCE / f"{stem}.dt").items()}
    args = module.make_inputs(sizes, dtype=torch.float32, seed=3)
    column_major = tuple(a.t().contiguous().t() if isinstance(a, torch.Tensor) and a.dim() == 2
                         else a for a in args)
    assert any(isinstance(a, torch.Tensor) and not a.is_contiguous() for a in column_major)
    kwargs = {module.SIZE_KEYWORDS[k]: v for k, v in sizes.items()}
    got = getattr(module, module.COMPILED[0])(*column_major, **kwargs)
    want = module.reference(*args, **kwargs)
    rtol, atol = (1e-2, 1e-2) if module.DOT_PRECISION == "tf32" else tolerance(torch.float32)
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol * max(1.0, want.abs().max().item()))
    assert_matches_oracle(got, ORACLES[stem](args, sizes), module, torch.float32)


def test_rms_norm_tied_sizes(rms_norm):
    """y and k label the same dimension of X: inferred from it, and checked against W."""
    X, W = torch.randn(4, 16), torch.randn(16)
    assert rms_norm.rms_norm_out(X, W, 1e-5, 1.0).shape == (4, 16)
    with pytest.raises(ValueError, match=r"size of y disagrees: W.shape\[0\] is 15"):
        rms_norm.rms_norm_out(X, torch.randn(15), 1e-5, 1.0)
    with pytest.raises(ValueError, match=r"size of k disagrees"):
        rms_norm.rms_norm_out(X, W, 1e-5, 1.0, k=15)


def test_make_inputs(add_out):
    a = add_out.make_inputs({"x": 3, "y": 4}, dtype=torch.float16, seed=5)
    b = add_out.make_inputs({"x": 3, "y": 4}, dtype=torch.float16, seed=5)
    assert [t.shape for t in a[:2]] == [(3, 4), (3, 4)] and a[0].dtype == torch.float16
    assert all(torch.equal(p, q) for p, q in zip(a[:2], b[:2])) and a[2] == b[2]
    with pytest.raises(ValueError, match="sizes lacks y"):
        add_out.make_inputs({"x": 3})


# ----------------------------------------------------------------------------------------------
# Labels and layouts.

def test_label_only_on_output(tmp_path):
    path = write_dt(tmp_path, """\
        Func f;
        In A;
        Var x, y;
        f[x, y] = A[x] * 2.0;
        f.tensorize(y:0);
        f.compile();
        """)
    module = compile_dt(tmp_path, path)
    A = torch.randn(3)
    with pytest.raises(ValueError, match=r"the size of y cannot be inferred from the inputs; pass y=\.\.\."):
        module.f(A)
    got = module.f(A, y=4)
    assert got.shape == (3, 4)
    torch.testing.assert_close(got, (2.0 * A)[:, None].expand(3, 4))
    torch.testing.assert_close(module.reference(A, y=4), got)
    assert module.f(A, y=0).shape == (3, 0)
    with pytest.raises(ValueError, match="y must be a non-negative integer, got -1"):
        module.f(A, y=-1)
    check_module(module, {"x": 5, "y": 7}, torch.float16)


@pytest.mark.parametrize("schedule", [
    "", "f.tensorize(x:0,y:0)", "f.block(x:2,y:4);f.tensorize(x:2,y:4);f.map(y,x)",
    "f.block(x:3);f.tensorize(y:0)",
])
def test_transposed_access(tmp_path, schedule):
    path = write_dt(tmp_path, """\
        Func f;
        In A, B;
        Var x, y;
        f[x, y] = A[x, y] + B[y, x];
        f.compile();
        """)
    module = compile_dt(tmp_path, path, schedule=schedule)
    A, B = torch.randn(5, 7), torch.randn(7, 5)
    torch.testing.assert_close(module.f(A, B), A + B.t())
    with pytest.raises(ValueError, match="size of"):
        module.f(A, torch.randn(5, 7))
    check_module(module, {"x": 6, "y": 3}, torch.float32)


def test_broadcast_row_vector(tmp_path):
    """A[x, y] + B[y]: B broadcasts along x (the thesis' broadcasting example)."""
    path = write_dt(tmp_path, """\
        Func f;
        In A, B;
        Var x, y;
        f[x, y] = A[x, y] + B[y];
        f.block(x:2);
        f.tensorize(x:0, y:0);
        f.compile();
        """)
    module = compile_dt(tmp_path, path)
    A, B = torch.randn(5, 7), torch.randn(7)
    torch.testing.assert_close(module.f(A, B), A + B)


def test_output_label_order_differs_from_input(tmp_path):
    """f[y, x] = A[x, y]: a transpose."""
    path = write_dt(tmp_path, """\
        Func f;
        In A;
        Var x, y;
        f[y, x] = A[x, y];
        f.tensorize(x:0, y:0);
        f.compile();
        """)
    module = compile_dt(tmp_path, path)
    A = torch.randn(5, 7)
    torch.testing.assert_close(module.f(A), A.t())


# ----------------------------------------------------------------------------------------------
# The dtc command line.

def test_cli_output_file_and_stdout(tmp_path):
    src = CONFORMANCE / "fma.dt"
    out = tmp_path / "fma_out.py"
    result = run_dtc(src, "-o", out)
    assert result.returncode == 0 and result.stdout == "" and result.stderr == ""
    stdout = run_dtc(src)
    assert stdout.returncode == 0
    assert out.read_text() == stdout.stdout
    assert run_dtc(src, "--emit=python").stdout == stdout.stdout
    module = load_module(out)
    check_module(module, {"x": 3, "y": 4}, torch.float32, oracle=ORACLES["fma"])


def test_cli_check(tmp_path):
    result = run_dtc(CONFORMANCE / "fma.dt", "--check")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    bad = write_dt(tmp_path, """\
        Func f;
        In A;
        Var x;
        f[x] = B[x];
        f.compile();
        """)
    result = run_dtc(bad, "--check")
    assert result.returncode == 1
    assert "B" in result.stderr and "error" in result.stderr
    out = tmp_path / "bad.py"
    result = run_dtc(bad, "-o", out)
    assert result.returncode == 1 and not out.exists()


def test_cli_emit_ast_and_ir():
    src = CONFORMANCE / "l3_12_swish.dt"
    ast_text = run_dtc(src, "--emit=ast")
    assert ast_text.returncode == 0
    assert "Define swish_out[x, y]" in ast_text.stdout and "Decl SIn beta" in ast_text.stdout
    ir_text = run_dtc(src, "--emit=ir")
    assert ir_text.returncode == 0
    assert "swish_out[x, y] = A[x, y] * tmp[x, y]" in ir_text.stdout
    assert re.search(r"^Func tmp$", ir_text.stdout, re.M)


def test_cli_canonical_and_schedule_override(tmp_path):
    src = CONFORMANCE / "l3_11_relu_map.dt"
    assert run_dtc(src, "--canonical").stdout.strip() == \
        "relu_out.block(x:8,y:16);relu_out.map(x:xi/4,y,xi)"
    new = "relu_out.tensorize( y : 0 ) ; relu_out.block(x:4)"
    result = run_dtc(src, "--canonical", "--schedule", new)
    assert result.returncode == 0
    assert result.stdout.strip() == "relu_out.block(x:4);relu_out.tensorize(y:0)"
    # the file's compile statement stays: the module still compiles relu_out
    module = compile_dt(tmp_path, src, schedule=new)
    assert module.COMPILED == ("relu_out",)
    assert module.SCHEDULE == "relu_out.block(x:4);relu_out.tensorize(y:0)"
    check_module(module, {"x": 9, "y": 5}, torch.float32, oracle=ORACLES["l3_11_relu_map"])
    # an empty schedule is the default schedule
    assert run_dtc(src, "--canonical", "--schedule", "").stdout.strip() == ""
    # an illegal schedule is an error (exit 1) that points into the schedule text
    bad = run_dtc(src, "--schedule", "relu_out.block(q:2)")
    assert bad.returncode == 1 and "<schedule>:1:" in bad.stderr


@pytest.mark.parametrize("args", [
    ["--bogus"], ["--emit=llvm"], ["-o"], ["--schedule"], ["EXTRA.dt"], [],
])
def test_cli_usage_errors(args):
    result = run_dtc(*([CONFORMANCE / "fma.dt"] if args != [] else []), *args)
    assert result.returncode == 2, result
    assert result.stderr


def test_cli_missing_file(tmp_path):
    result = run_dtc(tmp_path / "missing.dt")
    assert result.returncode == 2
    assert "missing.dt" in result.stderr


def test_cli_help():
    result = run_dtc("--help")
    assert result.returncode == 0
    assert "usage: dtc" in result.stdout + result.stderr


# ----------------------------------------------------------------------------------------------
# The generated module is readable Python.

# Measured on the conformance programs: kernel statements (a tl.load or tl.store with its address
# and mask) reach 162 characters (l3_20's partial-sum store); reference expressions, docstrings and
# the SCHEDULE line hold a whole algorithm or schedule on one line and reach 329 (l4_01_geglu's
# reference). The limits leave about 10% headroom.
KERNEL_LINE_LIMIT = 180
ANY_LINE_LIMIT = 360


def kernel_code_lines(source):
    """Lines of @triton.jit functions, without docstrings and comments."""
    tree = ast.parse(source)
    lines = source.splitlines()
    skip = set()
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(
                "jit" in ast.unparse(d) for d in node.decorator_list):
            doc = node.body[0]
            if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant):
                skip.update(range(doc.lineno, doc.end_lineno + 1))
            for n in range(node.lineno, node.end_lineno + 1):
                text = lines[n - 1]
                if n not in skip and not text.strip().startswith("#"):
                    out.append(text)
    return out


@pytest.mark.parametrize("path", sorted(CONFORMANCE.glob("*.dt")), ids=lambda p: p.stem)
def test_generated_module_is_readable(path):
    result = run_dtc(path)
    assert result.returncode == 0, result.stderr
    source = result.stdout
    compile(source, str(path), "exec")
    for line in source.splitlines():
        assert len(line) <= ANY_LINE_LIMIT, line
        assert line == line.rstrip() and "\t" not in line
    for line in kernel_code_lines(source):
        assert len(line) <= KERNEL_LINE_LIMIT, line
    assert source.endswith("\n") and not source.endswith("\n\n\n")
