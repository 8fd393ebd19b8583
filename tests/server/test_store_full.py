"""A results store that cannot be written: dtxd on a small tmpfs that the test fills. While the
disk is full the daemon says so (/healthz 503 with the reason, POSTs 503), the exploration it was
running is paused, not a phantom `running` (its state follows the store; it resumes by itself),
reads go on; once space returns everything resumes without a restart."""
import errno
import os
import pathlib
import sqlite3
import subprocess
import time

import pytest

from dtxd import Daemon
from test_api import exploration_body


def wait_for(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def small_disk(tmp_path):
    """A 6 MiB tmpfs: a real file system that runs out of space."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(directory):
    """Writes a file until the file system is full; returns it."""
    filler = pathlib.Path(directory) / "filler"
    chunk = b"\0" * 65536
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
        try:  # the last partial chunk
            while True:
                f.write(b"\0" * 512)
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
    return filler


def screened(db, eid):
    with sqlite3.connect(db, timeout=10) as c:
        return c.execute("SELECT s.canonical, COUNT(*) FROM measurements m JOIN schedules s "
                         "ON s.id = m.schedule_id WHERE m.protocol = 'screen' "
                         "AND s.exploration_id = ? GROUP BY s.id", (eid,)).fetchall()


def test_a_full_disk_pauses_and_space_resumes_everything(tmp_path, small_disk):
    db = small_disk / "dtx.db"
    d = Daemon(tmp_path / "data", "--db", str(db))
    try:
        status, health = d.get("/healthz")
        assert status == 200 and health["status"] == "ok" and health["store"]["writable"]
        status, created = d.post("/v1/explorations", exploration_body(
            screen_rep_ms=150, top=2, shapes=[{"x": 4, "y": 144}]))
        assert status == 202
        eid = created["id"]
        wait_for(lambda: len(screened(db, eid)) >= 1, 300, "a first screening")

        filler = fill(small_disk)
        # Its next write fails: the exploration is paused, waiting for the store.
        x = wait_for(lambda: (lambda x: x if "paused" in x else None)(
            d.get(f"/v1/explorations/{eid}")[1]), 120, "the exploration to pause")
        assert x["state"] == "running"  # what the store holds: it was not stopped there
        assert "full" in x["paused"], x
        assert x["progress"]["phase"] == "waiting for the store"
        assert len(screened(db, eid)) < 8

        status, health = d.get("/healthz")
        assert status == 503, health
        assert health["status"] == "unhealthy" and not health["store"]["writable"]
        assert "database or disk is full" in health["store"]["error"], health
        assert "cannot be written" in health["reason"] and health["paused"] == 1
        status, r = d.post("/v1/explorations", exploration_body(shapes=[{"x": 4, "y": 152}]))
        assert status == 503 and r["error"]["code"] == "store_unwritable", r
        assert "full" in r["error"]["message"]
        status, r = d.post(f"/v1/explorations/{eid}/cancel")
        assert status == 503 and r["error"]["code"] == "store_unwritable", r
        # Reads go on.
        assert d.get("/v1/explorations")[0] == 200
        assert d.get(f"/v1/explorations/{eid}/schedules")[0] == 200

        filler.unlink()  # space returns: everything resumes, no restart
        wait_for(lambda: d.get("/healthz")[0] == 200, 30, "/healthz to say ok")
        status, health = d.get("/healthz")
        assert health["status"] == "ok" and health["store"]["writable"]
        x = d.wait_done(eid)
        assert x["state"] == "done" and x["measured"] == 8 and "paused" not in x
        rows = screened(db, eid)
        assert len(rows) == 8 and all(n == 1 for _, n in rows), rows

        status, created = d.post("/v1/explorations", exploration_body(
            screen_rep_ms=150, shapes=[{"x": 4, "y": 152}]))
        assert status == 202
        status, r = d.post(f"/v1/explorations/{created['id']}/cancel")
        assert status == 202
        assert d.wait_done(created["id"])["state"] == "cancelled"
    finally:
        rc, err = d.stop()
    assert rc == 0, err
    assert f"exploration {eid} paused: the results store cannot be written" in err, err
