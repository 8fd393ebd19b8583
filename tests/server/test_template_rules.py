"""One set of rules for a template request, wherever it is made: every shipped template
(templates/*.yaml) at each of its shapes and test shapes goes through a real dtxd's
`POST /v1/expand` and `POST /v1/explorations` and through `dtx expand`; a request the rules
refuse is refused by dtx and by dtxd alike, for the same field with the same words.
(The page's form: tests/web/test_pages.py.)"""
import json
import os
import pathlib
import shutil
import subprocess

import pytest

from conftest import ROOT
from dtxd import serving

DTX = pathlib.Path(os.environ.get("DTX", ROOT / "build" / "explorer" / "dtx"))
NAMES = sorted(p.stem for p in (ROOT / "templates").glob("*.yaml"))
EVIL = "../../tmp/evil $(id)"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    yield from serving(tmp_path_factory.mktemp("dtxd-rules"), "--templates-dir", str(ROOT / "templates"))


@pytest.fixture(scope="module")
def templates(daemon):
    """The template files as the server reads them (what the page's form starts from)."""
    status, r = daemon.get("/v1/templates")
    assert status == 200 and r["errors"] == []
    listed = {t["name"]: t for t in r["templates"]}
    assert sorted(listed) == NAMES
    return listed


def body_of(t, **extra):
    """A template file's fields as a request body."""
    body = {k: t[k] for k in ("kernel", "algorithm", "algorithm_name", "compile", "schedule",
                              "dtype", "baselines")}
    if t["strategy"]:
        body["strategy"] = t["strategy"]
    if t["budget"]:
        body["budget"] = t["budget"]
    body.update(extra)
    return body


def shape_arg(shape):
    return ",".join(f"{k}={v}" for k, v in shape.items())


@pytest.mark.parametrize("name", NAMES)
def test_every_template_expands_at_each_of_its_shapes(daemon, templates, name):
    t = templates[name]
    shapes = t["shapes"] + t["test_shapes"]
    assert shapes, name
    for shape in shapes:
        status, r = daemon.post("/v1/expand", body_of(t, shape=shape, limit=1, max_points=2000))
        assert status == 200, (name, shape, r)
        assert r["space_size"] > 0
    # All of them at once, as the page's form sends them.
    status, r = daemon.post("/v1/expand", body_of(t, shapes=shapes, limit=1, max_points=2000))
    assert status == 200, (name, r)


@pytest.mark.parametrize("name", NAMES)
def test_every_template_is_accepted_as_an_exploration_at_each_shape(daemon, templates, name):
    t = templates[name]
    shapes = t["shapes"] + t["test_shapes"]
    status, created = daemon.post("/v1/explorations", body_of(t, shapes=shapes))
    try:
        assert status == 202, (name, created)
        assert [x["shape"] for x in created["explorations"]] == shapes
    finally:
        # Accepted is what this test is about: nothing needs to run.
        for x in created.get("explorations", []):
            status, r = daemon.post(f"/v1/explorations/{x['id']}/cancel")
            assert status in (202, 409), r
    status, listing = daemon.get(f"/v1/explorations?kernel={t['kernel']}")
    assert status == 200 and len(listing["explorations"]) == len(shapes)


