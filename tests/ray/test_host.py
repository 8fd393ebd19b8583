"""The worker process of a Ray actor (explorer/ray/dtx_ray/host.py) on the pool's fake worker
(explorer/tests/fake_worker.py) and on the real one: what each exchange reports. What an outcome
costs is the scheduler's (explorer/tests/MeasurementSchedulerTest.cpp)."""
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "explorer" / "ray"))
from dtx_ray.host import WorkerProcess, WorkerStartError  # noqa: E402

FAKE = ROOT / "explorer" / "tests" / "fake_worker.py"


@pytest.fixture
def worker():
    w = WorkerProcess([sys.executable, str(FAKE), "--role", "timing"])
    yield w
    w.kill()


def req(rid, func="ok"):
    return {"type": "measure", "id": rid, "func": func}


def test_requests_are_answered_by_one_worker(worker):
    hello = worker.start(30)
    assert hello["type"] == "hello" and hello["role"] == "timing"
    for i in range(3):
        r = worker.exchange(req(str(i)), 10)
        assert r["io"] == "done" and r["reply"]["status"] == "ok" and r["reply"]["id"] == str(i)
    assert worker.started == 1


def test_a_hung_request_times_out_and_the_worker_is_killed_with_its_group(worker):
    worker.start(30)
    first = worker.pid()
    r = worker.exchange(req("h", "sleep"), 0.5)
    assert r["io"] == "timeout" and "request h measure sleep" in r["tail"]
    assert worker.running()  # killing it is the caller's decision
    worker.kill()
    with pytest.raises(ProcessLookupError):
        os.kill(first, 0)
    worker.start(30)
    assert worker.exchange(req("n"), 10)["io"] == "done"


def test_a_tail_is_the_output_of_its_own_request_only(worker):
    """What an earlier request (or the worker's start) wrote on standard error does not come
    back with a later request's outcome."""
    worker.start(30)
    assert worker.exchange(req("r", "raise"), 10)["reply"]["status"] == "runtime_error"
    r = worker.exchange(req("h", "sleep"), 0.5)
    assert r["io"] == "timeout" and "request h measure sleep" in r["tail"], r
    assert "request r " not in r["tail"] and "starting" not in r["tail"], r
    worker.start(30)
    r = worker.exchange(req("k", "kill"), 10)
    assert r["io"] == "closed" and "starting" not in r["tail"], r


@pytest.mark.parametrize("func, how", [("kill", "killed by signal 9 (SIGKILL)"),
                                       ("exit", "exited with status 3")])
def test_a_worker_that_dies_during_a_request_is_closed(worker, func, how):
    worker.start(30)
    r = worker.exchange(req("d", func), 10)
    assert r["io"] == "closed" and r["how"] == how, r
    assert not worker.running()


def test_a_worker_gone_before_a_request_leaves_it_unsent(worker):
    worker.start(30)
    r = worker.exchange(req("c", "cuda"), 10)  # it answers, then exits as the real one does
    assert r["reply"]["status"] == "runtime_error"
    worker.proc.wait(timeout=10)
    r = worker.exchange(req("n"), 10)
    assert r["io"] == "unsent" and r["how"] == "exited with status 1", r


def test_a_worker_that_never_says_hello_is_reported():
    w = WorkerProcess([sys.executable, str(FAKE)], env={**os.environ, "FAKE_WORKER_NO_HELLO": "1"})
    with pytest.raises(WorkerStartError, match="no hello from the worker within the startup"):
        w.start(1)
    assert not w.running()


def test_a_worker_that_cannot_start_is_reported():
    w = WorkerProcess(["/nonexistent/python", str(FAKE)])
    with pytest.raises(WorkerStartError, match="cannot start"):
        w.start(5)


def test_the_real_worker_measures_a_module(tmp_path):
    """The same dtx_worker.py the local pool runs, on the interpreter."""
    import hashlib
    from conftest import run_dtc
    out = tmp_path / "m.py"
    assert run_dtc(ROOT / "examples" / "geglu.dt", "-o", out).returncode == 0
    source = out.read_text()
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TRITON_CACHE_DIR": str(tmp_path / "c")}
    w = WorkerProcess([sys.executable, str(ROOT / "src" / "dtx" / "worker.py"),
                       "--role", "timing"], env=env)
    try:
        hello = w.start(120)
        assert hello["device"]["kind"] == "cpu-interpreter" and hello["gpu"] is None
        assert hello["host"]
        r = w.exchange({"type": "measure", "id": "1", "func": "geglu",
                        "module": {"source": source,
                                   "sha256": hashlib.sha256(source.encode()).hexdigest()},
                        "sizes": {"x": 4, "y": 70}, "dtype": "float32", "check": True,
                        "times": {"bench": {"warmup_ms": 1, "rep_ms": 2}}}, 120)
        assert r["io"] == "done" and r["reply"]["status"] == "ok", r
        assert r["reply"]["check"]["mismatched"] == 0
    finally:
        w.kill()
