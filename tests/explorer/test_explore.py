"""`dtx expand`, `dtx explore`, `dtx results` and `dtx best` end to end on the CPU: real workers
under the Triton interpreter, a real SQLite results store, tiny shapes. Also: reuse of stored
measurements across explorations, an exploration killed with SIGKILL and resumed without losing
or repeating a measurement, and template errors located in the file."""
import json
import os
import pathlib
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
import torch

from conftest import ROOT, load_module

DTX = pathlib.Path(os.environ.get("DTX", ROOT / "build" / "explorer" / "dtx"))
SHAPE = "x=4,y=96"
TINY = ["--screen-warmup", "1", "--screen-rep", "2", "--full-warmup", "1", "--full-rep", "2",
        "--rounds", "2", "--top", "2", "--timeout", "120"]

# 2 x 3 x 2 = 12 points; a tensor as wide as its block or wider is pruned by the constraint (4),
# blocks of 128 along y=96 are as many lanes as the whole row would need, so kept.
TEMPLATE = """\
kernel: geglu_tiny
algorithm: geglu.dt
compile: [geglu]
schedule: |
  $BY = {32, 64, 128};
  geglu.block(x:{1, 2}, y:$BY);
  geglu.tensorize(x:0, y:{0, 64});
  where geglu.tensorize.y == 0 or geglu.tensorize.y < $BY;
shapes:
  - {x: 4, y: 96}
test_shapes:
  - {x: 4, y: 96}
dtype: float32
baselines: [torch, reference]
"""


