"""An exploration that cannot succeed says so: it ends `failed` with the shared reason, counted
per reason, `dtx explore` exits 1 and prints it, locally and through dtxd, whose API and page
carry the message. Real workers under the Triton interpreter: the algorithm reads
`program_id`, whose value depends on the schedule, so its reference, and with it every check
and the reference baseline, fails with one message."""
import json
import os
import pathlib
import sqlite3
import subprocess

import pytest

from conftest import ROOT
from dtxd import Daemon

DTX = pathlib.Path(os.environ.get("DTX", ROOT / "build" / "explorer" / "dtx"))
DTXD = pathlib.Path(os.environ.get("DTXD", ROOT / "build" / "server" / "dtxd"))

PROGRAM = """\
Func f;
In A;
Var x, y;
f[x, y] = A[x, y] + program_id(0);
f.compile();
"""
REASON = "the reference cannot evaluate program_id"
TINY = ["--screen-warmup", "1", "--screen-rep", "2", "--top", "1", "--rounds", "1",
        "--full-warmup", "1", "--full-rep", "2", "--timeout", "120"]


def template(baselines="[reference]", where=""):
    return ("kernel: pid_tiny\nalgorithm: p.dt\ncompile: [f]\nschedule: |\n"
            "  f.block(x:{1, 2, 4}, y:{8, 16, 32, 64});\n" + (f"  {where}\n" if where else "")
            + "test_shapes:\n  - {x: 4, y: 64}\nshapes:\n  - {x: 4, y: 64}\n"
            + f"dtype: float32\nbaselines: {baselines}\n")


@pytest.fixture
def tdir(tmp_path):
    if not DTX.exists():
        pytest.fail(f"{DTX} is not built; run deploy/setup.sh")
    (tmp_path / "p.dt").write_text(PROGRAM)
    return tmp_path


def explore(tdir, text, *args):
    (tdir / "t.yaml").write_text(text)
    return subprocess.run([str(DTX), "explore", tdir / "t.yaml", "--test-shapes", "--db",
                           tdir / "x.db", *TINY, *args],
                          capture_output=True, text=True, timeout=900)


def stored(db):
    with sqlite3.connect(db) as c:
        (state, message), = c.execute("SELECT state, message FROM explorations").fetchall()
        measured = c.execute("SELECT COUNT(*) FROM measurements WHERE protocol = 'screen' AND "
                             "schedule_id IS NOT NULL").fetchone()[0]
    return state, message, measured


def test_baselines_and_first_candidates_failing_alike_stop_early(tdir):
    r = explore(tdir, template(), "--strategy", "exhaustive")
    assert r.returncode == 1, r.stderr
    assert "stopped early: every baseline (1) and the first 4 candidates failed with " \
           "runtime_error:" in r.stderr and REASON in r.stderr
    state, message, measured = stored(tdir / "x.db")
    assert state == "failed" and REASON in message
    assert measured < 12, "it measured the whole space of 12"


def test_every_candidate_of_a_budget_failing_fails_with_counts(tdir):
    """No baseline to compare with: the search runs its budget, then fails, counting reasons."""
    r = explore(tdir, template(baselines="[]"), "--strategy", "random", "--budget", "3")
    assert r.returncode == 1, r.stderr
    assert "all 3 candidates measured failed:\n  3 x runtime_error: reference_f" in r.stderr
    state, message, measured = stored(tdir / "x.db")
    assert state == "failed" and message.startswith("all 3 candidates measured failed")
    assert measured == 3


def test_a_space_pruned_whole_fails(tdir):
    r = explore(tdir, template(where="where f.block.x > 8;"), "--strategy", "exhaustive")
    assert r.returncode == 1, r.stderr
    assert "no schedule of the space passed its checks (12 proposed, all rejected):\n" \
           "  12 x where" in r.stderr
    state, message, measured = stored(tdir / "x.db")
    assert state == "failed" and message.startswith("no schedule of the space passed its checks")
    assert measured == 0


def test_one_failing_baseline_alone_does_not_stop_a_search(tdir):
    """Candidates that pass keep the search going, whatever the baselines do."""
    (tdir / "p.dt").write_text(PROGRAM.replace(" + program_id(0)", " * 2"))
    (tdir / "baselines.py").write_text(
        "def pid_tiny(A):\n    raise RuntimeError('broken baseline')\n")
    r = explore(tdir, template(baselines="[torch]"), "--strategy", "random", "--budget", "5",
                "--json")
    assert r.returncode == 0, r.stderr
    (summary,) = json.loads(r.stdout)
    assert summary["state"] == "done" and summary["measured"] == 5 and summary["failed"] == 0


def test_through_dtxd_the_api_page_and_client_say_why(tdir):
    daemon = Daemon(tdir / "dtxd")
    try:
        (tdir / "t.yaml").write_text(template())
        r = subprocess.run([str(DTX), "explore", tdir / "t.yaml", "--shape", "x=4,y=64",
                            "--strategy", "exhaustive", "--screen-rep", "2", "--top", "1",
                            "--server", daemon.base], capture_output=True, text=True, timeout=600)
        assert r.returncode == 1, r.stderr
        assert "failed: stopped early" in r.stderr and REASON in r.stderr
        status, listed = daemon.get("/v1/explorations")
        assert status == 200
        (x,) = listed["explorations"]
        assert x["state"] == "failed" and REASON in x["message"]
        status, one = daemon.get(f"/v1/explorations/{x['id']}")
        assert status == 200 and one["state"] == "failed" and REASON in one["message"]
    finally:
        daemon.stop()
