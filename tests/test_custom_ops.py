"""Generated kernels as torch custom ops (compiler/runtime/dt_runtime.py: custom_op,
docs/python.md): a model calling two of them compiles under torch.compile(fullgraph=True) and
matches eager, the fake implementation passes torch.library.opcheck, torch.export records the
ops, and autograd refuses a backward until one written in DT is registered."""
import pytest
import torch

from conftest import ROOT, compile_dt, compile_source

TEMPLATES = ROOT / "templates"
MUL = """\
Func mul;
In A, B;
Var x, y;
mul[x, y] = A[x, y] * B[x, y];
mul.block(x:1, y:64);
mul.tensorize(x:0, y:0);
mul.compile();
"""


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ops")
    return compile_dt(tmp, TEMPLATES / "rmsnorm.dt"), compile_dt(tmp, TEMPLATES / "swiglu.dt")


class Block(torch.nn.Module):
    """A transformer MLP block: RMSNorm, then SwiGLU between two projections, and the residual."""

    def __init__(self, rms, swiglu, dim=64, hidden=128):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.norm = torch.nn.Parameter(torch.randn(dim, generator=g))
        self.up = torch.nn.Parameter(torch.randn(dim, 2 * hidden, generator=g) / dim ** 0.5)
        self.down = torch.nn.Parameter(torch.randn(hidden, dim, generator=g) / hidden ** 0.5)
        self.rms, self.swiglu = rms.custom_op(), swiglu.custom_op()

    def forward(self, x):
        h = self.rms(x, self.norm, 1e-6, 0.0)  # Eps, Offset
        gate, value = (h @ self.up).chunk(2, dim=-1)
        return x + self.swiglu(gate.contiguous(), value.contiguous()) @ self.down


def eager_block(block, x):
    h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * block.norm
    gate, value = (h @ block.up).chunk(2, dim=-1)
    return x + (gate * torch.sigmoid(gate) * value) @ block.down


def test_ops_are_named_by_module_and_func(kernels):
    rms, swiglu = kernels
    op = rms.custom_op()
    namespace, name = op._qualname.split("::")
    assert namespace.startswith("dtx_") and name == "rms_norm_out"
    assert swiglu.custom_op()._qualname.split("::")[0] != namespace
    assert rms.custom_op("rms_norm_out") is op  # made once
    with pytest.raises(ValueError, match="'nope' is not a compiled Func of this module"):
        rms.custom_op("nope")


def test_the_same_module_imported_twice_shares_its_op(kernels, tmp_path):
    again = compile_dt(tmp_path, TEMPLATES / "rmsnorm.dt", name="again")
    op = again.custom_op()
    X, W = torch.randn(3, 64), torch.randn(64)
    torch.testing.assert_close(op(X, W, 1e-6, 0.0), kernels[0].rms_norm_out(X, W, 1e-6, 0.0))


def test_opcheck(kernels):
    rms, swiglu = kernels
    X, W = torch.randn(4, 64), torch.randn(64)
    torch.library.opcheck(rms.custom_op(), (X, W, 1e-5, 0.5))
    A, B = torch.randn(4, 96), torch.randn(4, 96)
    torch.library.opcheck(swiglu.custom_op(), (A, B))


def test_model_under_torch_compile_fullgraph_matches_eager(kernels):
    block = Block(*kernels)
    x = torch.randn(8, 64)
    with torch.no_grad():
        want = eager_block(block, x)
        torch.testing.assert_close(block(x), want, rtol=1e-4, atol=1e-4)
        torch._dynamo.reset()
        compiled = torch.compile(block, fullgraph=True)
        torch.testing.assert_close(compiled(x), want, rtol=1e-4, atol=1e-4)


def test_export_records_the_ops(kernels):
    block = Block(*kernels)
    program = torch.export.export(block, (torch.randn(8, 64),))
    targets = {str(n.target) for n in program.graph.nodes if n.op == "call_function"}
    for op in (block.rms, block.swiglu):
        assert f"{op._qualname.replace('::', '.')}.default" in targets, targets
    x = torch.randn(8, 64)
    with torch.no_grad():
        torch.testing.assert_close(program.module()(x), eager_block(block, x), rtol=1e-4,
                                   atol=1e-4)


def test_no_backward_until_one_written_in_dt_is_registered(tmp_path):
    mul, _ = compile_source(tmp_path, MUL, name="mul")
    op = mul.custom_op()
    A = torch.randn(4, 64, requires_grad=True)
    B = torch.randn(4, 64, requires_grad=True)
    with pytest.raises(RuntimeError, match="no autograd formula was registered"):
        op(A, B).sum().backward()

    # The backward: a second DT program, d(A*B) = G*B and G*A, as its own op.
    grad = compile_source(tmp_path, MUL.replace("mul", "mul_grad"), name="mul_grad")[0]
    grad_op = grad.custom_op()

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return grad_op(g.contiguous(), b), grad_op(g.contiguous(), a)

    torch.library.register_autograd(op, backward, setup_context=setup_context)
    G = torch.randn(4, 64)
    op(A, B).backward(G)
    torch.testing.assert_close(A.grad, G * B)
    torch.testing.assert_close(B.grad, G * A)


def test_size_keywords_pass_through_the_op(tmp_path):
    """A label no input gives a size to (`y` of `f[x, y] = A[x]`) is named as the wrapper names
    it, by keyword; the fake implementation gives the shape it implies, opcheck agrees, and a
    size that contradicts an input is the wrapper's error. Ops whose sizes all come from their
    inputs keep the positional schema (the autograd example's setup_context relies on it)."""
    module, _ = compile_source(tmp_path, "Func f;\nIn A;\nVar x, y;\nf[x, y] = A[x] * 2.0;\n"
                                         "f.compile();\n")
    op = module.custom_op()
    A = torch.randn(5)
    got = op(A, y=3)
    assert torch.equal(got, (A * 2)[:, None].expand(5, 3))
    torch.library.opcheck(op, (A,), {"y": 3})
    compiled = torch.compile(lambda a: op(a, y=4), fullgraph=True, backend="eager")
    assert compiled(A).shape == (5, 4)
    with pytest.raises(ValueError, match="x"):
        op(A, x=6, y=3)
    def schema(op):
        namespace, name = op._qualname.split("::")
        return str(getattr(getattr(torch.ops, namespace), name).default._schema)
    assert schema(op).endswith("(Tensor A, *, SymInt? x=None, SymInt? y=None) -> Tensor")
    product, _ = compile_source(tmp_path, MUL.replace("mul", "product"), name="product")
    assert schema(product.custom_op()).endswith("(Tensor A, Tensor B) -> Tensor")
