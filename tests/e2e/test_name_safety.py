"""Name safety: DT names that are Python keywords or builtins, module names of the generated code
(tl, torch, triton, os), module-level names of the module (reference, SCHEDULE, ...) or names the
code generator derives (x_size, A_ptr, k_acc, dot_operand, ...) compile into a module that imports
and computes the right values under the interpreter."""
import inspect
import resource
import subprocess
import textwrap

import pytest
import torch

from conftest import CONFORMANCE, DTC, check_module, compile_dt, run_dtc

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0")

PROGRAMS = {
    # The names of the issue: builtins, modules of the generated code, a Python keyword, a name
    # derived from a label (x_size, with Var x).
    "issue_names": ("""\
        Func range;
        In tl, torch, x_size;
        SIn lambda;
        Var x, def;
        range[x, def] = tl[x, def] * lambda + torch[x, def] - x_size[x, def];
        range.block(x:2, def:3);
        range.tensorize(def:2);
        range.compile();
        """, {"x": 5, "def": 7}),
    # The same names under the default (sequential) schedule.
    "issue_names_default": ("""\
        Func range;
        In tl, torch, x_size;
        SIn lambda;
        Var x, def;
        range[x, def] = tl[x, def] * lambda + torch[x, def] - x_size[x, def];
        range.compile();
        """, {"x": 3, "def": 4}),
    # Python keywords and soft keywords for every kind of symbol, a reduction over `in`, and a
    # name that the renaming of another name (`tl` -> `tl_`) produces.
    "keywords": ("""\
        Func if, class;
        In None, True, tl, tl_;
        SIn lambda, print, self;
        Var for, _;
        RVar in;
        class[for, _] = None[for, _] * lambda + True[for, _] * print + tl[for, _] - tl_[for, _];
        if[for] = rsum(class[for, in] * self, in);
        if.block(for:2);
        if.tensorize(for:0, in:4);
        class.tensorize(_:0);
        if.compile();
        """, {"for": 5, "_": 6, "in": 6}),
    # Module-level names of the generated module and locals of its wrappers.
    "module_names": ("""\
        Func reference, make_inputs, SIZE_KEYWORDS_reference;
        In triton, os, math, float, int;
        SIn dtype, device, generator;
        Var sizes, seed, x_size;
        RVar sum, range;
        make_inputs[sizes, seed] = triton[sizes, seed] * dtype + os[sizes, seed];
        reference[sizes] = rsum(make_inputs[sizes, sum] * math[sizes, sum], sum) +
                           rmax(float[sizes, range], range) * device;
        SIZE_KEYWORDS_reference[x_size] = int[x_size] * generator;
        reference.tensorize(sizes:2, sum:0, range:0);
        make_inputs.tensorize(seed:0);
        reference.compile();
        SIZE_KEYWORDS_reference.compile();
        """, {"sizes": 5, "seed": 6, "sum": 6, "range": 4, "x_size": 3}),
    # Names of a reduction's generated locals.
    "reduction_locals": ("""\
        Func k_vec;
        In k_sum, x_range, k_range, k_mask, x_idx;
        Var x;
        RVar k;
        k_vec[x] = rsum(k_sum[x, k] * k_range[x, k] + k_mask[x, k], k) + x_range[x] * x_idx[x];
        k_vec.tensorize(x:2, k:4);
        k_vec.compile();
        """, {"x": 5, "k": 7}),
    # Names of the tl.dot lowering's locals.
    "dot_locals": ("""\
        Func out, dot_operand;
        In A, dot_B, B, A_tile, k_acc, k_dot, C, dot_C, l_dot;
        Var m, n;
        RVar k, l;
        dot_operand[m, l] = rdot(A[m, k] + A_tile[m, k], B[k, l] + k_acc[k, l] + k_dot[k, l], k);
        out[m, n] = rdot(dot_operand[m, l], C[l, n] + dot_C[l, n] + dot_B[l, n] + l_dot[l, n], l);
        out.block(m:16);
        out.tensorize(m:16, n:16, k:16, l:0);
        dot_operand.fuse_at(out, m);
        out.compile();
        """, {"m": 20, "n": 9, "k": 5, "l": 6}),
    # Names of the program-instance mapping's locals.
    "map_locals": ("""\
        Func pid;
        In x_blocks, os, y_vec_mask, y_TILE, x_start, y_end, grid;
        Var x, y;
        pid[x, y] = x_blocks[x, y] + os[x, y] + y_vec_mask[x, y] + y_TILE[x, y] + x_start[x, y] +
                    y_end[x, y] + grid[x, y];
        pid.block(x:2, y:4);
        pid.tensorize(y:0);
        pid.map(x:xi/2, xi, y);
        pid.compile();
        """, {"x": 5, "y": 7}),
    # Names of a split reduction's partials (`s_partial`, `k_parts`).
    "split_reduction_locals": ("""\
        Func s;
        In A, s_partial, k_parts;
        Var x;
        RVar k;
        s[x] = rsum(A[x, k] * s_partial[x, k] + k_parts[x, k], k);
        s.block(k:4);
        s.tensorize(x:0, k:0);
        s.compile();
        """, {"x": 5, "k": 13}),
    # Names generated from a split reduction's partials (`s_partial_kernel`, `k_parts_size`).
    "split_reduction_generated": ("""\
        Func s, s_partial_kernel;
        In A, s_partial_ptr, k_parts_size;
        Var x;
        RVar k;
        s[x] = rsum(A[x, k] * s_partial_ptr[x, k] + k_parts_size[x, k], k);
        s_partial_kernel[x] = s[x] * 2.0;
        s.block(k:4);
        s.tensorize(x:0, k:0);
        s_partial_kernel.compile();
        s.compile();
        """, {"x": 5, "k": 13}),
    # The name of a fusion temporary (`tmp_fuse`: tmp fused at x, y not tensorized).
    "fusion_temporary": ("""\
        Func swish_out, tmp;
        In A, tmp_fuse;
        SIn beta;
        Var x, y;
        tmp[x, y] = sigmoid(beta * A[x, y]);
        swish_out[x, y] = A[x, y] * tmp[x, y] + tmp_fuse[x, y];
        tmp.fuse_at(swish_out, x);
        swish_out.compile();
        """, {"x": 5, "y": 6}),
    # Inputs named like a map split's locals (`xi_pid`) and the split itself.
    "map_split_locals": ("""\
        Func f;
        In A, xi_pid, x_pid;
        Var x, y;
        f[x, y] = A[x, y] + xi_pid[x, y] * x_pid[x, y];
        f.block(x:2, y:2);
        f.tensorize(y:0);
        f.map(x:xi/2, xi, y);
        f.compile();
        """, {"x": 5, "y": 6}),
}


