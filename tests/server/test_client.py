"""dtx.Client (src/dtx/client.py, docs/python.md) against a real dtxd: every method, and every
kind of error answer raised as its exception with the daemon's message and field."""
import json
import time

import pytest
import torch

import dtx
from conftest import ROOT
from dtxd import Daemon, serving

GEGLU = (ROOT / "templates" / "geglu.dt").read_text()
TEMPLATE = """\
$BY = {32, 64};
geglu.block(x:{1, 2}, y:$BY);
geglu.tensorize(x:0, y:0);
"""
TINY = {"screen_warmup_ms": 1, "screen_rep_ms": 2, "full_warmup_ms": 1, "full_rep_ms": 2,
        "rounds": 1, "top": 1}
FIELDS = {"kernel": "geglu_client", "algorithm": GEGLU, "schedule": TEMPLATE,
          "shapes": [{"x": 4, "y": 96}], "dtype": "float32", "strategy": "exhaustive",
          "baselines": ["reference"], **TINY}


def geglu(A, B):
    return 0.5 * A * (1 + torch.tanh(0.7978845608028654 * (A + 0.044715 * A ** 3))) * B


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    yield from serving(tmp_path_factory.mktemp("dtxd"))


@pytest.fixture(scope="module")
def client(daemon):
    return dtx.Client(daemon.base)


@pytest.fixture(scope="module")
def finished(client):
    created = client.explore(**FIELDS)
    assert created["id"] and len(created["explorations"]) == 1
    return client.wait(created["id"], timeout=600)


def test_a_url_must_be_http():
    with pytest.raises(ValueError, match="not an http"):
        dtx.Client("127.0.0.1:8080")


def test_explore_wait_exploration_and_list(client, finished):
    assert finished["state"] == "done", finished
    assert finished["measured"] == 4
    again = client.exploration(finished["id"])
    assert again["id"] == finished["id"] and "progress" in again
    listed = client.explorations(kernel="geglu_client")
    assert [e["id"] for e in listed["explorations"]] == [finished["id"]]
    assert client.explorations(kernel="no_such_kernel")["explorations"] == []


def test_results_schedule_and_best(client, finished):
    ranked = client.results(finished["id"])
    assert len(ranked["schedules"]) == 4
    assert ranked["schedules"][0]["rank"] == 1
    assert client.results(finished["id"], shape={"x": 4, "y": 96})["schedules"]
    one = client.schedule(ranked["schedules"][0]["schedule_id"])
    assert "def geglu(" in one["module"]
    best = client.best_result("geglu_client", {"x": 4, "y": 96}, dtype="float32")
    assert best["measurement"]["protocol"] == "full"
    m = client.best("geglu_client", "x=4,y=96", dtype="float32")
    A, B = torch.randn(4, 96), torch.randn(4, 96)
    torch.testing.assert_close(m.geglu(A, B), geglu(A, B), rtol=1e-5, atol=1e-5)


def test_explore_from_a_template_file(client, tmp_path):
    (tmp_path / "geglu.dt").write_text(GEGLU)
    fields = {k: v for k, v in FIELDS.items() if k != "algorithm"}
    (tmp_path / "t.yaml").write_text(json.dumps({**fields, "algorithm": "geglu.dt",
                                                 "kernel": "geglu_file"}))
    # Keywords override the file's fields; this one is cancelled at once.
    created = client.explore(tmp_path / "t.yaml", shapes=[{"x": 4, "y": 80}],
                             screen_rep_ms=200)
    client.cancel(created["id"])
    x = client.wait(created["id"], timeout=300)
    assert x["kernel"] == "geglu_file" and x["state"] in ("cancelled", "done")


def test_bad_requests_name_their_field(client):
    with pytest.raises(dtx.BadRequest) as e:
        client.explore(**{k: v for k, v in FIELDS.items() if k != "schedule"})
    assert e.value.status == 400 and e.value.field == "schedule" and e.value.message
    with pytest.raises(dtx.BadRequest) as e:
        client.explore(**{**FIELDS, "strategy": "annealing"})
    assert e.value.field == "strategy" and e.value.message in str(e.value)
    assert "exhaustive, random" in e.value.message
    with pytest.raises(dtx.BadRequest) as e:
        client.explore(**{**FIELDS, "algorithm": "Func f;\nf[x] = 1;"})
    assert e.value.status == 422 and e.value.code == "algorithm_error"
    assert e.value.details[0]["line"] == 2
    with pytest.raises(dtx.BadRequest) as e:
        client.best_result("geglu_client", "")
    assert e.value.field == "shape"
    with pytest.raises(ValueError, match="template file or the fields"):
        client.explore()
    with pytest.raises(TypeError, match="must be an int"):
        client.best_result("geglu_client", {"x": "4"})


def test_missing_things_are_not_found(client, finished):
    with pytest.raises(dtx.NotFound) as e:
        client.exploration(424242)
    assert e.value.status == 404
    with pytest.raises(dtx.NotFound):
        client.schedule(424242)
    with pytest.raises(dtx.NotFound, match="no correct schedule"):
        client.best("geglu_client", {"x": 4, "y": 97})


def test_cancelling_a_finished_exploration_conflicts(client, finished):
    with pytest.raises(dtx.Conflict) as e:
        client.cancel(finished["id"])
    assert e.value.code == "not_running" and e.value.status == 409


def test_tokens(tmp_path):
    d = Daemon(tmp_path, "--token", "s3cret", "--protect-reads")
    try:
        with pytest.raises(dtx.AuthError, match="Bearer") as e:
            dtx.Client(d.base).explorations()
        assert e.value.status == 401
        with pytest.raises(dtx.AuthError, match="not accepted"):
            dtx.Client(d.base, token="nope").explorations()
        assert dtx.Client(d.base, token="s3cret").explorations()["explorations"] == []
    finally:
        d.stop()


def test_a_daemon_that_is_gone_is_a_connection_error_not_an_answer(tmp_path):
    d = Daemon(tmp_path)
    client = dtx.Client(d.base)
    assert client.explorations()["explorations"] == []
    d.stop()
    with pytest.raises(OSError) as e:  # nothing listens any more: the connection is refused
        client.explorations()
    assert not isinstance(e.value, dtx.DtxError)


def test_a_daemon_that_cannot_serve_raises_server_error(tmp_path):
    """5xx: a daemon at its connection limit answers 503 at once; the client raises ServerError
    with the daemon's code and message, and the next call, once a connection is free, works."""
    import socket
    config = tmp_path / "dtxd.yaml"
    config.write_text("max_connections: 1\n")
    d = Daemon(tmp_path / "data", "--config", str(config))
    held = socket.create_connection(("127.0.0.1", int(d.base.rsplit(":", 1)[1])))
    try:
        # One whole request answered: the connection is the daemon's, open and counted, while
        # it waits for the next one.
        held.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += held.recv(4096)
        assert answer.startswith(b"HTTP/1.1 200"), answer
        client = dtx.Client(d.base)
        with pytest.raises(dtx.ServerError) as e:
            client.explorations()
        assert e.value.status == 503 and e.value.code == "busy"
        assert "max_connections" in e.value.message
        held.close()
        for _ in range(50):  # the held connection's thread lets go
            try:
                assert client.explorations()["explorations"] == []
                break
            except dtx.ServerError:
                time.sleep(0.1)
        else:
            pytest.fail("the daemon stayed busy after the connection closed")
    finally:
        held.close()
        d.stop()
