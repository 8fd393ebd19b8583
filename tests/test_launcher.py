"""The prepared launcher (compiler/runtime/dt_launch.c) without a GPU: it builds as generated
modules build it, packs every parameter type as the kernel reads it (checked against `struct`),
refuses values its types cannot hold, and `_dt_direct` maps a compiled kernel's signature onto
it (constexprs dropped, the varying positions renumbered) or falls back to Triton's entry."""
import math
import pathlib
import struct
import subprocess
import sysconfig
import types
import warnings

import pytest
import torch
import triton

from conftest import ROOT, run_dtc
from test_runtime import load

SOURCE = ROOT / "compiler" / "runtime" / "dt_launch.c"


@pytest.fixture(scope="module")
def rt():
    module = load("runtime")
    if module._dt_launcher() is None:  # the warning says why
        pytest.fail("the prepared launcher did not build (a C compiler and Python's headers "
                    "are needed, as for Triton's own launchers)")
    return module


def low(fmt, value):
    """The 64-bit slot holding `value` packed as `fmt`, little-endian, in its low bytes."""
    raw = struct.pack("<" + fmt, value)
    return int.from_bytes(raw + bytes(8 - len(raw)), "little")


def test_modules_carry_the_source_verbatim(tmp_path):
    out = tmp_path / "m.py"
    assert run_dtc(ROOT / "examples" / "geglu.dt", "-o", out).returncode == 0
    namespace = {}
    text = out.read_text()
    exec(compile(text[text.index("_DT_LAUNCH_C = "):], str(out), "exec"), namespace)
    assert namespace["_DT_LAUNCH_C"] == SOURCE.read_text()


def test_every_type_packs_as_the_kernel_reads_it(rt):
    Launch = rt._dt_launcher().Launch
    cases = [("p", 0xDEAD00, "Q"), ("b", -7, "b"), ("B", 250, "B"), ("h", -30000, "h"),
             ("H", 65000, "H"), ("i", -(2**31), "i"), ("I", 2**32 - 1, "I"),
             ("l", -(2**40), "q"), ("L", 2**64 - 1, "Q"), ("e", 1.5, "e"), ("f", 0.1, "f"),
             ("d", math.pi, "d")]
    kinds = "".join(c for c, _, _ in cases)
    launch = Launch(0, (1, 1, 1), 128, 0, False, False, kinds, tuple(v for _, v, _ in cases), ())
    assert launch.packed() == tuple(low(fmt, value) for _, value, fmt in cases)
    # bfloat16: the float32's top half, as Triton's launcher packs it (truncated).
    launch = Launch(0, (1, 1, 1), 32, 0, False, False, "E", (1.0 + 2**-10,), ())
    assert launch.packed() == (low("f", 1.0 + 2**-10) >> 16,)


def test_a_call_repacks_only_what_varies(rt):
    Launch = rt._dt_launcher().Launch
    launch = Launch(0, (4, 1, 1), 128, 0, False, False, "pilf", (16, 3, 5, 2.0), (0, 3))
    tensor = torch.zeros(4)
    assert launch.pack(tensor, 0.5) == (tensor.data_ptr(), 3, 5, low("f", 0.5))
    assert launch.pack(None, 1) == (0, 3, 5, low("f", 1.0))  # None: a null pointer


def test_a_call_copies_the_prepared_parameters_however_many(rt):
    """Past 64 parameters a call's copy lives on the heap; either way the Launch keeps its own."""
    Launch = rt._dt_launcher().Launch
    for count in (3, 64, 65, 200):
        launch = Launch(0, (1, 1, 1), 32, 0, False, False, "l" * count, tuple(range(count)),
                        (0, count - 1))
        want = (-1 & (2**64 - 1), *range(1, count - 1), 99)
        assert launch.pack(-1, 99) == want
        assert launch.packed() == tuple(range(count))