def write(tmp_path, name, text):
    path = tmp_path / f"{name}.dt"
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
def test_program_with_tricky_names(tmp_path, name, dtype):
    text, sizes = PROGRAMS[name]
    module = compile_dt(tmp_path, write(tmp_path, name, text))
    # the size keywords are Python identifiers, and renamed ones are reported
    for label, keyword in module.SIZE_KEYWORDS.items():
        assert keyword.isidentifier() and keyword.startswith(label)
    check_module(module, sizes, dtype)


def test_module_level_names_yield_to_funcs(tmp_path):
    """A compiled Func named `reference` is `module.reference` (the generic alias yields to the
    user's name); every compiled Func has a wrapper and its own reference."""
    text, sizes = PROGRAMS["module_names"]
    module = compile_dt(tmp_path, write(tmp_path, "module_names", text))
    assert module.COMPILED == ("reference", "SIZE_KEYWORDS_reference")
    assert module.PYTHON_NAMES == {"reference": "reference_",
                                   "SIZE_KEYWORDS_reference": "SIZE_KEYWORDS_reference__"}
    assert isinstance(module.SIZE_KEYWORDS, dict) and isinstance(module.SCHEDULE, str)
    assert module.reference is module.reference_
    assert module.reference_reference is module.reference_reference_
    # `SIZE_KEYWORDS_reference` is the Func, not the size keywords of the Func `reference`.
    assert module.SIZE_KEYWORDS_reference is module.SIZE_KEYWORDS_reference__
    second = module.PYTHON_NAMES[module.COMPILED[1]]
    args = getattr(module, "make_inputs_" + second)({"x_size": 4}, dtype=torch.float32, seed=1)
    torch.testing.assert_close(getattr(module, second)(*args),
                               getattr(module, "reference_" + second)(*args))


def test_func_named_dot_precision(tmp_path):
    """DOT_PRECISION is a module-level name of the generated module (the GPU check reads it to
    pick its tolerance): a Func with that name must not replace it with its wrapper."""
    path = write(tmp_path, "dotp", """\
        Func DOT_PRECISION;
        In A, B;
        Var m, n;
        RVar k;
        DOT_PRECISION[m, n] = rdot(A[m, k], B[k, n], k);
        DOT_PRECISION.tensorize(m:16, n:16, k:16);
        DOT_PRECISION.compile();
        """)
    module = compile_dt(tmp_path, path)
    check_module(module, {"m": 5, "n": 6, "k": 7}, torch.float32)
    assert module.DOT_PRECISION in (None, "tf32", "tf32x3", "ieee"), module.DOT_PRECISION
    assert module.DOT_PRECISIONS == {"DOT_PRECISION": "tf32"}, module.DOT_PRECISIONS


