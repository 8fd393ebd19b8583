"""dtxd under connection pressure, from real sockets: clients that hold connections (slow
requests, idle keep-alives, event streams) never keep /healthz or the API from answering; each
bound answers with what to do; a /v1/expand walk is bounded in time, ends when its client goes,
and does not hold up a shutdown."""
import json
import os
import re
import signal
import socket
import threading
import time

from conftest import ROOT
from dtxd import Daemon

GEGLU = (ROOT / "templates" / "geglu.dt").read_text()
# 10^10 points, every one pruned by `where`: without a bound the walk would take hours.
ENDLESS = {"algorithm": GEGLU, "shape": {"x": 4, "y": 64}, "max_points": 10**9,
           "schedule": "geglu.num_warps({1..100000:+1});\ngeglu.num_stages({1..100000:+1});\n"
                       "where 0 > 1;\n"}


def started(tmp_path, **config):
    path = tmp_path / "dtxd.yaml"
    path.write_text("".join(f"{k}: {v}\n" for k, v in config.items()))
    return Daemon(tmp_path / "data", "--config", str(path))


def port(daemon):
    return int(daemon.base.rsplit(":", 1)[1])


def open_socket(daemon, first_bytes=b""):
    s = socket.create_connection(("127.0.0.1", port(daemon)), timeout=10)
    if first_bytes:
        s.sendall(first_bytes)
    return s


def timed_health(daemon):
    start = time.monotonic()
    status, body = daemon.get("/healthz")
    return status, body, time.monotonic() - start


