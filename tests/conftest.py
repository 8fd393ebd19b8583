"""Shared fixtures: the built `dtc` binary and helpers to compile DT programs and import the
generated modules. Generated kernels run under the Triton interpreter (TRITON_INTERPRET=1)."""
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The thesis programs, kept in the repository so that a clone alone runs every test.
CONFORMANCE = ROOT / "tests" / "conformance"
# The shared copy beside the checkout (or at $DTX_SHARED_CONFORMANCE), when there is one: an extra
# check (tests/e2e/test_shared_conformance.py).
SHARED_CONFORMANCE = pathlib.Path(os.environ.get("DTX_SHARED_CONFORMANCE",
                                                 ROOT.parent / "shared" / "conformance"))
DTC = pathlib.Path(os.environ.get("DTC", ROOT / "build" / "compiler" / "dtc"))


def run_dtc(*args, stdin=None):
    """Runs dtc; returns the CompletedProcess (text mode)."""
    return subprocess.run([str(DTC), *map(str, args)], capture_output=True, text=True,
                          input=stdin, timeout=60)


_counter = [0]


def load_module(path):
    _counter[0] += 1
    name = f"dtgen_{path.stem}_{_counter[0]}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def compile_dt(tmp_path, source_file, schedule=None, name=None):
    """Compiles a .dt file (optionally with a replacement schedule) and imports the module."""
    out = tmp_path / ((name or pathlib.Path(source_file).stem) + ".py")
    args = [source_file, "-o", out]
    if schedule is not None:
        args += ["--schedule", schedule]
    result = run_dtc(*args)
    assert result.returncode == 0, result.stderr
    return load_module(out)


# The plain matrix product, which tests of the product's schedules (tma, persistent,
# warp_specialize) schedule each their own way.
MATMUL = """Func c;
In A, B;
Var m, n;
RVar k;
c[m, n] = rdot(A[m, k], B[k, n], k);
c.compile();
"""


def compile_source(tmp_path, source, schedule=None, name="prog"):
    """Compiles DT source text (optionally with a replacement schedule); returns the imported
    module and its text."""
    src = tmp_path / f"{name}.dt"
    src.write_text(source)
    out = tmp_path / f"{name}.py"
    result = run_dtc(src, "-o", out, *(["--schedule", schedule] if schedule is not None else []))
    assert result.returncode == 0, result.stderr
    return load_module(out), out.read_text()


def file_sizes(path):
    """The `# sizes: x=8 y=16` line of a conformance file, as a dict."""
    for line in pathlib.Path(path).read_text().splitlines():
        if line.startswith("# sizes:"):
            return {k: int(v) for k, v in (item.split("=") for item in line[8:].split())}
    raise ValueError(f"{path} has no sizes line")


def tolerance(dtype):
    import torch
    return {torch.float32: (1e-4, 1e-5), torch.float16: (1e-2, 1e-2),
            torch.bfloat16: (5e-2, 5e-2)}[dtype]


def _scale(want):
    """Reductions sum in another order than torch: absolute error grows with the magnitudes
    involved, so the absolute tolerance is scaled by the result's largest value."""
    return max(1.0, want.float().abs().nan_to_num(0.0, 0.0, 0.0).max().item()) if want.numel() else 1.0


def oracle_tolerance(module, dtype):
    """(rtol, atol) against a float64 oracle: the dtype's tolerance. On a GPU, float32 products
    that run on tl.dot with TF32 round their operands to 10-bit mantissas and get a looser one;
    the Triton interpreter computes tl.dot in float32 (np.matmul), so it gets float32's."""
    import torch
    if (dtype == torch.float32 and getattr(module, "DOT_PRECISION", None) == "tf32"
            and os.environ.get("TRITON_INTERPRET") != "1"):
        return (1e-2, 1e-2)
    return tolerance(dtype)


def assert_matches_oracle(got, oracle_value, module, dtype, what="kernel"):
    """`got` (a kernel's or the reference's output, in `dtype`) against a hand-written oracle's
    float64 value (tests/oracles.py)."""
    import torch
    assert got.dtype == dtype, f"{what} returned {got.dtype}, expected {dtype}"
    assert tuple(got.shape) == tuple(oracle_value.shape), \
        f"{what} returned shape {tuple(got.shape)}, the oracle {tuple(oracle_value.shape)}"
    rtol, atol = oracle_tolerance(module, dtype)
    try:
        torch.testing.assert_close(got.detach().cpu().double(), oracle_value, rtol=rtol,
                                   atol=atol * _scale(oracle_value), equal_nan=True)
    except AssertionError as e:
        raise AssertionError(f"{what} disagrees with the hand-written oracle: {e}") from None


def compiled_funcs(module):
    """Each compiled Func's DT name -> (wrapper, reference, make_inputs, SIZE_KEYWORDS), found
    through the module's PYTHON_NAMES table, which holds every name."""
    funcs = {}
    for dt, python in module.PYTHON_NAMES.items():
        funcs[dt] = tuple(getattr(module, prefix + python)
                          for prefix in ("", "reference_", "make_inputs_", "SIZE_KEYWORDS_"))
    assert tuple(funcs) == module.COMPILED
    return funcs


def check_module(module, sizes, dtype, seed=0, oracle=None):
    """Runs the module's first compiled Func on random inputs and compares with its reference and,
    when given, with `oracle` (a hand-written function of tests/oracles.py: (args, sizes) ->
    float64 output), which also checks the reference."""
    import torch
    funcs = compiled_funcs(module)
    fn, reference, make_inputs, keywords = funcs[module.COMPILED[0]]
    args = make_inputs(sizes, dtype=dtype, seed=seed)
    kwargs = {keywords[k]: v for k, v in sizes.items() if k in keywords}
    expected = oracle(args, sizes) if oracle is not None else None  # before the kernel runs
    got = fn(*args, **kwargs)
    want = reference(*args, **kwargs)
    assert got.dtype == dtype and want.dtype == dtype
    assert got.shape == want.shape
    rtol, atol = tolerance(dtype)
    torch.testing.assert_close(got.float(), want.float(), rtol=rtol, atol=atol * _scale(want),
                               equal_nan=True)
    if oracle is not None:
        assert_matches_oracle(want, expected, module, dtype, what="the module's reference")
        assert_matches_oracle(got, expected, module, dtype, what="kernel")


@pytest.fixture(scope="session")
def dtc_binary():
    if not DTC.exists():
        pytest.fail(f"{DTC} is not built; run deploy/setup.sh")
    return DTC
