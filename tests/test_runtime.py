"""The module runtime (compiler/runtime/*.py) on its own: each file imports and lints clean, what
follows its marker line is exactly what generated modules carry, and its helpers behave (run
under the Triton interpreter, against torch)."""
import importlib.util
import pathlib
import subprocess
import sys

import pytest
import torch

from conftest import ROOT, run_dtc

RUNTIME = ROOT / "compiler" / "runtime"
MARKER = "# --- embedded below ---\n"


def load(name):
    spec = importlib.util.spec_from_file_location(f"dt_runtime_{name}", RUNTIME / f"dt_{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def embedded(name):
    text = (RUNTIME / f"dt_{name}.py").read_text()
    assert text.count(MARKER) == 1
    return text.split(MARKER, 1)[1]


def test_runtime_and_worker_lint_clean():
    files = [*RUNTIME.glob("*.py"), ROOT / "explorer" / "worker" / "dtx_worker.py",
             *(ROOT / "explorer" / "ray").rglob("*.py")]
    run = subprocess.run([sys.executable, "-m", "pyflakes", *map(str, files)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize("name, program", [("runtime", "examples/geglu.dt"),
                                           ("relayout", "tests/conformance/l4_03_2mm.dt")])
def test_generated_modules_carry_the_files_verbatim(tmp_path, name, program):
    out = tmp_path / "m.py"
    assert run_dtc(ROOT / program, "-o", out).returncode == 0
    assert embedded(name) in out.read_text()


def test_check_tensor_names_what_is_wrong():
    rt = load("runtime")
    rt._dt_check_tensor("A", torch.zeros(2, 3), 2)
    for value, words in ((3, "must be a torch.Tensor"), (torch.zeros(2), "2 dimension(s)"),
                         (torch.zeros(2, 3, dtype=torch.int32), "float32, float16 or bfloat16")):
        with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
            rt._dt_check_tensor("A", value, 2)


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("shape", [(5, 7), (64, 3), (1, 130)])
def test_k_contiguous_copies_into_the_layout_asked_for(axis, shape):
    rl = load("relayout")
    a = torch.randn(shape)
    out = rl._dt_k_contiguous(a, axis)
    assert torch.equal(out, a)
    assert out.stride(axis) == 1


def test_index_type_is_int32_only_where_every_index_fits():
    # Meta tensors: shapes and strides without memory, so spans past 2**31 cost nothing.
    import triton.language as tl
    rt = load("runtime")
    meta = dict(device="meta")
    small = torch.empty(4096, 4096, **meta)
    assert rt._dt_index_type(128, (small,), ((4096, 4096),)) is tl.int32
    # 2**31 elements in one tensor, or a temporary of that many, or a view whose strides reach
    # that far (a column of a wide matrix), or a broadcast input that would be copied contiguous.
    big = torch.empty(2**16, 2**15, **meta)
    assert rt._dt_index_type(1, (big,), ()) is tl.int64
    assert rt._dt_index_type(1, (), ((2**16, 2**15),)) is tl.int64
    column = torch.empty(2**16, 2**15, **meta)[:, :1]
    assert rt._dt_index_type(1, (column,), ()) is tl.int64
    wide = torch.empty(1, 2**31 // 4, **meta).expand(4, -1)
    assert wide.stride(0) == 0 and rt._dt_index_type(1, (wide,), ()) is tl.int64
    # The slack: a 2**30-element tensor is within 2**31 until tiles may run 2**30 past it.
    half = torch.empty(2**29, **meta)
    assert rt._dt_index_type(1, (half,), ()) is tl.int32
    assert rt._dt_index_type(2**30, (half,), ()) is tl.int64