def raw_post(daemon, path, body):
    data = json.dumps(body).encode()
    s = open_socket(daemon)
    s.sendall(b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % (path.encode(), len(data)) + data)
    return s


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_slow_and_idle_clients_do_not_lock_out_the_api(tmp_path):
    """140 connections that trickle a request (slow-loris) and 140 that send nothing: /healthz
    and a POST still answer at once; the slow ones are dropped at `request_timeout_s`."""
    d = started(tmp_path, request_timeout_s=2)
    held = []
    try:
        for _ in range(140):
            held.append(open_socket(d, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-a: "))
            held.append(open_socket(d))
        time.sleep(0.5)
        status, body, took = timed_health(d)
        assert status == 200 and took < 2, (status, body, took)
        assert body["connections"]["open"] >= 280, body
        status, body = d.post("/v1/expand", {"algorithm": GEGLU, "shape": {"x": 4, "y": 64},
                                             "schedule": "geglu.num_warps({4, 8});\n"})
        assert status == 200 and body["distinct"] == 2, body
        # Past the request deadline (and the idle timeout) every held connection is closed.
        time.sleep(6)
        for s in held:
            s.settimeout(5)
            answer = b""
            while chunk := s.recv(4096):  # httplib may answer 400 to the cut request
                answer += chunk
            assert answer in (b"",) or answer.startswith(b"HTTP/1.1 400"), answer
        status, body, took = timed_health(d)
        assert status == 200 and body["connections"]["open"] <= 2, body
    finally:
        for s in held:
            s.close()
        assert d.proc.poll() is None, "dtxd died"
        d.stop()


def test_connections_beyond_the_limit_are_answered_503_at_once(tmp_path):
    d = started(tmp_path, max_connections=20)
    held = [open_socket(d, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n") for _ in range(30)]
    try:
        answers = []
        for s in held:
            s.settimeout(0.5)
            try:
                answers.append(s.recv(4096))
            except socket.timeout:
                answers.append(None)
        refused = [a for a in answers if a]
        assert len(refused) == 10, answers
        head, body = refused[0].split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in head, head
        assert "max_connections" in json.loads(body)["error"]["message"], body
    finally:
        for s in held:
            s.close()
    time.sleep(0.5)
    status, body, _ = timed_health(d)
    assert status == 200, body
    d.stop()


def test_event_streams_are_bounded_and_the_api_still_answers(tmp_path):
    d = started(tmp_path, max_event_streams=3, max_running=1)
    status, created = d.post("/v1/explorations", {
        "kernel": "long", "algorithm": GEGLU, "schedule": "geglu.num_warps({1..8:+1});\n",
        "shapes": [{"x": 4, "y": 64}], "strategy": "exhaustive", "baselines": [],
        "screen_warmup_ms": 1, "screen_rep_ms": 2, "top": 0, "budget": 8})
    assert status == 202, created
    streams = []
    try:
        path = f"/v1/explorations/{created['id']}/events"
        for _ in range(3):
            s = open_socket(d, b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % path.encode())
            s.settimeout(10)
            assert s.recv(4096).startswith(b"HTTP/1.1 200"), "an event stream did not open"
            streams.append(s)
        status, body, took = timed_health(d)
        assert status == 200 and body["connections"]["event_streams"] == 3, body
        status, body = d.get(path)
        assert status == 503 and body["error"]["code"] == "busy", body
        assert "max_event_streams" in body["error"]["message"], body
        # A stream that ends gives its place back.
        streams.pop().close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status, body, _ = timed_health(d)
            if body["connections"]["event_streams"] < 3:
                break
            time.sleep(0.5)
        assert body["connections"]["event_streams"] == 2, body
    finally:
        for s in streams:
            s.close()
        d.post(f"/v1/explorations/{created['id']}/cancel")
        d.stop()


def test_an_endless_expansion_stops_at_its_time_bound(tmp_path):
    d = started(tmp_path, expand_time_s=1)
    start = time.monotonic()
    status, body = d.post("/v1/expand", ENDLESS)
    took = time.monotonic() - start
    assert status == 200 and took < 10, (status, took)
    assert body["stopped"] == "time" and body["truncated"], body
    assert 0 < body["walked"] < body["space_size"] == 10**10, body
    assert body["rejected"]["where"] == body["walked"] and body["distinct"] == 0, body
    status, body = d.post("/v1/expand", dict(ENDLESS, max_points=1000))
    assert status == 200 and body["stopped"] == "max_points" and body["walked"] == 1000, body
    status, body = d.post("/v1/expand", {"algorithm": GEGLU, "shape": {"x": 4, "y": 64},
                                         "schedule": "geglu.num_warps({4, 8});\n"})
    assert status == 200 and body["stopped"] is None and not body["truncated"], body
    d.stop()


def test_an_expansion_ends_when_its_client_goes(tmp_path):
    d = started(tmp_path, expand_time_s=600)
    s = raw_post(d, "/v1/expand", ENDLESS)
    # Over seconds, not one: on a loaded machine the walk's share of a core in one second
    # can be small, while a walk left running adds up.
    time.sleep(1.5)
    before = cpu_seconds(d.proc.pid)
    time.sleep(3)
    assert cpu_seconds(d.proc.pid) - before > 0.6, "the expansion was not running"
    s.close()
    time.sleep(1)
    before = cpu_seconds(d.proc.pid)
    time.sleep(3)
    assert cpu_seconds(d.proc.pid) - before < 0.3, "the walk went on after its client left"
    status, _, took = timed_health(d)
    assert status == 200
    d.stop()


def test_shutdown_interrupts_an_expansion(tmp_path):
    d = started(tmp_path, expand_time_s=600)
    answer = {}

    def read_answer(s):
        s.settimeout(30)
        answer["bytes"] = b""
        while chunk := s.recv(4096):
            answer["bytes"] += chunk

    s = raw_post(d, "/v1/expand", ENDLESS)
    reader = threading.Thread(target=read_answer, args=(s,))
    reader.start()
    time.sleep(1.5)
    start = time.monotonic()
    d.stop(signal.SIGTERM)
    assert time.monotonic() - start < 10, "dtxd took too long to stop"
    reader.join()
    assert answer["bytes"].startswith(b"HTTP/1.1 503"), answer
    assert b'"stopping"' in answer["bytes"], answer
    s.close()



def test_pipelined_requests_are_all_answered_in_order(tmp_path):
    """Requests sent back to back in one packet: each is answered, in order (the bytes read
    ahead for the first used to be dropped with it, and the second waited out the idle
    timeout unanswered)."""
    d = started(tmp_path)
    one = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    last = b"GET /v1/explorations/999 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    s = open_socket(d, one * 2 + last)
    s.settimeout(5)
    data = b""
    start = time.monotonic()
    while chunk := s.recv(65536):
        data += chunk
    assert time.monotonic() - start < 2, "an answer waited"
    statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", data)
    assert statuses == [b"200", b"200", b"404"], data
    s.close()
    d.stop()
