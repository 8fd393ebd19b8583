"""The shared conformance programs (../shared/conformance, beside the checkout), when present.

The tests read the in-project copy (tests/conformance), so that a clone alone runs them. When the
shared directory exists it is an extra check: every shared file must be identical to the project's
copy, and a program the project lacks is compiled and checked like the others (it parses and
checks, its canonical schedule round-trips, its module matches its reference at the file's sizes).
Without the shared directory these tests skip."""
import pytest
import torch

from conftest import CONFORMANCE, SHARED_CONFORMANCE, check_module, compile_dt, file_sizes, run_dtc

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0")

SHARED_FILES = sorted(p for p in SHARED_CONFORMANCE.glob("*") if p.is_file()) \
    if SHARED_CONFORMANCE.is_dir() else []
ABSENT = pytest.mark.skipif(not SHARED_CONFORMANCE.is_dir(),
                            reason=f"no shared conformance directory at {SHARED_CONFORMANCE}")


def _params(select):
    params = [pytest.param(p, id=p.name) for p in SHARED_FILES if select(p)]
    # One skipped placeholder when there is nothing to check, rather than an empty parameter set.
    return params or [pytest.param(None, id="none", marks=pytest.mark.skip(
        reason="no such files in " + str(SHARED_CONFORMANCE)))]


@ABSENT
def test_shared_directory_has_programs():
    assert any(p.suffix == ".dt" for p in SHARED_FILES), SHARED_CONFORMANCE


@ABSENT
@pytest.mark.parametrize("shared", _params(lambda p: (CONFORMANCE / p.name).exists()))
def test_project_copy_is_identical(shared):
    ours = CONFORMANCE / shared.name
    assert ours.read_bytes() == shared.read_bytes(), (
        f"{ours} differs from {shared}: copy the shared version into the project "
        "(and update its hand-written oracle in tests/oracles.py)")


@ABSENT
@pytest.mark.parametrize("shared", _params(
    lambda p: p.suffix == ".dt" and not (CONFORMANCE / p.name).exists()))
def test_program_the_project_lacks(shared, tmp_path):
    result = run_dtc(shared, "--check")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    canon = run_dtc(shared, "--canonical")
    assert canon.returncode == 0, canon.stderr
    again = run_dtc(shared, "--canonical", "--schedule", canon.stdout.strip())
    assert again.returncode == 0 and again.stdout == canon.stdout, again.stderr
    module = compile_dt(tmp_path, shared)
    for dtype in (torch.float32, torch.float16):
        check_module(module, file_sizes(shared), dtype)