@pytest.mark.parametrize("name", NAMES)
def test_dtx_takes_every_shape_of_every_template(templates, name, tmp_path):
    # (How each file's GPU shapes expand: tests/templates/test_template_spaces.py.)
    template = ROOT / "templates" / f"{name}.yaml"
    for shape in templates[name]["test_shapes"]:
        r = subprocess.run([str(DTX), "expand", str(template), "--shape", shape_arg(shape)],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, (name, shape, r.stderr)
    # dtx explore checks the same way before anything is measured: past the rules, it goes on
    # to a server that is not there.
    for shape in templates[name]["shapes"] + templates[name]["test_shapes"]:
        r = subprocess.run([str(DTX), "explore", str(template), "--shape", shape_arg(shape),
                            "--server", "http://127.0.0.1:1", "--db", str(tmp_path / "x.db")],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 1 and "cannot reach dtxd" in r.stderr, (name, shape, r.stderr)


FILE = """\
kernel: {kernel}
algorithm: {algorithm}.dt
schedule: |
  {schedule}
shapes: {shapes}
test_shapes: {shapes}
dtype: float32
baselines: [reference]
"""
SCHEDULES = {"geglu": "geglu.block(x:{1, 2}, y:{32, 64});",
             "rmsnorm": "rms_norm_out.block(x:{1, 2});"}
REFUSED = [
    # (algorithm, kernel, shapes, field, words)
    ("geglu", EVIL, [{"x": 4, "y": 64}], "kernel", "is a name of letters"),
    ("geglu", "-o", [{"x": 4, "y": 64}], "kernel", "is a name of letters"),
    ("geglu", "a b", [{"x": 4, "y": 64}], "kernel", "is a name of letters"),
    ("geglu", "geglu", [{"x": 4}], "shapes", "no size for `y`"),
    ("geglu", "geglu", [{"x": 4, "y": 64, "z": 2}], "shapes", "no label `z`"),
    ("geglu", "geglu", [{"x": 4, "y": 0}], "shapes", "whole number >= 1"),
    ("geglu", "geglu", [{"x": 4, "y": 64}, {"y": 64, "x": 4}], "shapes", "listed twice"),
    ("rmsnorm", "rmsnorm", [{"x": 4, "y": 16, "k": 8}], "shapes", "give them one size"),
    ("rmsnorm", "rmsnorm", [{"x": 4, "k": 16}], "shapes", "no size for `y`"),
    ("geglu", "geglu", [{"x": 4, "y": 2**62}], "shapes", "is more than 2^40 (1099511627776)"),
    ("geglu", "geglu", [{"x": 4, "y": 64 + i} for i in range(65)], "shapes",
     "at most 64 shapes, not 65"),
]


@pytest.fixture
def files(tmp_path):
    for name in SCHEDULES:
        shutil.copy(ROOT / "templates" / f"{name}.dt", tmp_path / f"{name}.dt")

    def write(algorithm, kernel, shapes):
        path = tmp_path / "t.yaml"
        path.write_text(FILE.format(kernel=json.dumps(kernel), algorithm=algorithm,
                                    schedule=SCHEDULES[algorithm], shapes=json.dumps(shapes)))
        return path
    return write


@pytest.mark.parametrize("algorithm,kernel,shapes,field,words", REFUSED,
                         ids=[f"{a}-{f}-{w}" for a, _, _, f, w in REFUSED])
def test_dtx_and_dtxd_refuse_alike(daemon, files, tmp_path, algorithm, kernel, shapes, field,
                                   words):
    path = files(algorithm, kernel, shapes)
    body = {"kernel": kernel, "algorithm": (ROOT / "templates" / f"{algorithm}.dt").read_text(),
            "algorithm_name": f"{algorithm}.dt", "schedule": SCHEDULES[algorithm],
            "shapes": shapes, "dtype": "float32", "baselines": ["reference"]}
    status, r = daemon.post("/v1/explorations", body)
    assert status == 400 and r["error"]["field"] == field, r
    message = r["error"]["message"]
    assert words in message
    status, r = daemon.post("/v1/expand", body)
    assert status == 400 and r["error"]["field"] == field and r["error"]["message"] == message
    # dtx: the same words, naming the file; a usage error.
    for args in (["expand", path], ["explore", path, "--test-shapes", "--db", tmp_path / "x.db"]):
        run = subprocess.run([str(DTX), *map(str, args)], capture_output=True, text=True,
                             timeout=120)
        assert run.returncode == 2 and run.stderr == f"dtx: {path}: {message}\n", run.stderr
    assert not (tmp_path / "evil $(id)").exists()


def test_dtx_refuses_a_baseline_twice_and_an_empty_algorithm(files, tmp_path):
    path = files("geglu", "geglu", [{"x": 4, "y": 64}])
    path.write_text(path.read_text().replace("baselines: [reference]",
                                             "baselines: [reference, reference]"))
    run = subprocess.run([str(DTX), "expand", str(path)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2, run.stderr
    assert run.stderr == f"dtx: {path}: baseline `reference` is listed twice: name each " \
        "baseline once\n", run.stderr
    path = files("geglu", "geglu", [{"x": 4, "y": 64}])
    (tmp_path / "geglu.dt").write_text("\n# nothing yet\n")
    run = subprocess.run([str(DTX), "expand", str(path)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith(f"dtx: {path}: the algorithm is empty"), run.stderr


def test_a_name_starting_with_a_digit_is_a_name_everywhere(daemon, files, tmp_path):
    (tmp_path / "none.db").touch()
    path = files("geglu", "2geglu", [{"x": 4, "y": 64}])
    run = subprocess.run([str(DTX), "expand", str(path)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0 and run.stdout.startswith("2geglu at x=4,y=64"), run.stderr
    body = {"kernel": "2geglu", "algorithm": (ROOT / "templates" / "geglu.dt").read_text(),
            "schedule": SCHEDULES["geglu"], "shape": {"x": 4, "y": 64}}
    assert daemon.post("/v1/expand", body)[0] == 200
    # And what CI asks for: nothing is known, but the name is one.
    status, r = daemon.get("/v1/best?kernel=2geglu&shape=x=4,y=64")
    assert status == 404, r
    status, r = daemon.get("/v1/best?kernel=" + EVIL.replace(" ", "%20") + "&shape=x=4,y=64")
    assert status == 400 and r["error"]["field"] == "kernel"
    run = subprocess.run([str(DTX), "best", EVIL, "--shape", "x=4,y=64", "--db",
                          str(tmp_path / "none.db")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "is a name of letters" in run.stderr, run.stderr
