"""The spaces of templates/*.yaml as `dtx expand` counts them at each of their shapes: sizes,
pruning by reason, duplicates and distinct schedules, against tests/data/template_spaces.json.
A change to a template, to the compiler's schedule checks or to the expander shows up here;
after a deliberate one, regenerate the file (the command is in the assertion message)."""
import json
import os
import pathlib
import subprocess

import pytest

from conftest import ROOT

DTX = pathlib.Path(os.environ.get("DTX", ROOT / "build" / "explorer" / "dtx"))
GOLDEN = ROOT / "tests" / "data" / "template_spaces.json"
TEMPLATES = sorted((ROOT / "templates").glob("*.yaml"))


def expand(template):
    r = subprocess.run([str(DTX), "expand", str(template), "--json"], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    return d if isinstance(d, list) else [d]


def test_every_template_is_counted():
    assert sorted(json.loads(GOLDEN.read_text())) == [t.name for t in TEMPLATES]


@pytest.mark.parametrize("template", TEMPLATES, ids=[t.stem for t in TEMPLATES])
def test_template_space_counts(template):
    golden = json.loads(GOLDEN.read_text())[template.name]
    for e in expand(template):
        shape = ",".join(f"{k}={v}" for k, v in sorted(e["shape"].items()))
        # Every point is accounted for exactly once.
        assert e["space_size"] == (e["unused_choices"] + sum(e["rejected"].values()) +
                                   e["duplicates"] + e["distinct"])
        assert e["distinct"] > 0, f"{template.name} at {shape}: nothing to explore"
        got = {k: e[k] for k in ("space_size", "distinct", "duplicates", "unused_choices",
                                 "rejected")}
        assert got == golden[shape], (
            f"{template.name} at {shape} changed; if that is intended, regenerate "
            f"tests/data/template_spaces.json from `dtx expand TEMPLATE --json`")
