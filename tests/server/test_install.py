"""An installed dtx: `cmake --install` into a temporary prefix, the tree moved elsewhere as a
whole, then dtxd started from there, from a working directory outside the checkout and with no
path to the checkout given: it finds its worker, templates, page and OpenAPI document relative to
its own location and runs an exploration over HTTP; dtc and dtx work from there too."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT
from dtxd import Daemon

GEGLU = (ROOT / "templates" / "geglu.dt").read_text()
TEMPLATE = "geglu.block(x:{1, 2}, y:{32, 64});\ngeglu.tensorize(x:0, y:0);\n"


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    build = ROOT / "build"
    if not (build / "server" / "dtxd").exists():
        pytest.fail("build/server/dtxd is not built; run deploy/setup.sh")
    d = tmp_path_factory.mktemp("install")
    r = subprocess.run(["cmake", "--install", str(build), "--prefix", str(d / "first")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    moved = d / "moved"
    shutil.move(d / "first", moved)  # nothing in the tree names the prefix it was installed to
    return moved


def clean_env():
    """The environment without anything that points at the checkout."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith("DTX") and k not in ("PYTHONPATH", "DTC")}


def test_the_layout(prefix):
    for path in ["bin/dtc", "bin/dtx", "bin/dtxd", "share/dtx/src/dtx/worker.py",
                 "share/dtx/explorer/ray/dtx_ray_pool.py", "share/dtx/explorer/ray/dtx_ray/pool.py",
                 "share/dtx/templates/geglu.yaml", "share/dtx/templates/baselines.py",
                 "share/dtx/web/index.html", "share/dtx/server/openapi.json",
                 "share/dtx/deploy/dtxd.service", "share/dtx/deploy/dtxd.yaml"]:
        assert (prefix / path).is_file(), path
    unit = (prefix / "share/dtx/deploy/dtxd.service").read_text()
    assert "ExecStart=/usr/local/bin/dtxd" in unit


def test_installed_dtxd_explores_over_http(prefix, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    daemon = Daemon(outside / "data", "--python", sys.executable, binary=prefix / "bin" / "dtxd",
                    cwd=outside, env=clean_env())
    try:
        status, doc = daemon.get("/v1/openapi.json")
        assert status == 200
        assert doc == json.loads((prefix / "share/dtx/server/openapi.json").read_text())
        status, templates = daemon.get("/v1/templates")
        assert status == 200 and "geglu" in json.dumps(templates)
        status, page = daemon.request("GET", "/", headers={"Accept": "text/html"})
        assert status == 200 and "<html" in page.lower()
        status, created = daemon.post("/v1/explorations", {
            "kernel": "geglu_installed", "algorithm": GEGLU, "schedule": TEMPLATE,
            "shapes": [{"x": 4, "y": 64}], "dtype": "float32", "strategy": "exhaustive",
            "baselines": ["reference", "torch"], "screen_warmup_ms": 1, "screen_rep_ms": 2,
            "full_warmup_ms": 1, "full_rep_ms": 2, "rounds": 1, "top": 1})
        assert status == 202, created
        x = daemon.wait_done(created["id"])
        assert x["state"] == "done" and x["measured"] == 4, x
        status, ranked = daemon.get(f"/v1/explorations/{created['id']}/schedules")
        assert status == 200
        assert all(s["screen"]["status"] == "ok" for s in ranked["schedules"]), ranked
    finally:
        code, err = daemon.stop()
    assert f"dtx's files: {prefix / 'share' / 'dtx'} (installed beside" in err, err
    assert str(ROOT) not in err, "the installed dtxd used the checkout"


def test_installed_dtc_and_dtx(prefix, tmp_path):
    env = clean_env()
    (tmp_path / "geglu.dt").write_text(GEGLU)
    r = subprocess.run([prefix / "bin" / "dtc", "geglu.dt", "--canonical"], cwd=tmp_path,
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([prefix / "bin" / "dtx", "expand", prefix / "share/dtx/templates/geglu.yaml",
                        "--shape", "x=16,y=1024", "--json"], cwd=tmp_path, capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["distinct"] > 0
