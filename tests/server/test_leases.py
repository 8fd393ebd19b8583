"""Two daemons on one store: an exploration is measured by the one process that holds its lease
(docs/results-store.md, "Leases"). The other leaves it alone, says who runs it, and takes it up
only once that process has stopped (SIGKILL: at once; stopped with SIGSTOP: when its lease runs
out). Every schedule is screened once, the full protocol and the baselines run once, and there
is one best schedule."""
import re
import signal
import sqlite3
import time

from dtxd import Daemon
from test_api import exploration_body


def screened(db, eid):
    with sqlite3.connect(db, timeout=10) as c:
        return c.execute("SELECT s.canonical, COUNT(*) FROM measurements m JOIN schedules s "
                         "ON s.id = m.schedule_id WHERE m.protocol = 'screen' "
                         "AND s.exploration_id = ? GROUP BY s.id", (eid,)).fetchall()


def measured_once(db, eid, schedules, top, baselines):
    """Each schedule screened once, `top` of them measured once with the full protocol, each
    baseline screened once and measured once with the full protocol, no lease left."""
    rows = screened(db, eid)
    assert len(rows) == schedules and all(n == 1 for _, n in rows), rows
    with sqlite3.connect(db, timeout=10) as c:
        full = c.execute("SELECT m.schedule_id, COUNT(*) FROM measurements m JOIN schedules s "
                         "ON s.id = m.schedule_id WHERE m.protocol = 'full' "
                         "AND s.exploration_id = ? GROUP BY m.schedule_id", (eid,)).fetchall()
        base = c.execute("SELECT b.name, m.protocol, COUNT(*) FROM baselines b JOIN measurements "
                         "m ON m.id = b.measurement_id WHERE b.exploration_id = ? "
                         "GROUP BY b.name, m.protocol", (eid,)).fetchall()
        leases = c.execute("SELECT COUNT(*) FROM leases WHERE exploration_id = ?",
                           (eid,)).fetchone()[0]
    assert len(full) == top and all(n == 1 for _, n in full), full
    assert sorted(base) == sorted([(b, p, 1) for b in baselines for p in ("full", "screen")]), base
    assert leases == 0


