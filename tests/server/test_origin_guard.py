"""No web page can drive a local dtxd: a request must name the server in `Host` (a DNS-rebound
name is refused), a browser's `Origin` must be the server's own page, a POST must carry JSON
(what a cross-site form or no-cors fetch cannot send), and with tokens every POST needs one,
compared in constant time. (A real browser on another origin: tests/web/test_cross_site.py.)"""
import json
import socket
import time
import urllib.request

import pytest

from conftest import ROOT
from dtxd import Daemon, serving

GEGLU = (ROOT / "templates" / "geglu.dt").read_text()
EXPAND = {"algorithm": GEGLU, "schedule": "geglu.block(y:{64, 128});\n",
          "shape": {"x": 4, "y": 256}}


def raw(daemon, method, path, body=None, headers=None):
    """A request with exactly these headers (urllib adds Host unless one is given)."""
    req = urllib.request.Request(daemon.base + path, method=method, headers=headers or {},
                                 data=None if body is None else body.encode())
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    yield from serving(tmp_path_factory.mktemp("guard"))


def count(daemon):
    return len(daemon.get("/v1/explorations")[1]["explorations"])


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8080", "evil.localhost",
                                  "127.0.0.1.nip.io", "[::2]x", ""])
def test_a_host_that_is_not_ours_is_refused(daemon, host):
    port = daemon.base.rsplit(":", 1)[1]
    status, body = raw(daemon, "GET", "/v1/explorations", headers={"Host": host or f":{port}"})
    assert status in (400, 403) and status != 200, body
    status, body = raw(daemon, "POST", "/v1/expand", json.dumps(EXPAND),
                       {"Host": host or f":{port}", "Content-Type": "application/json"})
    assert status in (400, 403), body


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LOCALHOST", "[::1]"])
def test_our_names_are_served(daemon, host):
    port = daemon.base.rsplit(":", 1)[1]
    status, body = raw(daemon, "GET", "/healthz", headers={"Host": f"{host}:{port}"})
    assert status == 200, body


def test_origin_must_be_the_server_itself(daemon):
    port = int(daemon.base.rsplit(":", 1)[1])
    before = count(daemon)
    for origin in ["http://attacker.example", f"http://127.0.0.1:{port + 1}", "null",
                   f"https://attacker.example:{port}", f"http://localhost:{port}/x"]:
        status, body = raw(daemon, "POST", "/v1/expand", json.dumps(EXPAND),
                           {"Origin": origin, "Content-Type": "application/json"})
        assert status == 403 and body["error"]["code"] == "forbidden_origin", (origin, body)
        status, body = raw(daemon, "GET", "/v1/explorations", headers={"Origin": origin})
        assert status == 403, (origin, body)
    for origin in [f"http://127.0.0.1:{port}", f"http://localhost:{port}"]:
        status, body = raw(daemon, "POST", "/v1/expand", json.dumps(EXPAND),
                           {"Origin": origin, "Content-Type": "application/json"})
        assert status == 200, (origin, body)
    assert count(daemon) == before


@pytest.mark.parametrize("ctype", [None, "text/plain", "application/x-www-form-urlencoded",
                                   "multipart/form-data; boundary=x", "application/jsonx"])
def test_a_post_must_say_json(daemon, ctype):
    before = count(daemon)
    body = {"kernel": "sneaky", "algorithm": GEGLU, "schedule": "geglu.block(y:{64});\n",
            "shapes": [{"x": 4, "y": 64}]}
    status, answer = raw(daemon, "POST", "/v1/explorations", json.dumps(body),
                         {"Content-Type": ctype} if ctype else {})
    # httplib reads a multipart body itself, and refuses this one as malformed first.
    refused = (415, 400) if ctype and ctype.startswith("multipart/") else (415,)
    assert status in refused, answer
    assert status == 400 or answer["error"]["code"] == "unsupported_media_type", answer
    status, answer = raw(daemon, "POST", "/v1/explorations/1/cancel", "",
                         {"Content-Type": ctype} if ctype else {})
    assert status in refused, answer
    assert count(daemon) == before
    status, answer = raw(daemon, "POST", "/v1/expand", json.dumps(EXPAND),
                         {"Content-Type": "application/json; charset=utf-8"})
    assert status == 200, answer


def test_every_post_needs_the_token(tmp_path):
    d = Daemon(tmp_path / "tok", "--token", "s3cret-token")
    try:
        h = {"Content-Type": "application/json"}
        for path, body in [("/v1/expand", EXPAND), ("/v1/compile", {"source": GEGLU})]:
            status, answer = raw(d, "POST", path, json.dumps(body), h)
            assert status == 401, (path, answer)
            status, answer = raw(d, "POST", path, json.dumps(body),
                                 {**h, "Authorization": "Bearer s3cret-tokeN"})
            assert status == 401, (path, answer)
            status, answer = raw(d, "POST", path, json.dumps(body),
                                 {**h, "Authorization": "Bearer s3cret-token-and-more"})
            assert status == 401, (path, answer)
            for scheme in ("Bearer", "bearer", "BEARER"):
                status, answer = raw(d, "POST", path, json.dumps(body),
                                     {**h, "Authorization": f"{scheme} s3cret-token"})
                assert status == 200, (path, scheme, answer)
        status, answer = raw(d, "GET", "/v1/explorations")
        assert status == 200  # reads stay open unless --protect-reads
    finally:
        d.stop()


