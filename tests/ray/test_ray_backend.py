"""`dtx explore --backend ray` end to end on a Ray cluster started by the test (`ray start --head`
on this machine), timing on CPU actors with the Triton interpreter: the same schedules and
outcomes as the local pool for the same seed, an actor killed mid-run losing nothing, each
measurement's node recorded, and clear errors for a cluster that cannot be reached or has no
GPU."""
import json
import os
import pathlib
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import ROOT

DTX = pathlib.Path(os.environ.get("DTX", ROOT / "build" / "explorer" / "dtx"))
RAY = pathlib.Path(sys.executable).parent / "ray"

pytest.importorskip("ray")

# 2 x 3 x 2 = 12 points, 8 distinct schedules (the template of tests/explorer/test_explore.py).
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
baselines: [torch]
"""
SHAPE = "x=4,y=96"
QUICK = ["--screen-warmup", "1", "--screen-rep", "4", "--full-warmup", "1", "--full-rep", "4",
         "--rounds", "1", "--top", "3", "--timeout", "120"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster():
    """A one-node Ray cluster with 4 CPUs and no GPU; yields its address."""
    if not DTX.exists():
        pytest.fail(f"{DTX} is not built; run deploy/setup.sh")
    port = free_port()
    temp = tempfile.mkdtemp(prefix="dtxray", dir="/tmp")  # Ray's socket paths must be short
    log = open(pathlib.Path(temp) / "start.log", "w")
    head = subprocess.Popen(
        [str(RAY), "start", "--head", "--port", str(port), "--num-cpus", "4",
         "--include-dashboard=false", "--disable-usage-stats", "--temp-dir", temp,
         "--object-store-memory", "100000000", "--block"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if head.poll() is not None or time.monotonic() > deadline:
                log.close()
                pytest.fail("ray start failed:\n" +
                            (pathlib.Path(temp) / "start.log").read_text()[-3000:])
            time.sleep(0.5)
    yield address
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(head.pid, sig)
            head.wait(timeout=wait)
            break
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    try:
        os.killpg(head.pid, signal.SIGKILL)  # whatever the drain left
    except ProcessLookupError:
        pass
    log.close()
    shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def tdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("rayexplore")
    shutil.copy(ROOT / "templates" / "geglu.dt", d / "geglu.dt")
    (d / "t.yaml").write_text(TEMPLATE)
    # The baseline's file is on this machine only: the driver ships it to the actors.
    (d / "baselines.py").write_text(
        "import torch.nn.functional as F\n\n\n"
        "def geglu_tiny(A, B):\n    return F.gelu(A, approximate='tanh') * B\n")
    return d


def dtx(*args, timeout=900):
    return subprocess.run([str(DTX), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def outcomes(db):
    """{canonical: status} of the exploration's schedules' ranking measurements."""
    with sqlite3.connect(db) as c:
        return dict(c.execute(
            "SELECT s.canonical, m.status FROM schedules s JOIN measurements m "
            "ON m.id = COALESCE(s.full_id, s.screen_id)").fetchall())


def test_same_schedules_and_outcomes_as_the_local_pool_for_the_same_seed(cluster, tdir):
    common = [tdir / "t.yaml", "--shape", SHAPE, "--strategy", "random", "--seed", "7",
              "--budget", "6", "--json", *QUICK]
    local = dtx("explore", *common, "--db", tdir / "local.db")
    assert local.returncode == 0, local.stderr
    ray = dtx("explore", *common, "--db", tdir / "ray.db", "--backend", "ray", "--ray-address",
              cluster, "--ray-interpreter-workers", "2")
    assert ray.returncode == 0, ray.stderr
    assert "Ray cluster at" in ray.stderr and "2 timing" in ray.stderr
    a, b = json.loads(local.stdout)[0], json.loads(ray.stdout)[0]
    assert (a["state"], a["measured"], a["failed"]) == (b["state"], b["measured"], b["failed"])
    assert a["measured"] == 6 and a["failed"] == 0
    # The same schedules with the same outcomes. Their times are not compared across the two
    # runs: one interpreter sample per schedule on a 2-core machine, while Ray starts its other
    # actors beside the first timing, can be several times its quiet value.
    assert outcomes(tdir / "local.db") == outcomes(tdir / "ray.db")
    # Each run reports as best the fastest of the schedules it measured in full (its top 3).
    for summary, db in ((a, tdir / "local.db"), (b, tdir / "ray.db")):
        with sqlite3.connect(db) as c:
            full = dict(c.execute(
                "SELECT s.canonical, m.time_ms FROM schedules s JOIN measurements m "
                "ON m.id = s.full_id WHERE m.status = 'ok'").fetchall())
        assert len(full) == 3, full
        assert summary["best_schedule"] == min(full, key=full.get)
        assert summary["best_ms"] == pytest.approx(full[summary["best_schedule"]])
    # Each measurement records where it ran: this machine's Ray node, no GPU.
    with sqlite3.connect(tdir / "ray.db") as c:
        nodes = c.execute("SELECT DISTINCT node, gpu, device_name FROM measurements").fetchall()
    assert len(nodes) == 1 and len(nodes[0][0]) == 56 and nodes[0][1] is None
    assert nodes[0][2] == "cpu-interpreter"
    # The baseline's file travelled to the actor.
    with sqlite3.connect(tdir / "ray.db") as c:
        baselines = c.execute("SELECT b.name, m.status FROM baselines b JOIN measurements m "
                              "ON m.id = b.measurement_id").fetchall()
    assert baselines and all(row == ("torch", "ok") for row in baselines), baselines


def timing_actor_pids():
    """The Ray actors hosting a timing worker: the parents of `dtx_worker.py --role timing`
    processes started from a dtx-ray run directory."""
    pids = set()
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if any(b"dtx-ray-" in c and c.endswith(b"dtx_worker.py") for c in cmd) and \
                b"timing" in cmd:
            pids.add(int(stat.rsplit(")", 1)[1].split()[1]))
    return sorted(pids)


def test_an_actor_killed_mid_run_loses_nothing(cluster, tdir):
    db = tdir / "kill.db"
    proc = subprocess.Popen(
        [str(DTX), "explore", tdir / "t.yaml", "--shape", SHAPE, "--strategy", "exhaustive",
         "--db", db, "--json", "--backend", "ray", "--ray-address", cluster,
         "--ray-interpreter-workers", "2", "--screen-warmup", "20", "--screen-rep", "150",
         "--top", "0", "--timeout", "120"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = None
    deadline = time.monotonic() + 300
    while killed is None and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        try:
            with sqlite3.connect(db) as c:
                measured = c.execute("SELECT COUNT(*) FROM measurements WHERE schedule_id IS "
                                     "NOT NULL").fetchone()[0]
        except sqlite3.Error:
            continue
        pids = timing_actor_pids()
        if measured >= 1 and len(pids) == 2:
            killed = pids[0]
            os.kill(killed, signal.SIGKILL)
    out, err = proc.communicate(timeout=600)
    assert killed is not None, "the run ended before an actor could be killed:\n" + err
    assert proc.returncode == 0, err
    summary = json.loads(out)[0]
    assert summary["state"] == "done"
    assert summary["measured"] == 8 and summary["failed"] == 0, (summary, err)
    assert "timing worker lost" in err
    with sqlite3.connect(db) as c:
        statuses = c.execute("SELECT status, COUNT(*) FROM measurements WHERE schedule_id IS "
                             "NOT NULL GROUP BY status").fetchall()
    assert statuses == [("ok", 8)], statuses


def test_an_unreachable_cluster_is_a_clear_error(tdir):
    port = free_port()  # nothing listens there
    r = dtx("explore", tdir / "t.yaml", "--shape", SHAPE, "--budget", "2", "--db",
            tdir / "x.db", "--backend", "ray", "--ray-address", f"127.0.0.1:{port}", timeout=120)
    assert r.returncode == 1
    assert f"cannot reach the Ray cluster at 127.0.0.1:{port}" in r.stderr
    assert "ray start --head" in r.stderr


def test_a_cluster_without_gpus_is_a_clear_error(cluster, tdir):
    r = dtx("explore", tdir / "t.yaml", "--shape", SHAPE, "--budget", "2", "--db",
            tdir / "x.db", "--ray-address", cluster, timeout=300)
    assert r.returncode == 1
    assert f"the Ray cluster at {cluster} has no GPU" in r.stderr
    assert "--ray-interpreter-workers" in r.stderr


def test_a_device_model_the_cluster_lacks_fails_the_exploration(cluster, tdir):
    r = dtx("explore", tdir / "t.yaml", "--shape", SHAPE, "--budget", "2", "--db",
            tdir / "d.db", "--ray-address", cluster, "--ray-interpreter-workers", "1",
            "--device", "NVIDIA H100 80GB HBM3", timeout=300)
    assert r.returncode != 0
    assert "no timing worker of the device model `NVIDIA H100 80GB HBM3`" in r.stderr
    assert "cpu-interpreter" in r.stderr


def test_dtxd_measures_on_the_cluster(cluster, tdir, tmp_path):
    """The daemon with `backend: ray` in its configuration: an exploration posted to the API is
    measured by the cluster's actors and kept in the daemon's store."""
    sys.path.insert(0, str(ROOT / "tests"))
    from dtxd import Daemon
    config = tmp_path / "dtxd.yaml"
    config.write_text(f"backend: ray\nray:\n  address: {cluster}\n  interpreter_workers: 1\n")
    d = Daemon(tmp_path / "data", "--config", config)
    try:
        status, health = d.get("/healthz")
        assert status == 200 and health["backend"] == "ray" and health["gpus"] == 0
        body = {"kernel": "geglu_tiny", "algorithm": (ROOT / "templates" / "geglu.dt").read_text(),
                "schedule": TEMPLATE.split("schedule: |\n")[1].split("shapes:")[0],
                "shapes": [{"x": 4, "y": 96}], "dtype": "float32", "strategy": "random",
                "budget": 3, "top": 1, "rounds": 1, "screen_warmup_ms": 1, "screen_rep_ms": 4,
                "full_warmup_ms": 1, "full_rep_ms": 4, "device": "cpu-interpreter"}
        status, created = d.post("/v1/explorations", body)
        assert status == 202, created
        x = d.wait_done(created["explorations"][0]["id"], timeout=300)
        assert x["state"] == "done", x
        assert x["device"] == "cpu-interpreter"
    finally:
        code, err = d.stop()
    assert "Ray cluster at" in err
    with sqlite3.connect(tmp_path / "data" / "dtx.db") as c:
        rows = c.execute("SELECT status, node FROM measurements WHERE schedule_id IS NOT NULL"
                         ).fetchall()
    assert len(rows) == 4 and all(s == "ok" and len(n) == 56 for s, n in rows), rows  # 3 + top 1


def test_dtxd_refuses_a_ray_backend_without_an_address(tmp_path):
    from conftest import ROOT as root
    config = tmp_path / "dtxd.yaml"
    config.write_text("backend: ray\n")
    r = subprocess.run([str(root / "build" / "server" / "dtxd"), "--config", str(config)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "dtxd.yaml:1: error: `backend: ray` needs `ray: {address: HOST:PORT}`" in r.stderr
