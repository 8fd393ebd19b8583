"""The shipped templates' Hopper-only choices compile for the H100 (sm_90) without a GPU
(tests/hopper.py): for every template offering `persistent` or `tma`, a
spread of the schedules that use them at its first real shape, each kernel of the module compiled in the template's dtype with its tile
parameters at their widths for that shape. The interpreter runs these schedules too
(test_template_baselines.py); this catches what only the GPU compiler would refuse."""
import functools
import math
import re
import subprocess

import pytest

from conftest import ROOT, run_dtc
from hopper import compile_for_hopper
from test_template_baselines import load_template
from test_kernel_set import DTX

TEMPLATES = ROOT / "templates"
PER_TEMPLATE = 8
ELEM = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}
HOPPER = (".persistent(", ".tma(")
HOPPER_TEMPLATES = sorted(p.stem for p in TEMPLATES.glob("*.yaml")
                          if any(h in load_template(p)["schedule"] for h in HOPPER))


def stores_through_a_descriptor(schedule):
    """Whether `F.tma(...)` names F itself: its result tiles are stored through a descriptor."""
    m = re.search(r"(\w+)\.tma\(([^)]*)\)", schedule)
    return bool(m) and m.group(1) in m.group(2).split(",")


@functools.lru_cache(maxsize=None)
def persistent_schedules(name):
    template = load_template(TEMPLATES / f"{name}.yaml")
    shape = template["shapes"][0]
    r = subprocess.run([str(DTX), "expand", str(TEMPLATES / f"{name}.yaml"), "--shape",
                        ",".join(f"{k}={v}" for k, v in shape.items()), "--list"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    chosen = []
    # Spread over each choice's schedules (tma, storing through a descriptor or not; persistent
    # alone; warp-specialized, whose Gluon kernel is compiled too), evenly.
    listed = r.stdout.split()
    groups = [[s for s in listed if ".tma(" in s and stores_through_a_descriptor(s)],
              [s for s in listed if ".tma(" in s and not stores_through_a_descriptor(s)
               and ".warp_specialize(" not in s],
              [s for s in listed if ".persistent(" in s and ".tma(" not in s],
              [s for s in listed if ".warp_specialize(" in s]]
    groups = [g for g in groups if g]
    for group in groups:
        n = -(-PER_TEMPLATE // len(groups))
        picks = sorted({round(i * (len(group) - 1) / max(1, n - 1)) for i in range(n)})
        chosen += [group[i] for i in picks] if group else []
    assert chosen, f"{name}: no schedule using {HOPPER} at {shape}"
    return template, shape, chosen


def test_the_gemm_templates_offer_persistent_programs():
    assert {"matmul", "gemm_gelu", "gemm_epilogue", "sigmoid_mm"} <= set(HOPPER_TEMPLATES)


def launched_warps(text, kernel):
    """The warps a Gluon kernel is launched with where its launch names them (an online loop's:
    `_DtHopper(kernel, gluon, flags, maxnreg, warps)`), else None (the schedule's)."""
    m = re.search(rf"= _DtHopper\(\w+, {kernel}, \([^)]*\), \w+, (\d+)\)", text)
    return int(m.group(1)) if m else None


def tile_widths(text, shape):
    """Each `x_TILE` parameter's width as the wrapper picks it: the power of two at least the
    label's size (a whole dimension in one tile) and at least 16 for tl.dot."""
    widths = {}
    for label in re.findall(r"\b(\w+)_TILE\b", text):
        size = shape.get(label, 16)
        widths[f"{label}_TILE"] = max(16, 1 << max(0, math.ceil(math.log2(max(1, size)))))
    return widths


@pytest.mark.parametrize("name,index", [(n, i) for n in HOPPER_TEMPLATES
                                        for i in range(PER_TEMPLATE)])
def test_hopper_schedules_compile_for_hopper(name, index, tmp_path, dtc_binary):
    template, shape, schedules = persistent_schedules(name)
    if index >= len(schedules):
        pytest.skip(f"{name} has {len(schedules)} persistent schedules at its shape")
    schedule = schedules[index]
    out = tmp_path / f"{name}.py"
    r = run_dtc(TEMPLATES / template["algorithm"], "-o", out, "--schedule", schedule)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    warps = int((re.search(r"num_warps\((\d+)\)", schedule) or [0, 4])[1])
    stages = int((re.search(r"num_stages\((\d+)\)", schedule) or [0, 3])[1])
    kernels = [k for k in re.findall(r"^def (\w+_kernel(?:_gluon)?)\(", text, re.M)
               if not k.startswith("_dt_")]
    if ".warp_specialize(" in schedule:  # on Hopper the Gluon kernel runs (GluonPrinter.cpp)
        assert any(k.endswith("_gluon") for k in kernels), schedule
    assert kernels
    for kernel in kernels:
        compiled = compile_for_hopper(out, kernel, ELEM[template["dtype"]],
                                      tile_widths(text, shape),
                                      num_warps=launched_warps(text, kernel) or warps,
                                      num_stages=stages)
        ptx = compiled["ptx"]
        if ".persistent(" in schedule:
            assert "nctaid.x" in ptx, f"{kernel} of {schedule}: no loop over the grid"
        if ".tma(" in schedule:
            assert "cp.async.bulk.tensor" in ptx, f"{kernel} of {schedule}: no TMA copy"
        if stores_through_a_descriptor(schedule):
            assert "cp.async.bulk.tensor.2d.global.shared" in ptx, \
                f"{kernel} of {schedule}: no TMA store"
        if kernel.endswith("_gluon"):  # the producer's and the consumer's registers
            assert "setmaxnreg" in ptx and "ld.local" not in ptx, f"{kernel} of {schedule}"
        if "tl.dot(" in text:  # on the tensor cores: wgmma, or mma.sync for small tiles
            assert "wgmma.mma_async" in ptx or "mma.sync" in ptx, schedule
        assert compiled["shared"] <= 232448, f"{schedule}: {compiled['shared']} B of shared memory"
