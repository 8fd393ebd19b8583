"""The templates of Liger-Kernel's forward kernels (the set: RMSNorm, LayerNorm, GroupNorm, RoPE,
SwiGLU, GeGLU, ReLU², DyT, softmax, KL divergence, JSD, TVD, cross-entropy, embedding), each
algorithm compiled with its default schedule and with schedules drawn from its template's space
(`dtx expand --list` at the template's first shape: the first, a third of the way, two thirds and
the last), run at its `test_shapes` in float32, float16 and bfloat16 under the Triton interpreter
and compared with the hand-written float64 oracle of tests/oracles.py.

Also: the `liger` baseline (templates/liger_baselines.py) where liger_kernel is not installed:
each function says so, and an exploration of a template naming it reports that baseline as
failed with that message and still measures every candidate."""
import functools
import importlib.util
import json
import os
import pathlib
import shutil
import subprocess

import pytest
import torch

from conftest import ROOT, assert_matches_oracle, compile_dt, compiled_funcs
from oracles import KERNEL_SET
from test_template_baselines import load_template

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0")

TEMPLATES = ROOT / "templates"
DTX = pathlib.Path(os.environ.get("DTX", ROOT / "build" / "explorer" / "dtx"))

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# None: the .dt file's own schedule; a number: that fraction of the way through the space's list.
PICKS = (None, 0.0, 1 / 3, 2 / 3, 1.0)
LOSSES_OF_DISTRIBUTIONS = {"kl_div", "jsd", "tvd"}


