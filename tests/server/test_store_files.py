"""A results store as a file on disk, with the real binaries: `dtx results` and `dtx best` read
one they cannot write (a read-only file and directory, a read-only file system), and dtxd
refuses to start on one with damaged pages rather than serving 500s while /healthz says ok."""
import os
import pathlib
import shutil
import sqlite3
import subprocess
import tempfile

import pytest

from conftest import ROOT
from dtxd import DTXD, Daemon

DTX = pathlib.Path(os.environ.get("DTX", ROOT / "build" / "explorer" / "dtx"))
GEGLU = (ROOT / "templates" / "geglu.dt").read_text()
NOBODY = 65534


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A store with one finished exploration of `geglu_store` at x=4,y=64, its daemon stopped
    (the write-ahead log checkpointed into the file)."""
    data = tmp_path_factory.mktemp("store")
    d = Daemon(data)
    try:
        status, created = d.post("/v1/explorations", {
            "kernel": "geglu_store", "algorithm": GEGLU,
            "schedule": "geglu.block(x:1, y:{32, 64});\ngeglu.tensorize(x:0, y:0);\n",
            "shapes": [{"x": 4, "y": 64}], "strategy": "exhaustive", "baselines": [],
            "screen_warmup_ms": 1, "screen_rep_ms": 2, "top": 0})
        assert status == 202, created
        x = d.wait_done(created["id"])
        assert x["state"] == "done" and x["measured"] == 2, x
    finally:
        d.stop()
    path = data / "dtx.db"
    assert not (data / "dtx.db-wal").exists()
    return path


def read_it(db, user=None):
    """`dtx results` and `dtx best` on `db`, as `user` (a uid) if given."""
    runs = []
    for args in (["results", "--db", db], ["results", "1", "--db", db],
                 ["best", "geglu_store", "--shape", "x=4,y=64", "--db", db]):
        runs.append(subprocess.run([str(DTX), *map(str, args)], capture_output=True, text=True,
                                   timeout=60, user=user))
    for run in runs:
        assert run.returncode == 0, run.stderr
    assert "geglu_store" in runs[0].stdout, runs[0].stdout
    assert "geglu.block(x:1,y:" in runs[1].stdout, runs[1].stdout
    assert runs[2].stdout.startswith("geglu.block(x:1,y:"), runs[2].stdout


def unchanged(directory, before):
    return sorted(p.name for p in directory.iterdir()) == before


def test_a_read_only_file_in_a_read_only_directory_can_be_read(store):
    # chmod stops only a user other than root: as root, dtx runs as nobody.
    user = NOBODY if os.geteuid() == 0 else None
    top = pathlib.Path(tempfile.mkdtemp(prefix="dtx-ro-"))
    try:
        top.chmod(0o755)
        directory = top / "store"
        directory.mkdir()
        db = directory / "dtx.db"
        shutil.copy(store, db)
        db.chmod(0o444)
        directory.chmod(0o555)
        before = sorted(p.name for p in directory.iterdir())
        mtime = db.stat().st_mtime_ns
        read_it(db, user)
        assert unchanged(directory, before) and db.stat().st_mtime_ns == mtime
    finally:
        (top / "store").chmod(0o755)
        shutil.rmtree(top)


def test_a_store_on_a_read_only_file_system_can_be_read(store):
    if os.geteuid() != 0:
        pytest.skip("mounting a file system needs root")
    mount = pathlib.Path(tempfile.mkdtemp(prefix="dtx-rofs-"))
    mount.chmod(0o755)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        mount.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        shutil.copy(store, mount / "dtx.db")
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        with pytest.raises(OSError):
            (mount / "probe").write_text("x")
        read_it(mount / "dtx.db")
        assert unchanged(mount, ["dtx.db"])
    finally:
        subprocess.run(["umount", str(mount)], check=True)
        mount.rmdir()


def test_dtxd_refuses_a_store_with_damaged_pages(store, tmp_path):
    """Pages of the measurements table overwritten: nothing dtxd reads to start touches them,
    and it used to answer /healthz ok and every read of a schedule with 500."""
    data = tmp_path / "data"
    data.mkdir()
    db = data / "dtx.db"
    shutil.copy(store, db)
    with sqlite3.connect(db) as c:
        page = c.execute("SELECT rootpage FROM sqlite_master WHERE name = 'measurements'")\
            .fetchone()[0]
        size = c.execute("PRAGMA page_size").fetchone()[0]
    c.close()
    with open(db, "r+b") as f:
        f.seek((page - 1) * size)
        f.write(b"\x5a" * size)
    run = subprocess.run([str(DTXD), "--port", "0", "--data-dir", str(data), "--no-example",
                          "--gpus", "none"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "http://" not in run.stdout, run.stdout
    assert f"the results store {db} is damaged" in run.stderr, run.stderr
    assert f"Page {page}:" in run.stderr and "Restore it from a backup" in run.stderr, run.stderr
