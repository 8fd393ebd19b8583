"""Requests that httplib answers by itself, or whose body it leaves unread, sent as raw bytes to
the built daemon (found by schemathesis, test_schemathesis.py): every answer is JSON, a method
without routes answers as any other method (405 with `Allow`), and a request body left unread
closes the connection instead of being read as the next request."""
import json
import socket
import time

import pytest
import requests

from dtxd import Daemon, check_against_openapi, serving


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    yield from serving(tmp_path_factory.mktemp("framing"), must_survive=True)


def port(daemon):
    return int(daemon.base.rsplit(":", 1)[1])


def exchange(daemon, *parts, pause=0.2):
    """Sends `parts` on one connection, `pause` seconds apart (a body after its headers, as
    clients send them), and reads one answer: (status, headers with lower-case names, body)."""
    with socket.create_connection(("127.0.0.1", port(daemon)), timeout=10) as s:
        for i, part in enumerate(parts):
            if i:
                time.sleep(pause)
            s.sendall(part)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            assert chunk, f"the connection closed before an answer: {data!r}"
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, v in
                   (line.split(":", 1) for line in lines[1:])}
        length = 0 if parts[0].startswith(b"HEAD ") else int(headers.get("content-length", 0))
        while len(body) < length:
            body += s.recv(65536)
    return int(lines[0].split()[1]), headers, body.decode()


def error_of(method, path, status, headers, body):
    assert headers["content-type"] == "application/json", (status, headers, body)
    error = json.loads(body)
    check_against_openapi(method, path, status, error, headers["content-type"])
    return error["error"]


BODY = b'{"source": "Func f;"}'


@pytest.mark.parametrize("method,answer", [("GET", 200), ("HEAD", 200), ("OPTIONS", 405),
                                           ("TRACE", 405)])
def test_a_body_left_unread_closes_the_connection(daemon, method, answer):
    """httplib reads no body of a GET, HEAD, OPTIONS or TRACE: those bytes used to be read as the
    next request on the connection, whose answer was then a 400 meant for them, and every later
    answer on it one request late."""
    head = (f"{method} /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(BODY)}\r\n\r\n").encode()
    status, headers, _ = exchange(daemon, head, BODY)
    assert status == answer and headers.get("connection") == "close", (status, headers)
    # A client that keeps its connection open while the server answers asks again on a new one.
    with requests.Session() as session:
        r = session.request(method, daemon.base + "/healthz", data=BODY,
                            headers={"Content-Type": "application/json"})
        assert r.status_code == answer
        r = session.get(daemon.base + "/healthz")
        assert r.status_code == 200 and r.json()["status"] == "ok", r.text


def test_a_post_refused_before_routing_closes_the_connection(daemon):
    head = (f"POST /v1/compile HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json"
            f"\r\nContent-Length: {len(BODY)}\r\n\r\n").encode()
    status, headers, body = exchange(daemon, head, BODY)
    assert status == 403 and headers.get("connection") == "close", (status, headers)
    assert error_of("POST", "/v1/compile", status, headers, body)["code"] == "forbidden_host"
    # A POST whose body was read keeps its connection.
    status, headers, _ = exchange(daemon, head.replace(b"evil.example", b"127.0.0.1"), BODY)
    assert status == 200 and headers.get("connection") != "close", (status, headers)


@pytest.mark.parametrize("method,path,status,allow", [
    ("TRACE", "/v1/compile", 405, "POST"),
    ("CONNECT", "/healthz", 405, "GET"),
    ("QUERY", "/v1/explorations?limit=1", 405, "POST, GET"),
    ("TRACE", "/nowhere", 404, None),
])
def test_methods_httplib_has_no_routes_for_answer_as_any_other(daemon, method, path, status,
                                                               allow):
    """TRACE and CONNECT were an empty 400 (httplib routes neither), and so was QUERY, whose
    request line httplib does not parse."""
    got, headers, body = exchange(daemon, f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                                  .encode())
    assert got == status and headers.get("allow") == allow, (got, headers, body)
    code = error_of(method, path, got, headers, body)["code"]
    assert code == ("method_not_allowed" if status == 405 else "not_found")


@pytest.mark.parametrize("request_bytes,status,code", [
    (b"NOT HTTP AT ALL\r\n\r\n", 400, "bad_request"),
    (b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nRange: bytes=z\r\n\r\n", 416, "bad_range"),
    (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 414, "uri_too_long"),
    # httplib refuses a multipart body without its boundary before the handler sees it.
    (b"POST /v1/compile HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data\r\n"
     b"Content-Length: 2\r\n\r\n{}", 415, "unsupported_media_type"),
], ids=["not-http", "bad-range", "uri-too-long", "multipart-without-boundary"])
def test_answers_httplib_gives_by_itself_are_json(daemon, request_bytes, status, code):
    got, headers, body = exchange(daemon, request_bytes)
    assert got == status, (got, headers, body)
    assert headers["content-type"] == "application/json" and json.loads(body)["error"]["code"] \
        == code, body
    status_h, _ = daemon.get("/healthz")
    assert status_h == 200


def test_a_daemon_that_logs_a_lot_keeps_answering(tmp_path):
    """The tests read dtxd's log as it writes it: they read it only once it had stopped, and
    after 64 KiB of log (about 900 explorations created, found by a long schemathesis run) a
    request that logged waited forever on the full pipe."""
    d = Daemon(tmp_path, "--log-level", "debug")  # a line for every request
    try:
        for _ in range(1500):
            assert d.get("/healthz")[0] == 200
        assert len(d.stderr_so_far()) > 65536
    finally:
        d.stop()
