"""Golden diagnostics: every tests/diagnostics/NAME.dt is a malformed program, and NAME.expected
holds exactly what `dtc --check NAME.dt` prints to stderr when run from that directory (so file
names in messages are relative). Rewrite the goldens with `UPDATE_GOLDEN=1 pytest ...`, then
read the diff: a golden records what the user sees, so review every changed message."""
import os
import pathlib
import subprocess

import pytest

from conftest import DTC

CASES_DIR = pathlib.Path(__file__).resolve().parent / "diagnostics"
CASES = sorted(CASES_DIR.glob("*.dt"))
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def check(case):
    # Relative path and cwd keep the goldens independent of where the checkout lives.
    return subprocess.run([str(DTC), "--check", case.name], cwd=CASES_DIR, capture_output=True,
                          text=True, timeout=60)


def test_enough_cases():
    assert len(CASES) >= 25


def test_every_golden_has_a_program():
    # A stale .expected left behind by a renamed case would otherwise be ignored silently.
    programs = {case.stem for case in CASES}
    orphans = [p.name for p in CASES_DIR.glob("*.expected") if p.stem not in programs]
    assert not orphans


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_diagnostics(dtc_binary, case):
    result = check(case)
    expected_file = case.with_suffix(".expected")
    if UPDATE:
        expected_file.write_text(result.stderr)
    assert result.returncode == 1, f"dtc accepted a malformed program:\n{result.stderr}"
    assert "internal error" not in result.stderr
    assert expected_file.exists(), f"no golden; run with UPDATE_GOLDEN=1 to create {expected_file.name}"
    assert result.stderr == expected_file.read_text()
