"""The worker host of a Ray actor (explorer/ray/dtx_ray/host.py) on the pool's fake worker
(explorer/tests/fake_worker.py) and on the real one: the local pool's fault rules, one request
at a time."""
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "explorer" / "ray"))
from dtx_ray.host import WorkerHost  # noqa: E402

FAKE = ROOT / "explorer" / "tests" / "fake_worker.py"


@pytest.fixture
def host():
    h = WorkerHost([sys.executable, str(FAKE), "--role", "timing"], startup_timeout_s=30)
    yield h
    h.kill()


def req(rid, func="ok"):
    return {"type": "measure", "id": rid, "func": func}


def test_requests_are_answered_by_one_worker(host):
    hello = host.start()
    assert hello["type"] == "hello" and hello["role"] == "timing"
    for i in range(3):
        r = host.request(req(str(i)), 10)
        assert r["status"] == "ok" and r["id"] == str(i)
    assert host.started == 1


def test_a_hung_request_times_out_and_the_next_gets_a_new_worker(host):
    host.start()
    first = host.pid()
    r = host.request(req("h", "sleep"), 0.5)
    assert r["status"] == "timeout" and "no reply within 0.5 s" in r["message"]
    assert "request h measure sleep" in r["stderr_tail"]
    with pytest.raises(ProcessLookupError):
        os.kill(first, 0)  # killed, with its process group
    assert host.request(req("n"), 10)["status"] == "ok"
    assert host.started == 2


def test_a_timeout_carries_the_output_of_its_own_request_only(host):
    """What an earlier request (or the worker's start) wrote on standard error does not come
    back as a later request's: a timeout's tail used to carry the previous traceback."""
    host.start()
    assert host.request(req("r", "raise"), 10)["status"] == "runtime_error"
    r = host.request(req("h", "sleep"), 0.5)
    assert r["status"] == "timeout" and "request h measure sleep" in r["stderr_tail"], r
    assert "request r " not in r["stderr_tail"] and "starting" not in r["stderr_tail"], r
    host.start()
    r = host.request(req("k", "kill"), 10)
    assert r["status"] == "crashed" and "starting" not in r["stderr_tail"], r


@pytest.mark.parametrize("func, how", [("kill", "killed by SIGKILL"), ("exit", "status 3")])
def test_a_worker_that_dies_costs_its_request_only(host, func, how):
    host.start()
    r = host.request(req("d", func), 10)
    assert r["status"] == "crashed" and how in r["message"]
    assert host.request(req("n"), 10)["status"] == "ok"


def test_a_worker_exiting_after_a_cuda_error_costs_the_next_request_nothing(host):
    host.start()
    assert host.request(req("c", "cuda"), 10)["status"] == "runtime_error"
    assert host.request(req("n"), 10)["status"] == "ok"


def test_a_worker_that_never_says_hello_is_reported():
    h = WorkerHost([sys.executable, str(FAKE)], env={**os.environ, "FAKE_WORKER_NO_HELLO": "1"},
                   startup_timeout_s=1)
    r = h.request(req("x"), 5)
    assert r["status"] == "crashed" and "no hello within the startup timeout" in r["message"]
    h.kill()


def test_the_real_worker_measures_a_module(tmp_path):
    """The same dtx_worker.py the local pool runs, on the interpreter."""
    import hashlib
    from conftest import run_dtc
    out = tmp_path / "m.py"
    assert run_dtc(ROOT / "examples" / "geglu.dt", "-o", out).returncode == 0
    source = out.read_text()
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TRITON_CACHE_DIR": str(tmp_path / "c")}
    h = WorkerHost([sys.executable, str(ROOT / "explorer" / "worker" / "dtx_worker.py"),
                    "--role", "timing"], env=env, startup_timeout_s=120)
    try:
        hello = h.start()
        assert hello["device"]["kind"] == "cpu-interpreter" and hello["gpu"] is None
        assert hello["host"]
        r = h.request({"type": "measure", "id": "1", "func": "geglu",
                       "module": {"source": source,
                                  "sha256": hashlib.sha256(source.encode()).hexdigest()},
                       "sizes": {"x": 4, "y": 70}, "dtype": "float32", "check": True,
                       "times": {"bench": {"warmup_ms": 1, "rep_ms": 2}}}, 120)
        assert r["status"] == "ok", r
        assert r["check"]["mismatched"] == 0
    finally:
        h.kill()