def test_the_source_compiles_without_warnings():
    include = pathlib.Path(triton.backends.nvidia.__file__).parent / "include"
    run = subprocess.run(["gcc", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-std=c11",
                          f"-I{sysconfig.get_paths()['include']}", f"-I{include}", str(SOURCE)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize("kind, value, error", [
    ("i", 2**31, OverflowError), ("I", -1, OverflowError), ("b", 128, OverflowError),
    ("i", 1.5, TypeError), ("p", "A", AttributeError), ("f", "x", TypeError)])
def test_values_a_type_cannot_hold_are_refused(rt, kind, value, error):
    Launch = rt._dt_launcher().Launch
    launch = Launch(0, (1, 1, 1), 32, 0, False, False, kind + "i", (0, 0), (0,))
    with pytest.raises(error):
        launch.pack(value)
    with pytest.raises(error):
        Launch(0, (1, 1, 1), 32, 0, False, False, kind, (value,), ())


def test_malformed_launches_are_refused(rt):
    Launch = rt._dt_launcher().Launch
    with pytest.raises(ValueError, match="unknown parameter type 'x'"):
        Launch(0, (1, 1, 1), 32, 0, False, False, "x", (1,), ())
    with pytest.raises(ValueError, match="2 types but 1 values"):
        Launch(0, (1, 1, 1), 32, 0, False, False, "ii", (1,), ())
    with pytest.raises(IndexError, match="varying position 2"):
        Launch(0, (1, 1, 1), 32, 0, False, False, "ii", (1, 2), (2,))
    with pytest.raises(TypeError, match=r"grid must be a tuple \(x, y, z\)"):
        Launch(0, (1, 1), 32, 0, False, False, "i", (1,), ())
    with pytest.raises(OverflowError, match="grid"):
        Launch(0, (2**33, 1, 1), 32, 0, False, False, "i", (1,), ())
    launch = Launch(0, (1, 1, 1), 32, 0, False, False, "ii", (1, 2), (1,))
    with pytest.raises(TypeError, match="the stream and 1 values"):
        launch(0)
    with pytest.raises(TypeError, match="the stream and 1 values"):
        launch(0, 1, stream=0)


def test_a_launch_without_a_usable_driver_raises(rt):
    launch = rt._dt_launcher().Launch(0, (1, 1, 1), 32, 0, False, False, "i", (1,), (0,))
    # No GPU: libcuda.so.1 is missing; with one, a null function is refused by the driver.
    # Without a context current (nothing initialized CUDA) the driver says so.
    errors = "libcuda.so.1|cuLaunchKernelEx failed|cuCtxGetCurrent|no CUDA context"
    with pytest.raises(RuntimeError, match=errors):
        launch(0, 5)


class FakeLauncher:
    """Triton's CudaLauncher as `_dt_direct` sees it: called, it allocates scratch memory and
    calls its C entry `launch`; both record their calls."""

    def __init__(self, scratch):
        self.global_scratch_size, self.profile_scratch_size = scratch, 0
        self.launch_cooperative_grid = self.launch_pdl = False
        self.calls = []

    def __call__(self, *args):
        self.calls.append(("launcher", args))

    def launch(self, *args):
        self.calls.append(("entry", args))


def compiled(signature, metadata=(4, 1, 0), scratch=0):
    """What `_dt_direct` reads of a Triton CompiledKernel."""
    launcher = FakeLauncher(scratch)
    kernel = types.SimpleNamespace(run=launcher, function=0, packed_metadata=metadata,
                                   src=types.SimpleNamespace(signature=signature))
    return kernel, launcher.calls


def test_direct_launches_pack_the_parameters_and_renumber_what_varies(rt):
    signature = {"A_ptr": "*fp32", "A_stride0": "i32", "A_stride1": "constexpr",
                 "out_ptr": "*fp16", "alpha": "fp32", "n": "i64", "_dt_index": "constexpr"}
    kernel, _ = compiled(signature, metadata=(8, 1, 1024))
    a, out = torch.zeros(3), torch.zeros(3, dtype=torch.float16)
    args = (a, 7, 1, out, 0.5, 2**40, "tl.int32")
    launch = rt._dt_direct(kernel, (6,), args, (0, 3, 4))
    assert isinstance(launch, rt._dt_launcher().Launch)
    # Six parameters (two constexprs dropped) and Triton's two scratch pointers.
    assert launch.packed() == (a.data_ptr(), 7, out.data_ptr(), low("f", 0.5), 2**40, 0, 0)
    assert launch.pack(16, 32, 2.0) == (16, 7, 32, low("f", 2.0), 2**40, 0, 0)


@pytest.mark.parametrize("why", ["tensor descriptor", "scratch memory", "clusters"])
def test_what_the_prepared_launch_cannot_serve_goes_through_triton(rt, why):
    signature = {"A_ptr": "*fp32", "n": "i32", "d": "constexpr"}
    metadata, scratch = (4, 1, 0), 0
    if why == "tensor descriptor":
        signature["A_ptr"] = "nvTmaDesc"
    elif why == "scratch memory":
        scratch = 64
    else:
        metadata = (4, 2, 0)
    kernel, calls = compiled(signature, metadata, scratch)
    a = torch.zeros(2)
    launch = rt._dt_direct(kernel, (3,), (a, 9, 1), (0,))
    assert not isinstance(launch, rt._dt_launcher().Launch)
    with pytest.raises(ValueError):  # as many values as varying positions, as a Launch takes
        launch(77, 100, 101)
    assert calls == []
    launch(77, 100)
    tail = (100, 9, 1)
    [(how, args)] = calls
    if why == "scratch memory":  # the launcher itself, which allocates the scratch memory
        assert how == "launcher" and args == (3, 1, 1, 77, 0, metadata, None, None, None, *tail)
    else:
        assert how == "entry" and args[:4] == (3, 1, 1, 77) and args[9] == metadata
        assert args[13:] == tail


def test_a_varying_argument_compiled_into_the_kernel_has_no_direct_launch(rt):
    """Triton made the argument at a varying position a constexpr: only Triton, specializing
    each call, launches it right."""
    kernel, calls = compiled({"A_ptr": "*fp32", "s": "constexpr"})
    assert rt._dt_direct(kernel, (1,), (torch.zeros(1), 1), (0, 1)) is None


def test_a_launcher_that_does_not_build_warns_once_and_triton_launches(monkeypatch):
    """Even where warnings are errors, the failed build is remembered: the first plan's call
    raises the warning, later ones launch through Triton's entry."""
    import triton.runtime.build as build
    module = load("runtime")

    def fail(*args, **kwargs):
        raise OSError("no C compiler")

    monkeypatch.setattr(build, "compile_module_from_src", fail)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(RuntimeWarning, match="could not be built .no C compiler."):
            module._dt_launcher()
        assert module._dt_launcher() is None
    kernel, calls = compiled({"A_ptr": "*fp32"})
    launch = module._dt_direct(kernel, (1,), (torch.zeros(1),), (0,))
    launch(5, 64)
    assert calls[0][0] == "entry" and calls[0][1][-1] == 64
