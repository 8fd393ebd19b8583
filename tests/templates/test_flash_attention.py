"""The FlashAttention templates (templates/flash_attention.yaml and its causal twin): every
schedule of each space at each test shape (`dtx expand --list --shape`), compiled and run under
the Triton interpreter against softmax(Q Kᵀ / sqrt(d) + mask) V computed by hand in float64.
The interpreter ignores num_warps and num_stages, so schedules whose kernels differ only in them
are run once; every one is compiled and checked to be of the online form (one loop over the
keys, two under the causal mask)."""
import os
import pathlib
import re
import subprocess

import pytest
import torch

from conftest import ROOT, compile_dt, compiled_funcs
from test_template_baselines import load_template

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0")

TEMPLATES = ROOT / "templates"
DTX = pathlib.Path(os.environ.get("DTX", ROOT / "build" / "explorer" / "dtx"))
NAMES = ("flash_attention", "flash_attention_causal")


def oracle(Q, K, V, causal):
    s = Q.double() @ K.double().transpose(-1, -2) / Q.shape[-1] ** 0.5
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool).triu(1),
                          float("-inf"))
    return torch.softmax(s, -1) @ V.double()


def space(name, shape):
    r = subprocess.run([str(DTX), "expand", str(TEMPLATES / f"{name}.yaml"), "--shape", shape,
                        "--list"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def launch_free(text):
    """The module without what only a GPU reads (warps, stages) and what names the schedule."""
    return re.sub(r"(num_warps|num_stages)\W*\d+|SCHEDULE = .*|Schedule: .*|\"[0-9a-f]{64}\"",
                  "", text)


CASES = [(name, i) for name in NAMES for i in range(2)]


@pytest.mark.parametrize("name,which", CASES, ids=[f"{n}-{i}" for n, i in CASES])
def test_every_schedule_matches_the_oracle(name, which, tmp_path, dtc_binary):
    template = load_template(TEMPLATES / f"{name}.yaml")
    sizes = template["test_shapes"][which]
    shape = ",".join(f"{k}={v}" for k, v in sizes.items())
    schedules = space(name, shape)
    assert len(schedules) >= 8, schedules
    torch.manual_seed(which)
    Q = torch.randn(sizes["b"], sizes["h"], sizes["m"], sizes["k"]).half()
    K = torch.randn(sizes["b"], sizes["h"], sizes["l"], sizes["k"]).half()
    V = torch.randn(sizes["b"], sizes["h"], sizes["l"], sizes["n"]).half()
    want = oracle(Q, K, V, name.endswith("causal"))
    ran = {}
    # The module's own reference (the plain softmax, its products batched over b and h) agrees.
    reference = compile_dt(tmp_path, TEMPLATES / template["algorithm"]).reference(Q, K, V)
    torch.testing.assert_close(reference.double(), want, rtol=2e-3, atol=2e-3)
    for i, schedule in enumerate(schedules):
        (tmp_path / str(i)).mkdir()
        module = compile_dt(tmp_path / str(i), TEMPLATES / template["algorithm"], schedule=schedule)
        text = pathlib.Path(module.__file__).read_text()
        # One loop over the keys; under the causal mask two: the tiles before the block's first
        # query, which need no mask, then those on the diagonal.
        loops = 2 if name.endswith("causal") else 1
        assert "online over l" in text
        assert len(re.findall(r"for \w*l_iter\w* in range", text)) == loops
        key = launch_free(text)
        if key in ran:
            continue
        fn = compiled_funcs(module)["out"][0]
        got = fn(Q, K, V)
        assert got.dtype == torch.float16 and got.shape == want.shape
        torch.testing.assert_close(got.double(), want, rtol=2e-2, atol=2e-2, msg=schedule)
        ran[key] = schedule
    assert len(ran) >= 2
