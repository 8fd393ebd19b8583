"""A user's names are the API. Every name of the lists that the generated module renames
(docs/language.md, "Names in the generated Python": Python keywords and builtins, the module's own
names, the wrappers' locals, the runtime's prefixes, dunders) used as a Func, an In and a label:
compiled, each compiled Func called under its DT name (through the module attribute wherever the
module does not itself define that name, and through PYTHON_NAMES always), sizes given by DT
label, checked against torch written by hand; and explored end to end under the interpreter."""
import builtins
import json
import keyword
import os
import pathlib
import subprocess

import pytest
import torch

from conftest import ROOT, compile_dt, load_module, run_dtc

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0")

DTX = pathlib.Path(os.environ.get("DTX", ROOT / "build" / "explorer" / "dtx"))

KEYWORDS = sorted(set(keyword.kwlist) | set(keyword.softkwlist) | {"type"})
BUILTINS = sorted(n for n in dir(builtins) if not n.startswith("__") and n != "_")
# The module's own names: its imports, its constants and aliases, the runtime's class.
MODULE_NAMES = ["tl", "triton", "torch", "math", "os", "numbers", "reference", "make_inputs",
                "SIZE_KEYWORDS", "SCHEDULE", "COMPILED", "DOT_PRECISION", "DOT_PRECISIONS",
                "PYTHON_NAMES", "INPUTS_KEY", "CudaGraph"]
# Locals of the wrappers and kernels, and names that only look like the runtime's.
LOCALS = ["out", "key", "plan", "work", "index", "checked", "direct", "pid", "grid", "dtype",
          "device", "generator", "sizes", "seed", "self", "cls", "layout", "run", "head"]
PREFIXED = ["_dt_key", "_DT_ALIASES", "_DtPlan", "__getattr__", "__name__", "__file__",
            "__dir__", "__builtins__"]
GROUPS = {"keywords": KEYWORDS, "builtins": BUILTINS, "module_names": MODULE_NAMES,
          "locals": LOCALS, "prefixed": PREFIXED}
# What the module defines itself, so that its attribute of that name stays its own.
OWN = {"tl", "triton", "torch", "math", "os", "numbers", "SCHEDULE", "COMPILED", "DOT_PRECISION",
       "DOT_PRECISIONS", "PYTHON_NAMES", "INPUTS_KEY", "CudaGraph", "_dt_key", "_DT_ALIASES", "_DtPlan", "__getattr__",
       "__name__", "__file__", "__dir__", "__builtins__"}


def dt_legal(tmp_path_factory, names):
    """The names DT accepts as symbols (its own reserved words, `len` or `exp`, it refuses)."""
    d = tmp_path_factory.mktemp("probe")
    legal = []
    for name in names:
        path = d / "probe.dt"
        path.write_text(f"Func f;\nIn {name};\nVar x;\nf[x] = {name}[x];\nf.compile();\n")
        r = run_dtc(path, "--check")
        assert r.returncode in (0, 1), r.stderr
        if r.returncode == 0:
            legal.append(name)
    return legal


@pytest.fixture(scope="module")
def legal(tmp_path_factory):
    return {group: dt_legal(tmp_path_factory, names) for group, names in GROUPS.items()}


def write(tmp_path, name, text):
    path = tmp_path / f"{name}.dt"
    path.write_text(text)
    return path


@pytest.mark.parametrize("group", list(GROUPS))
def test_funcs_called_by_their_dt_names(tmp_path, legal, group):
    names = legal[group]
    assert len(names) >= len(GROUPS[group]) // 2, names  # DT refuses only a few of them
    lines = ["Func " + ", ".join(names) + ";", "In A;", "Var x;"]
    for i, name in enumerate(names):
        lines.append(f"{name}[x] = A[x] * {i + 2};")
        lines.append(f"{name}.compile();")
    module = compile_dt(tmp_path, write(tmp_path, group, "\n".join(lines) + "\n"))
    assert module.COMPILED == tuple(names)
    assert set(module.PYTHON_NAMES) == set(names)
    A = torch.randn(7)
    for i, name in enumerate(names):
        python = module.PYTHON_NAMES[name]
        fn = getattr(module, python)
        if name in OWN:  # the module's own name stays its own; the table reaches the Func
            assert getattr(module, name) is not fn
        else:
            assert getattr(module, name) is fn, name
            assert name in dir(module)
            for prefix in ("reference_", "make_inputs_", "SIZE_KEYWORDS_"):
                assert getattr(module, prefix + name) is getattr(module, prefix + python)
        torch.testing.assert_close(fn(A), A * (i + 2))
        torch.testing.assert_close(fn(A, out=torch.empty(7)), A * (i + 2))
        torch.testing.assert_close(getattr(module, "reference_" + python)(A), A * (i + 2))


def test_func_out_keeps_the_out_keyword(tmp_path):
    """`module.out(A, out=buffer)`: the wrapper of a Func called `out` takes PyTorch's `out=`."""
    module = compile_dt(tmp_path, write(tmp_path, "out", """\
        Func out;
        In A, B;
        Var x, y;
        out[x, y] = A[x, y] * B[x, y] + 1;
        out.block(x:2);
        out.compile();
        """))
    A, B = torch.randn(3, 5), torch.randn(3, 5)
    buffer = torch.empty(3, 5)
    assert module.out(A, B, out=buffer) is buffer
    torch.testing.assert_close(buffer, A * B + 1)
    torch.testing.assert_close(module.out(A, B, x=3, y=5), A * B + 1)
    namespace = {}  # a from-import finds the name through the module's __getattr__ too
    exec(f"from {module.__name__} import out, reference_out", namespace)
    torch.testing.assert_close(namespace["out"](A, B), namespace["reference_out"](A, B))
    assert module.reference is module.reference_out_ and module.COMPILED == ("out",)