def dtx(*args, timeout=900):
    return subprocess.run([str(DTX), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def tdir(tmp_path_factory):
    if not DTX.exists():
        pytest.fail(f"{DTX} is not built; run deploy/setup.sh")
    d = tmp_path_factory.mktemp("explore")
    shutil.copy(ROOT / "templates" / "geglu.dt", d / "geglu.dt")
    (d / "baselines.py").write_text(
        "import torch.nn.functional as F\n\n\n"
        "def geglu_tiny(A, B):\n    return F.gelu(A, approximate='tanh') * B\n")
    (d / "t.yaml").write_text(TEMPLATE)
    return d


@pytest.fixture(scope="module")
def explored(tdir):
    """One exhaustive exploration of the tiny template: (its JSON summary, the database)."""
    db = tdir / "results.db"
    r = dtx("explore", tdir / "t.yaml", "--shape", SHAPE, "--strategy", "exhaustive", "--db", db,
            "--json", *TINY)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)[0], db


def test_expand_counts_and_lists(tdir):
    r = dtx("expand", tdir / "t.yaml", "--shape", SHAPE, "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["space_size"] == 12
    assert j["rejected"] == {"where": 4}
    assert j["distinct"] == 8
    listed = dtx("expand", tdir / "t.yaml", "--shape", SHAPE, "--list")
    lines = listed.stdout.split()
    assert len(lines) == 8 and len(set(lines)) == 8
    assert "geglu.block(x:2,y:64);geglu.tensorize(x:0,y:0)" in lines
    text = dtx("expand", tdir / "t.yaml", "--shape", SHAPE).stdout
    assert "space before pruning  12" in text and "distinct schedules    8" in text


def test_exploration_measures_every_schedule(explored):
    summary, db = explored
    assert summary["state"] == "done"
    assert summary["space_size"] == 12
    assert summary["measured"] == 8 and summary["failed"] == 0
    assert summary["rejected"] == {"where": 4}
    assert summary["best_ms"] > 0 and summary["best_baseline"] in ("torch", "reference")


def test_results_rank_and_keep_everything(explored):
    summary, db = explored
    r = dtx("results", summary["exploration"], "--db", db, "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["kernel"] == "geglu_tiny" and j["shape"] == "x=4,y=96"
    assert j["device"] == "cpu-interpreter"
    assert j["rejected"] == {"where": 4}
    schedules = j["schedules"]
    assert len(schedules) == 8
    assert [s["rank"] for s in schedules] == list(range(1, 9))
    assert all(s["screen"]["status"] == "ok" for s in schedules)
    # The best two were measured again with the full protocol; they rank first.
    full = [s for s in schedules if "full" in s]
    assert len(full) == 2 and schedules[0] in full and schedules[1] in full
    assert all(s["full"]["status"] == "ok" for s in full)
    names = {b["name"] for b in j["baselines"]}
    assert names == {"torch", "reference"}
    listing = json.loads(dtx("results", "--db", db, "--json").stdout)
    assert listing[0]["id"] == summary["exploration"] and listing[0]["measured"] == 8


def test_best_writes_a_module_that_computes_geglu(explored, tdir):
    summary, db = explored
    out = tdir / "best.py"
    r = dtx("best", "geglu_tiny", "--shape", SHAPE, "--db", db, "-o", out, "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["protocol"] == "full" and j["canonical"] == summary["best_schedule"]
    module = load_module(out)
    torch.manual_seed(0)
    A, B = torch.randn(4, 96), torch.randn(4, 96)
    want = 0.5 * A * (1 + torch.tanh(0.7978845608028654 * (A + 0.044715 * A ** 3))) * B
    torch.testing.assert_close(module.geglu(A, B), want, rtol=1e-5, atol=1e-5)
    missing = dtx("best", "geglu_tiny", "--shape", "x=4,y=97", "--db", db)
    assert missing.returncode == 3 and "no correct schedule" in missing.stderr


def screen_counts(db):
    with sqlite3.connect(db) as c:
        return c.execute("SELECT m.code_hash, COUNT(*) FROM measurements m "
                         "WHERE m.protocol = 'screen' AND m.schedule_id IS NOT NULL "
                         "GROUP BY m.code_hash").fetchall()


def test_stored_measurements_are_reused(explored, tdir):
    summary, db = explored
    before = {h: n for h, n in screen_counts(db)}
    r = dtx("explore", tdir / "t.yaml", "--shape", SHAPE, "--strategy", "random", "--seed", "3",
            "--budget", "5", "--top", "0", "--db", db, "--json", *TINY[:4])
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)[0]
    assert j["measured"] == 5 and j["reused"] == 5
    # Nothing was measured again: the new exploration's rows are copies of the old ones.
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT m.time_ms FROM measurements m JOIN schedules s "
                         "ON s.id = m.schedule_id WHERE s.exploration_id = ?",
                         (j["exploration"],)).fetchall()
        old = {t for (t,) in c.execute("SELECT m.time_ms FROM measurements m JOIN schedules s "
                                       "ON s.id = m.schedule_id WHERE s.exploration_id = ?",
                                       (summary["exploration"],))}
    assert len(rows) == 5 and all(t in old for (t,) in rows)
    assert len(before) == 8


def test_sigkill_then_resume_loses_and_repeats_nothing(tdir):
    db = tdir / "killed.db"
    # A slow measurement per schedule (10 ms repetitions) leaves time to kill it mid-way.
    args = ["explore", tdir / "t.yaml", "--shape", SHAPE, "--strategy", "exhaustive", "--db", db,
            "--top", "0", "--screen-warmup", "1", "--screen-rep", "10"]
    p = subprocess.Popen([str(DTX), *map(str, args)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 600
    measured = 0
    while time.time() < deadline and p.poll() is None:
        time.sleep(0.5)
        if db.exists():
            try:
                with sqlite3.connect(db, timeout=5) as c:
                    measured = c.execute("SELECT COUNT(*) FROM measurements WHERE protocol = "
                                         "'screen' AND schedule_id IS NOT NULL").fetchone()[0]
            except sqlite3.OperationalError:
                continue
        if measured >= 3:
            break
    assert p.poll() is None, f"finished before it could be killed: {p.communicate()[1]}"
    p.send_signal(signal.SIGKILL)
    p.wait()
    with sqlite3.connect(db) as c:
        (eid, state), = c.execute("SELECT id, state FROM explorations").fetchall()
        done_before = c.execute("SELECT COUNT(*) FROM measurements WHERE protocol = 'screen' "
                                "AND schedule_id IS NOT NULL").fetchone()[0]
    assert state == "running" and 3 <= done_before < 8
    listed = json.loads(dtx("results", "--db", db, "--state", "running", "--json").stdout)
    assert [x["id"] for x in listed] == [eid]

    # The killed process holds the lease still; it has ended, so the resume takes it over at once.
    r = dtx("explore", "--resume", eid, "--db", db, "--json")
    assert r.returncode == 0, r.stderr
    assert f"exploration {eid} was left by dtx explore (pid {p.pid} on host " in r.stderr
    j = json.loads(r.stdout)[0]
    assert j["exploration"] == eid and j["state"] == "done"
    assert j["measured"] == 8 and j["reused"] == done_before
    counts = screen_counts(db)
    assert len(counts) == 8, "a schedule was lost"
    assert all(n == 1 for _, n in counts), f"a schedule was measured twice: {counts}"


def test_a_second_process_leaves_a_running_exploration_alone(tdir):
    """`dtx explore --resume ID` of an exploration another process runs (it holds the lease)
    refuses, naming that process, and measures nothing: each schedule is screened once, the full
    protocol and the baselines run once, and there is one best schedule."""
    db = tdir / "leased.db"
    args = ["explore", tdir / "t.yaml", "--shape", SHAPE, "--strategy", "exhaustive", "--db", db,
            "--json", "--screen-warmup", "1", "--screen-rep", "10", "--full-warmup", "1",
            "--full-rep", "2", "--rounds", "2", "--top", "2"]
    first = subprocess.Popen([str(DTX), *map(str, args)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 600
    eid = None
    while time.time() < deadline and first.poll() is None and eid is None:
        time.sleep(0.3)
        try:
            with sqlite3.connect(db, timeout=5) as c:
                row = c.execute("SELECT e.id FROM explorations e JOIN measurements m "
                                "JOIN schedules s ON s.id = m.schedule_id "
                                "AND s.exploration_id = e.id LIMIT 1").fetchone()
        except sqlite3.OperationalError:
            continue
        eid = row[0] if row else None
    assert first.poll() is None, f"finished before the second could start: {first.communicate()}"

    second = dtx("explore", "--resume", eid, "--db", db, "--json", timeout=300)
    assert second.returncode == 4, second.stderr
    assert f"exploration {eid} is run by dtx explore (pid {first.pid} on host " in second.stderr
    assert "not resuming it" in second.stderr
    r = dtx("results", eid, "--db", db)
    assert f"run by dtx explore (pid {first.pid} on host " in r.stdout, r.stdout

    out, err = first.communicate(timeout=900)
    assert first.returncode == 0, err
    j = json.loads(out)[0]
    assert j["exploration"] == eid and j["state"] == "done" and j["measured"] == 8
    counts = screen_counts(db)
    assert len(counts) == 8 and all(n == 1 for _, n in counts), counts
    with sqlite3.connect(db) as c:
        full = c.execute("SELECT schedule_id, COUNT(*) FROM measurements WHERE protocol = 'full' "
                         "AND schedule_id IS NOT NULL GROUP BY schedule_id").fetchall()
        baselines = c.execute("SELECT b.name, m.protocol, COUNT(*) FROM baselines b "
                              "JOIN measurements m ON m.id = b.measurement_id "
                              "GROUP BY b.name, m.protocol").fetchall()
        leases = c.execute("SELECT COUNT(*) FROM leases").fetchone()[0]
    assert len(full) == 2 and all(n == 1 for _, n in full), full
    assert sorted(baselines) == [("reference", "full", 1), ("reference", "screen", 1),
                                 ("torch", "full", 1), ("torch", "screen", 1)], baselines
    assert leases == 0, "the lease outlived the run"
    best = json.loads(dtx("best", "geglu_tiny", "--shape", SHAPE, "--db", db, "--json").stdout)
    assert best["canonical"] == j["best_schedule"]


def test_template_errors_point_into_the_file(tdir):
    bad = tdir / "bad.yaml"
    bad.write_text(TEMPLATE.replace("geglu.tensorize(x:0, y:{0, 64});",
                                    "geglu.tensorize(x:0, y:{0, 64);"))
    r = dtx("expand", bad, "--shape", SHAPE)
    assert r.returncode == 1
    assert f"{bad}:7:" in r.stderr and "error:" in r.stderr
    r = dtx("explore", bad, "--shape", SHAPE, "--db", tdir / "bad.db")
    assert r.returncode == 1 and f"{bad}:7:" in r.stderr
    unknown = tdir / "unknown.yaml"
    unknown.write_text(TEMPLATE.replace("dtype: float32", "dtyp: float32"))
    r = dtx("expand", unknown)
    assert r.returncode == 1 and "unknown field `dtyp`" in r.stderr and f"{unknown}:" in r.stderr


def test_a_shape_that_does_not_fit_the_algorithm_is_refused_before_measuring(tdir):
    for shape, words in (("x=4,z=96", "no label `z`"), ("x=4", "no size for `y`"),
                         ("x=4,y=0", "whole number >= 1")):
        run = dtx("explore", tdir / "t.yaml", "--shape", shape, "--db", tdir / "refused.db")
        assert run.returncode == 2 and words in run.stderr, run.stderr
    assert not (tdir / "refused.db").exists() or "geglu" not in dtx(
        "results", "--db", tdir / "refused.db").stdout
