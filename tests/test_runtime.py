"""The module runtime (compiler/runtime/*.py) on its own: each file imports and lints clean, what
follows its marker line is exactly what generated modules carry, and its helpers behave (run
under the Triton interpreter, against torch)."""
import importlib.util
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
    files = [*RUNTIME.glob("*.py"), ROOT / "src" / "dtx" / "worker.py",
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
                         (torch.zeros(2, 3, dtype=torch.int32), "float32, float16 or bfloat16"),
                         (torch.zeros(2, 3, device="meta"), "meta device, which holds no data")):
        with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
            rt._dt_check_tensor("A", value, 2)


def test_a_wrapper_refuses_an_input_on_the_meta_device(tmp_path):
    # A meta tensor has a shape but no data: the wrapper says so, Triton is never reached.
    out = tmp_path / "m.py"
    assert run_dtc(ROOT / "examples/geglu.dt", "-o", out).returncode == 0
    spec = importlib.util.spec_from_file_location("dt_meta_module", out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    A, B = torch.empty(4, 8, device="meta"), torch.empty(4, 8, device="meta")
    with pytest.raises(ValueError, match="A is on the meta device"):
        module.geglu(A, B)
    with pytest.raises(ValueError, match="out is on meta"):
        module.geglu(torch.ones(4, 8), torch.ones(4, 8), out=torch.empty(4, 8, device="meta"))


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("shape", [(5, 7), (64, 3), (1, 130)])
def test_k_contiguous_copies_into_the_layout_asked_for(axis, shape):
    rl = load("relayout")
    a = torch.randn(shape)
    out = rl._dt_k_contiguous(a, axis)
    assert torch.equal(out, a)
    assert out.stride(axis) == 1


def test_k_contiguous_launches_directly_with_the_two_addresses():
    rl = load("relayout")
    a = torch.randn(5, 7)
    calls = []
    direct = (99, {3: lambda *args: calls.append(args)})
    out = rl._dt_k_contiguous(a, 0, None, 3, direct)
    assert out.shape == a.shape and out.stride() == (1, 5) and out.dtype == a.dtype
    assert calls == [(99, a.data_ptr(), out.data_ptr())]


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


@pytest.mark.parametrize("least", [1, 16])
def test_tile_is_what_next_power_of_2_gives(least):
    import triton
    rt = load("runtime")
    for size in [0, 1, 2, 3, 15, 16, 17, 255, 256, 257, 4095, 65537, 2**31 - 1]:
        assert rt._dt_tile(size, least) == max(least, triton.next_power_of_2(size)), size


def test_plan_lays_temporaries_out_aligned_in_one_allocation():
    rt = load("runtime")
    plan = rt._DtPlan(())
    work, (a, b, c, d) = plan.lay_out(torch.device("cpu"), ((3, 5), (7,), (0, 4), (2, 3, 2)))
    assert [t.shape for t in (a, b, c, d)] == [(3, 5), (7,), (0, 4), (2, 3, 2)]
    for t in (a, b, c, d):
        assert t.dtype == torch.float32 and t.is_contiguous()
        assert t.untyped_storage().data_ptr() == work.untyped_storage().data_ptr()
        assert t.storage_offset() * 4 % rt._DT_WORK_ALIGN == 0
    # Disjoint: writing one leaves the others as they were.
    for value, t in enumerate((a, b, d)):
        t.fill_(value)
    assert a.eq(0).all() and b.eq(1).all() and d.eq(2).all()
    assert plan.work_bytes == work.numel() == 256 * 3


def test_direct_launches_only_when_every_launch_is_direct_and_no_hook_is_installed():
    rt = load("runtime")
    plan = rt._DtPlan(())
    cpu = torch.device("cpu")
    plan.lay_out(cpu, ((3, 5), (7,)))
    # Under the interpreter nothing is direct: Triton launches, with tensors.
    assert plan.direct() is None
    assert all(isinstance(t, torch.Tensor) for t in plan.temporaries(cpu, None)[1])
    # After a launch that failed (slot 1 tried, never direct), Triton launches again.
    streams = []
    plan.stream, plan.device_index = lambda device: streams.append(device) or 1234, 3
    plan.tried.update({0, 1})
    plan.launches[0] = ("run0", (1, 1, 1), ())
    assert plan.direct() is None
    plan.launches[1] = ("run1", (2, 1, 1), ())
    # Not before the call that launched them all has finished: a first call that failed between
    # two launches, or another thread's first call still launching, has slots not yet tried.
    assert plan.direct() is None
    plan.finish()
    direct = plan.direct()
    assert direct == (1234, plan.launches) and streams == [3]
    work, (a, b) = plan.temporaries(cpu, direct)
    assert isinstance(a, int) and a == work.data_ptr() and b == a + 256
    # A launch hook (a profiler's) makes Triton launch, so tensors again.
    import triton
    knobs = triton.knobs.runtime
    hook = lambda *args: None  # noqa: E731
    knobs.launch_enter_hook.add(hook)
    try:
        assert plan.direct() is None
    finally:
        knobs.launch_enter_hook.remove(hook)


def test_a_plan_is_kept_once_its_first_call_has_launched_every_kernel():
    """Not before: another thread's call with the key would find it half made."""
    rt = load("runtime")
    plans = {}
    plan = rt._dt_plan(plans, "k", ())
    assert plans == {}
    plan.finish()
    assert plans == {"k": plan}
    plan.finish()  # a later call that launched through Triton (a hook installed): kept once
    assert plans == {"k": plan}
    rt._dt_plan(plans, None, ()).finish()  # no key: never kept
    assert plans == {"k": plan}
    for i in range(rt._DT_PLANS_MAX):
        rt._dt_plan(plans, i, ()).finish()
    assert len(plans) == 1 and i in plans  # full: the cache started again


def test_a_direct_launch_passes_the_stream_then_what_varies():
    rt = load("runtime")
    plan = rt._DtPlan(())
    calls = []
    plan.stream, plan.device_index = {0: 77}.get, 0
    plan.launches[4] = lambda *args: calls.append(args)
    plan.tried.add(4)
    plan.launch(4, None, None, ("A", 5, 1, "B", 0.5), 4, 3, (0, 3, 4))
    assert calls == [(77, "A", "B", 0.5)]


def test_generated_modules_lint_clean(tmp_path):
    """Every conformance program and template compiles into a module pyflakes finds nothing in:
    no unused or undefined names, no redefinitions (a wrapper replacing a runtime name)."""
    sources = sorted([*(ROOT / "tests" / "conformance").glob("*.dt"),
                      *(ROOT / "templates").glob("*.dt")])
    outputs = []
    for i, source in enumerate(sources):
        out = tmp_path / f"m{i}_{source.stem}.py"
        assert run_dtc(source, "-o", out).returncode == 0, source
        outputs.append(str(out))
    run = subprocess.run([sys.executable, "-m", "pyflakes", *outputs], capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stdout + run.stderr
