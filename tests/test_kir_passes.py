"""Golden tests of the kernel passes, one file per case: tests/kir/PASS_NAME.dt is a program,
and PASS_NAME.expected holds what `dtc PASS_NAME.dt --dump-after=PREVIOUS --dump-after=PASS`
prints: each kernel's IR before the pass and after it. A case must show the pass at work (the
two differ). Rewrite the goldens with `UPDATE_GOLDEN=1 pytest tests/test_kir_passes.py`, then
read the diff: a changed golden is a changed kernel."""
import os
import pathlib
import subprocess

import pytest

from conftest import DTC

CASES_DIR = pathlib.Path(__file__).resolve().parent / "kir"
CASES = sorted(CASES_DIR.glob("*.dt"))
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def passes():
    """The kernel passes in order, as `dtc --help` lists them for --dump-after."""
    help_text = subprocess.run([str(DTC), "--help"], capture_output=True, text=True).stdout
    listed = help_text.split("after this pass (", 1)[1].split("or all", 1)[0]
    return [p.strip() for p in " ".join(listed.split()).split(",") if p.strip()]


def dumps(case, before, after):
    r = subprocess.run([str(DTC), case.name, f"--dump-after={before}", f"--dump-after={after}",
                        "-o", os.devnull], cwd=CASES_DIR, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stderr


def test_every_rewriting_pass_has_a_case(dtc_binary):
    order = passes()
    assert order[0] == "lower" and len(order) >= 5, order
    covered = {case.stem.split("_")[0] for case in CASES}
    assert set(order[1:]) <= covered, f"passes without a golden case: {set(order[1:]) - covered}"


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_pass_golden(dtc_binary, case):
    order = passes()
    name = case.stem.split("_")[0]
    assert name in order[1:], f"{case.name}: no kernel pass `{name}` (passes: {order})"
    before = order[order.index(name) - 1]
    text = dumps(case, before, name)
    sections = text.split("// after ")[1:]
    assert sections and len(sections) % 2 == 0, text
    changed = False
    for b, a in zip(sections[::2], sections[1::2]):
        assert b.startswith(before + ": ") and a.startswith(name + ": "), text
        changed |= b.split("\n", 1)[1] != a.split("\n", 1)[1]
    assert changed, f"{case.name}: `{name}` changes nothing; the case does not test it"
    golden = case.with_suffix(".expected")
    if UPDATE:
        golden.write_text(text)
    assert golden.exists(), f"no golden; run with UPDATE_GOLDEN=1 to create {golden.name}"
    assert text == golden.read_text()