def wait_for(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def one_best(d, eid):
    """The exploration's ranked schedules have one first, and it is the best of the full
    protocol."""
    status, page = d.get(f"/v1/explorations/{eid}/schedules")
    assert status == 200
    ranks = [s["rank"] for s in page["schedules"]]
    assert ranks.count(1) == 1
    first = page["schedules"][0]
    assert first["rank"] == 1 and "full" in first
    assert first["full"]["time_ms"] == min(s["full"]["time_ms"] for s in page["schedules"]
                                           if "full" in s)


def test_a_second_daemon_leaves_a_running_exploration_to_the_first(tmp_path):
    db = tmp_path / "dtx.db"
    d1 = Daemon(tmp_path)
    d2 = None
    try:
        status, created = d1.post("/v1/explorations", exploration_body(
            screen_rep_ms=40, shapes=[{"x": 4, "y": 112}]))
        assert status == 202
        eid = created["id"]
        wait_for(lambda: len(screened(db, eid)) >= 1, 300, "a first screening")

        d2 = Daemon(tmp_path)  # the same data directory: the same store
        status, x = d2.get(f"/v1/explorations/{eid}")
        assert status == 200 and x["state"] == "running", x
        runner = x["runner"]
        assert runner["pid"] == d1.proc.pid and runner["program"] == "dtxd"
        assert runner["live"] and not runner["here"]
        assert d1.get(f"/v1/explorations/{eid}")[1]["runner"]["here"]
        status, health = d2.get("/healthz")
        assert health["elsewhere"] == 1 and health["running"] == 0 and health["queued"] == 0
        status, r = d2.post(f"/v1/explorations/{eid}/cancel")
        assert status == 409 and r["error"]["code"] == "running_elsewhere", r
        assert f"is run by dtxd (pid {d1.proc.pid} on host " in r["error"]["message"]
        assert r["error"]["details"][0]["pid"] == d1.proc.pid

        x = d1.wait_done(eid)
        assert x["state"] == "done" and x["measured"] == 8
        # The second daemon sees it end, without having run it.
        wait_for(lambda: d2.get("/healthz")[1]["elsewhere"] == 0, 30, "the watch to end")
        assert d2.get(f"/v1/explorations/{eid}")[1]["state"] == "done"
        measured_once(db, eid, schedules=8, top=2, baselines=["reference"])
        one_best(d1, eid)
        rc, err = d2.stop()
        assert rc == 0
        assert f"exploration {eid} (geglu_api at x=4,y=112) is run by dtxd (pid {d1.proc.pid}" \
            in err, err
        assert not re.search(rf"exploration {eid} \(.*\) (starts|resumes)", err), err
    finally:
        if d1.proc.poll() is None:
            d1.stop()
        if d2 and d2.proc.poll() is None:
            d2.stop()


def test_a_daemon_takes_up_what_a_killed_daemon_ran(tmp_path):
    db = tmp_path / "dtx.db"
    d1 = Daemon(tmp_path)
    d2 = None
    try:
        status, created = d1.post("/v1/explorations", exploration_body(
            screen_rep_ms=40, shapes=[{"x": 4, "y": 120}]))
        eid = created["id"]
        wait_for(lambda: len(screened(db, eid)) >= 1, 300, "a first screening")
        d2 = Daemon(tmp_path)
        assert d2.get(f"/v1/explorations/{eid}")[1]["runner"]["pid"] == d1.proc.pid
        before = len(screened(db, eid))
        d1.proc.send_signal(signal.SIGKILL)
        d1.proc.wait()
        # The lease has most of its 30 s to go, but its holder has ended: taken up at once.
        x = wait_for(lambda: (lambda x: x if x.get("runner", {}).get("here") else None)(
            d2.get(f"/v1/explorations/{eid}")[1]), 20, "the second daemon to take it up")
        assert x["runner"]["pid"] == d2.proc.pid
        x = d2.wait_done(eid)
        assert x["state"] == "done" and x["measured"] == 8
        assert before < 8
        measured_once(db, eid, schedules=8, top=2, baselines=["reference"])
        one_best(d2, eid)
    finally:
        if d1.proc.poll() is None:
            d1.stop()
        if d2:
            d2.stop()


def test_a_stopped_daemon_loses_its_exploration_when_its_lease_runs_out(tmp_path):
    """SIGSTOP: the process is alive, so its lease keeps the exploration until it expires; then
    the other daemon takes it over. Woken, the first finds its lease gone before writing and
    leaves the exploration alone."""
    db = tmp_path / "dtx.db"
    d1 = Daemon(tmp_path, "--lease-s", "2")
    d2 = None
    stopped = False
    try:
        status, created = d1.post("/v1/explorations", exploration_body(
            screen_rep_ms=40, shapes=[{"x": 4, "y": 136}]))
        eid = created["id"]
        wait_for(lambda: len(screened(db, eid)) >= 1, 300, "a first screening")
        d2 = Daemon(tmp_path, "--lease-s", "2")
        assert d2.get(f"/v1/explorations/{eid}")[1]["runner"]["pid"] == d1.proc.pid
        # Stop it outside a write transaction (a stopped writer would hold the store's lock).
        for _ in range(50):
            d1.proc.send_signal(signal.SIGSTOP)
            try:
                with sqlite3.connect(db, timeout=0.5) as c:
                    c.execute("BEGIN IMMEDIATE")
                    c.execute("ROLLBACK")
                stopped = True
                break
            except sqlite3.OperationalError:
                d1.proc.send_signal(signal.SIGCONT)
                time.sleep(0.05)
        assert stopped
        t0 = time.time()
        x = wait_for(lambda: (lambda x: x if x.get("runner", {}).get("here") else None)(
            d2.get(f"/v1/explorations/{eid}")[1]), 30, "the second daemon to take it over")
        assert time.time() - t0 >= 0.5  # not at once: the stopped process is alive
        d1.proc.send_signal(signal.SIGCONT)
        stopped = False
        x = d2.wait_done(eid)
        assert x["state"] == "done" and x["measured"] == 8
        measured_once(db, eid, schedules=8, top=2, baselines=["reference"])
        one_best(d2, eid)
        assert d1.get("/healthz")[0] == 200
        rc, err = d1.stop()
        assert rc == 0
        assert f"exploration {eid}: another process took its lease over" in err, err
    finally:
        if stopped:
            d1.proc.send_signal(signal.SIGCONT)
        if d1.proc.poll() is None:
            d1.stop()
        if d2 and d2.proc.poll() is None:
            d2.stop()