@pytest.mark.parametrize("decls,use", [
    ("Func f;\nIn _dt_A;\nVar x;", "f[x] = _dt_A[x];\nf.compile();"),
    ("Func _dt_f;\nIn A;\nVar x;", "_dt_f[x] = A[x];\n_dt_f.compile();"),
    ("Func f;\nIn A;\nVar _dt_x;", "f[_dt_x] = A[_dt_x];\nf.compile();"),
], ids=["In", "Func", "Var"])
def test_dt_prefix_names(tmp_path, decls, use):
    """Names starting with `_dt_` (the prefix of the module's helpers) are legal DT names: dtc
    must either rename them or reject them with a diagnostic, and return promptly (it used to
    loop forever, appending `_` to a name that kept its `_dt_` prefix)."""
    path = tmp_path / "p.dt"
    path.write_text(decls + "\n" + use + "\n")

    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    try:
        result = subprocess.run([str(DTC), str(path), "--check"], capture_output=True, text=True,
                                timeout=5, preexec_fn=limit_memory)
    except subprocess.TimeoutExpired:
        result = None
    if result is None:  # dtc takes milliseconds; it loops renaming the `_dt_` name, using memory
        pytest.fail("dtc --check did not finish in 5 s", pytrace=False)
    assert result.returncode in (0, 1), result
    if result.returncode == 0:
        module = compile_dt(tmp_path, path)
        check_module(module, {k: 4 for k in module.SIZE_KEYWORDS}, torch.float32)


@pytest.mark.parametrize("ident", ["pid", "x_size", "x_blocks", "y_block", "x_start", "y_end",
                                   "x_iter", "y_pid", "A_ptr", "relu_out_stride0", "tl", "range",
                                   "def", "None", "lambda"])
@pytest.mark.parametrize("nest", ["y:{0}/2,{0},x", "x,y:{0}/3,{0}"], ids=["outer", "inner"])
def test_map_split_names(tmp_path, ident, nest):
    """A map split may be named like a generated local, a module or a Python keyword."""
    schedule = "relu_out.block(x:2,y:3);relu_out.tensorize(y:0);relu_out.map(" + \
        nest.format(ident) + ")"
    module = compile_dt(tmp_path, CONFORMANCE / "l3_05_relu.dt", schedule=schedule)
    assert module.SCHEDULE == schedule
    check_module(module, {"x": 5, "y": 13}, torch.float32)


@pytest.mark.parametrize("word", ["Func", "In", "SIn", "Var", "RVar", "rsum", "rdot", "len",
                                  "reshape", "program_id", "exp", "maximum"])
def test_dt_reserved_words_rejected(tmp_path, word):
    """DT keywords and built-in functions cannot name symbols: a diagnostic, not a crash."""
    path = tmp_path / "p.dt"
    path.write_text(f"Func f;\nIn {word};\nVar x;\nf[x] = {word}[x];\nf.compile();\n")
    result = run_dtc(path, "--check")
    assert result.returncode == 1
    assert "error" in result.stderr


def test_names_of_the_wrappers_locals(tmp_path):
    """Symbols named like a wrapper's locals (its plan key, the plan, the temporaries' allocation,
    the index type, a tensor's kept strides, the direct launches): a first call, and later ones
    from the plan, with and without size keywords, compute the reference's values; `work` is a
    temporary of its own kernel, so the wrapper's allocation of temporaries is in play."""
    module = compile_dt(tmp_path, write(tmp_path, "wrapper_locals", """\
        Func plan, work;
        In key, index, checked, key_strides, direct, run, grid, head;
        Var x, y;
        RVar k;
        work[x] = rsum(key[x, k] * index[x, k], k);
        plan[x, y] = work[x] * checked[x, y] + key_strides[x, y] + direct[x, y] * run[x, y]
                     - grid[x, y] * head[x, y];
        work.block(x:2);
        work.tensorize(k:0);
        plan.compile();
        work.compile();
        """))
    assert module.COMPILED == ("plan", "work")
    assert module.PYTHON_NAMES == {"plan": "plan_", "work": "work_"}
    params = inspect.signature(module.plan_).parameters
    # direct is a local, grid a module-level name; run and head are free to keep their names.
    assert {"direct_", "grid_", "run", "head"} <= set(params), params
    sizes = {"x": 5, "y": 6, "k": 7}
    for seed in range(3):
        args = module.make_inputs_plan_(sizes, seed=seed)
        want = module.reference_plan_(*args)
        torch.testing.assert_close(module.plan_(*args), want)
        torch.testing.assert_close(module.plan_(*args, x=5), want)


def runtime_names():
    """Every name the module runtime binds at module level (compiler/runtime/*.py, what the
    modules carry), and the modules it imports."""
    import ast
    from conftest import ROOT
    names = set()
    for path in (ROOT / "compiler" / "runtime").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return sorted(n for n in names if n.isidentifier())


@pytest.mark.parametrize("name", runtime_names())
def test_funcs_named_like_the_runtime(tmp_path, name):
    """A compiled Func named like something of the module runtime (a helper, a constant, the
    plan class, an imported module) is renamed: its wrapper would otherwise replace it."""
    module = compile_dt(tmp_path, write(tmp_path, "runtime_name", f"""\
        Func {name}, t;
        In A;
        SIn s;
        Var x, y;
        t[x, y] = exp(A[x, y]) * s;
        {name}[x, y] = t[x, y] + A[y, x];
        {name}.compile();
        """))
    assert module.COMPILED == (name,)
    python = module.PYTHON_NAMES[name]
    fn = getattr(module, python)
    assert python != name
    A = torch.randn(3, 3)
    for _ in range(2):
        torch.testing.assert_close(fn(A, 1.5), A.exp() * 1.5 + A.t())