@functools.lru_cache(maxsize=None)
def space(name):
    """The distinct canonical schedules of a template's space at its first shape."""
    template = load_template(TEMPLATES / f"{name}.yaml")
    shape = ",".join(f"{k}={v}" for k, v in template["shapes"][0].items())
    r = subprocess.run([str(DTX), "expand", str(TEMPLATES / f"{name}.yaml"), "--shape", shape,
                        "--list"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    schedules = r.stdout.split()
    assert schedules, f"{name}: the space is empty at {shape}"
    return schedules


def realistic(name, args, dtype, pick):
    """The inputs make_inputs drew, with scalars as a model sets them and, for the divergences,
    rows that are (log-)probability distributions."""
    args = list(args)
    if name in ("layernorm", "groupnorm"):
        args[3] = 1e-5
    elif name == "kl_div":  # log-probabilities against probabilities, Liger's eps
        args[0] = torch.log_softmax(args[0].float(), dim=1).to(dtype)
        args[1] = torch.softmax(args[1].float(), dim=1).to(dtype)
        args[2] = 1e-10
    elif name == "jsd":  # the student's and the teacher's log-probabilities; both special betas
        args[0] = (0.5, 0.0, 1.0, 0.1, 0.9)[pick]
        args[1] = torch.log_softmax(args[1].float(), dim=1).to(dtype)
        args[2] = torch.log_softmax(args[2].float(), dim=1).to(dtype)
    elif name == "tvd":
        args[0] = torch.softmax(args[0].float(), dim=1).to(dtype)
        args[1] = torch.softmax(args[1].float(), dim=1).to(dtype)
    elif name in ("cross_entropy", "cross_entropy_grad"):  # the first row's class is ignored
        args[2] = int(args[1][0])
        args[3] = 0.1
    return tuple(args)


CASES = [(name, i) for name in KERNEL_SET for i in range(len(PICKS))]


@pytest.mark.parametrize("name,pick", CASES, ids=[f"{n}-{i}" for n, i in CASES])
def test_schedules_match_the_oracle(name, pick, tmp_path, dtc_binary):
    template = load_template(TEMPLATES / f"{name}.yaml")
    fraction = PICKS[pick]
    schedule = None
    if fraction is not None:
        schedules = space(name)
        schedule = schedules[round(fraction * (len(schedules) - 1))]
    module = compile_dt(tmp_path, TEMPLATES / template["algorithm"], schedule=schedule)
    assert list(module.COMPILED) == template["compile"]
    fn, _, make_inputs, keywords = compiled_funcs(module)[module.COMPILED[0]]
    oracle = KERNEL_SET[name]
    for dtype in DTYPES:
        for seed, sizes in enumerate(template["test_shapes"]):
            args = realistic(name, make_inputs(sizes, dtype=dtype, seed=seed), dtype, pick)
            if name in LOSSES_OF_DISTRIBUTIONS or name == "cross_entropy":
                # The raw draws too, with an exploration's default seed: what it checks with.
                cases = [args, make_inputs(sizes, dtype=dtype, seed=0)]
            else:
                cases = [args]
            for case in cases:
                want = oracle(case, sizes)
                kwargs = {keywords[k]: v for k, v in sizes.items() if k in keywords}
                got = fn(*case, **kwargs)
                wants = want if isinstance(want, tuple) else (want,)
                gots = got if isinstance(got, tuple) else (got,)
                assert len(gots) == len(wants)
                for i, (g, w) in enumerate(zip(gots, wants)):
                    assert not torch.isnan(w).any(), f"{name}: the oracle is NaN at {sizes}"
                    assert_matches_oracle(
                        g, w, module, dtype,
                        what=f"{name} result {i + 1} ({schedule or 'default schedule'}, "
                             f"{dtype}, {sizes})")


def test_every_template_of_the_set_is_checked():
    names = {p.stem for p in TEMPLATES.glob("*.yaml")}
    assert set(KERNEL_SET) <= names
    for name in KERNEL_SET:
        assert load_template(TEMPLATES / f"{name}.yaml")["kernel"] == name


# ---- the liger baseline without liger_kernel ---------------------------------------------------

def load_liger_baselines():
    spec = importlib.util.spec_from_file_location("template_liger_baselines",
                                                  TEMPLATES / "liger_baselines.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LIGER = load_liger_baselines()
NO_LIGER = pytest.mark.skipif(importlib.util.find_spec("liger_kernel") is not None,
                              reason="liger_kernel is installed here")


def test_every_template_naming_liger_has_its_function():
    for path in sorted(TEMPLATES.glob("*.yaml")):
        template = load_template(path)
        if "liger" in template["baselines"]:
            assert callable(getattr(LIGER, template["kernel"], None)), \
                f"templates/liger_baselines.py has no function {template['kernel']!r}"
    assert set(KERNEL_SET) <= {load_template(p)["kernel"] for p in TEMPLATES.glob("*.yaml")
                               if "liger" in load_template(p)["baselines"]}


@NO_LIGER
@pytest.mark.parametrize("name", sorted(KERNEL_SET))
def test_a_liger_baseline_says_liger_is_not_installed(name, tmp_path, dtc_binary):
    template = load_template(TEMPLATES / f"{name}.yaml")
    module = compile_dt(tmp_path, TEMPLATES / template["algorithm"])
    make_inputs = compiled_funcs(module)[module.COMPILED[0]][2]
    args = make_inputs(template["test_shapes"][0], dtype=torch.float32)
    with pytest.raises(ModuleNotFoundError, match="liger_kernel is not installed"):
        getattr(LIGER, name)(*args)


TINY = ["--screen-warmup", "1", "--screen-rep", "2", "--full-warmup", "1", "--full-rep", "2",
        "--rounds", "1", "--top", "1", "--timeout", "120"]


@NO_LIGER
def test_an_exploration_goes_on_without_liger(tmp_path):
    """relu_squared's template, with a space of two schedules at a tiny shape, explored with its
    baselines torch and liger: liger fails with its message, torch and both schedules pass."""
    if not DTX.exists():
        pytest.fail(f"{DTX} is not built; run deploy/setup.sh")
    for f in ("relu_squared.dt", "baselines.py", "liger_baselines.py"):
        shutil.copy(TEMPLATES / f, tmp_path / f)
    (tmp_path / "t.yaml").write_text("""\
kernel: relu_squared
algorithm: relu_squared.dt
compile: [relu_squared]
schedule: |
  relu_squared.block(x:1, y:{32, 64});
  relu_squared.tensorize(x:0, y:0);
shapes:
  - {x: 4, y: 64}
test_shapes:
  - {x: 4, y: 64}
dtype: bfloat16
baselines: [torch, liger]
""")
    db = tmp_path / "results.db"
    r = subprocess.run([str(DTX), "explore", tmp_path / "t.yaml", "--strategy", "exhaustive",
                        "--db", db, "--json", *TINY], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)[0]
    assert summary["state"] == "done", summary
    assert summary["measured"] == 2 and summary["failed"] == 0, summary
    assert summary["best_baseline"] == "torch"
    r = subprocess.run([str(DTX), "results", str(summary["exploration"]), "--db", db, "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    results = json.loads(r.stdout)
    assert all(s["screen"]["status"] == "ok" for s in results["schedules"])
    baselines = {}  # name -> its measurements (screening, then the full protocol)
    for b in results["baselines"]:
        baselines.setdefault(b["name"], []).append(b["measurement"])
    assert set(baselines) == {"torch", "liger"}
    assert all(m["status"] == "ok" for m in baselines["torch"]), baselines["torch"]
    assert {m["protocol"] for m in baselines["liger"]} == {"screen", "full"}
    for m in baselines["liger"]:
        assert m["status"] == "runtime_error", m
        assert "liger_kernel is not installed" in m["message"], m