def test_healthz_shows_the_database_only_to_those_who_may_use_the_server(tmp_path, daemon):
    """Where the store lies on the server's disk is for callers the server trusts: everyone
    when it has no tokens (they may do anything), else those whose token it accepts."""
    status, h = daemon.get("/healthz")
    assert status == 200 and h["database"] == str(daemon.data_dir / "dtx.db"), h
    d = Daemon(tmp_path / "tok", "--token", "s3cret-token")
    try:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            status, h = raw(d, "GET", "/healthz", headers=headers)
            assert status == 200 and h["status"] == "ok" and "database" not in h, h
            assert str(tmp_path) not in json.dumps(h), h
        status, h = raw(d, "GET", "/healthz", headers={"Authorization": "Bearer s3cret-token"})
        assert status == 200 and h["database"] == str(tmp_path / "tok" / "dtx.db"), h
    finally:
        d.stop()


def test_configured_host_names_are_served(tmp_path):
    config = tmp_path / "dtxd.yaml"
    config.write_text("hosts: [dtx.internal]\n")
    d = Daemon(tmp_path / "h", "--config", config)
    try:
        port = d.base.rsplit(":", 1)[1]
        status, _ = raw(d, "GET", "/healthz", headers={"Host": f"dtx.internal:{port}"})
        assert status == 200
        status, _ = raw(d, "GET", "/healthz", headers={"Host": f"other.internal:{port}"})
        assert status == 403
    finally:
        d.stop()


def exchange(daemon, request):
    """Sends raw bytes on one connection; the answers read until the server closes it or a
    second passes (status, headers, body of the first; everything read)."""
    host, port = daemon.base.rsplit("/", 1)[1].split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(request)
        s.settimeout(1)
        data = b""
        try:
            while chunk := s.recv(65536):
                data += chunk
        except socket.timeout:
            pass
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    body = rest[:int(headers.get("content-length", len(rest)))]
    return int(lines[0].split()[1]), headers, json.loads(body) if body else None, data


def post_head(daemon, extra):
    port = daemon.base.rsplit(":", 1)[1]
    return (f"POST /v1/expand HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\n{extra}\r\n").encode()


def test_a_body_of_two_lengths_is_refused(daemon):
    """Two `Content-Length` headers that differ: which body is meant is ambiguous (a proxy in
    front may read the other one, and the rest as another request). It is refused before its
    body is read, and the answer tells a proxy not to send more on the connection."""
    body = json.dumps(EXPAND).encode()
    n = len(body)
    for extra in (f"Content-Length: {n}\r\nContent-Length: {n + 50}\r\n",
                  f"Content-Length: {n + 50}\r\nContent-Length: {n}\r\n",
                  f"Content-Length: {n}, {n}\r\n", "Content-Length: -1\r\n",
                  f"Content-Length: {n}\r\nTransfer-Encoding: chunked\r\n"):
        status, headers, answer, data = exchange(daemon, post_head(daemon, extra) + body)
        assert status == 400, (extra, data)
        assert answer["error"]["code"] == "bad_content_length", answer
        assert "`Content-Length" in answer["error"]["message"], answer
        assert headers["connection"] == "close", headers
    # The same length twice is one length.
    status, _, answer, _ = exchange(
        daemon, post_head(daemon, f"Content-Length: {len(body)}\r\nContent-Length: {len(body)}\r\n"
                          "Connection: close\r\n") + body)
    assert status == 200 and answer["distinct"] == 2, answer
    assert daemon.get("/healthz")[0] == 200


def test_a_post_without_a_length_gets_a_json_error(daemon):
    status, headers, answer, data = exchange(daemon, post_head(daemon, "Connection: close\r\n") +
                                             json.dumps(EXPAND).encode())
    assert status == 400 and headers["content-type"] == "application/json", data
    assert answer["error"]["code"] == "length_required", answer
    assert "needs `Content-Length`" in answer["error"]["message"], answer
    assert daemon.get("/healthz")[0] == 200
    # Promptly: not after the read timeout (30 s) that waiting for the body's end would take.
    start = time.monotonic()
    exchange(daemon, post_head(daemon, "") + b"{}")
    assert time.monotonic() - start < 5


def test_an_unreadable_request_gets_a_json_error(daemon):
    status, headers, answer, data = exchange(daemon, b"NONSENSE\r\n\r\n")
    assert status == 400 and headers["content-type"] == "application/json", data
    assert answer["error"]["code"] == "bad_request", answer