def test_func_named_reference_takes_the_generic_name(tmp_path):
    """Internal names yield: a compiled Func called `reference` is `module.reference`, and the
    generic alias of the first Func's reference is not printed."""
    module = compile_dt(tmp_path, write(tmp_path, "ref", """\
        Func reference, make_inputs;
        In A;
        Var x;
        reference[x] = A[x] + 1;
        make_inputs[x] = A[x] * 3;
        reference.compile();
        make_inputs.compile();
        """))
    A = torch.randn(4)
    torch.testing.assert_close(module.reference(A), A + 1)
    torch.testing.assert_close(module.make_inputs(A), A * 3)
    torch.testing.assert_close(module.reference_reference(A), A + 1)
    assert isinstance(module.SIZE_KEYWORDS, dict)  # not claimed: still the first Func's


@pytest.mark.parametrize("group", list(GROUPS))
def test_inputs_named_like_python(tmp_path, legal, group):
    names = legal[group]
    total = " + ".join(f"{name}[x, y] * {i + 1}" for i, name in enumerate(names))
    module = compile_dt(tmp_path, write(tmp_path, group, f"""\
Func f;
In {", ".join(names)};
Var x, y;
f[x, y] = {total};
f.block(x:2);
f.tensorize(y:0);
f.compile();
"""))
    args = module.make_inputs({"x": 3, "y": 4}, seed=1)
    assert len(args) == len(names)
    want = sum(a * (i + 1) for i, a in enumerate(args))
    torch.testing.assert_close(module.f(*args), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("group", list(GROUPS))
def test_labels_named_like_python(tmp_path, legal, group):
    """Each name a label of its own Func (two labels each, one reduced): sizes given by DT label
    to make_inputs and, through SIZE_KEYWORDS, to the wrapper."""
    names = legal[group]
    pairs = [(names[i], names[(i + 1) % len(names)]) for i in range(len(names))]
    lines = ["Func " + ", ".join(f"g{i}" for i in range(len(pairs))) + ";",
             "In " + ", ".join(f"A{i}" for i in range(len(pairs))) + ";",
             "Var " + ", ".join(names) + ";"]
    for i, (a, b) in enumerate(pairs):
        lines += [f"g{i}[{a}, {b}] = A{i}[{a}, {b}] * 2 + 1;", f"g{i}.compile();"]
    module = compile_dt(tmp_path, write(tmp_path, group, "\n".join(lines) + "\n"))
    for i, (a, b) in enumerate(pairs):
        sizes = {a: 2, b: 3} if a != b else {a: 2}
        keywords = getattr(module, f"SIZE_KEYWORDS_g{i}")
        assert set(keywords) == set(sizes)
        (A,) = getattr(module, f"make_inputs_g{i}")(sizes, seed=i)
        assert tuple(A.shape) == (sizes[a], sizes[b])
        got = getattr(module, f"g{i}")(A, **{keywords[label]: n for label, n in sizes.items()})
        torch.testing.assert_close(got, A * 2 + 1)


EXPLORED = """\
Func out, sum;
In input, max;
Var class, id;
RVar lambda;
sum[class] = rsum(input[class, lambda] * max[class, lambda], lambda);
out[class, id] = input[class, id] / (sum[class] + 100);
out.compile();
"""

EXPLORED_TEMPLATE = """\
kernel: out_names
algorithm: out_names.dt
compile: [out]
schedule: |
  out.block(class:{1, 2});
  out.tensorize(class:0, id:{0, 8});
  ?sum.fuse_at(out, class);
test_shapes:
  - {class: 3, id: 16, lambda: 16}
shapes:
  - {class: 3, id: 16, lambda: 16}
dtype: float32
baselines: [reference]
"""


def test_explored_under_user_names(tmp_path):
    """A program whose compiled Func is `out` (every candidate and baseline failed with "`func`
    'out' is not a compiled Func of the module") explores end to end: every candidate measured
    and correct, and `dtx best` writes a module whose `out` computes it."""
    if not DTX.exists():
        pytest.fail(f"{DTX} is not built; run deploy/setup.sh")
    (tmp_path / "out_names.dt").write_text(EXPLORED)
    (tmp_path / "t.yaml").write_text(EXPLORED_TEMPLATE)
    db = tmp_path / "x.db"
    tiny = ["--screen-warmup", "1", "--screen-rep", "2", "--full-warmup", "1", "--full-rep", "2",
            "--rounds", "1", "--top", "1", "--timeout", "120"]
    r = subprocess.run([str(DTX), "explore", tmp_path / "t.yaml", "--test-shapes", "--strategy",
                        "exhaustive", "--db", db, "--json", *tiny],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)[0]
    assert summary["state"] == "done" and summary["measured"] == 8 and summary["failed"] == 0, \
        summary
    best = tmp_path / "best.py"
    r = subprocess.run([str(DTX), "best", "out_names", "--shape", "class=3,id=16,lambda=16",
                        "--db", db, "-o", best], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    module = load_module(best)
    x, w = torch.randn(3, 16), torch.randn(3, 16)
    torch.testing.assert_close(module.out(x, w), x / ((x * w).sum(1, keepdim=True) + 100))
