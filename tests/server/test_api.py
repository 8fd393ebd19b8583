"""dtxd end to end: a real daemon on a free port with interpreter workers and its own SQLite
file. The API (docs/server.md, server/openapi.json): compile, expand, explorations from POST to
ranked schedules, events, the best schedule, metrics; bad requests; tokens; and the daemon's
life: SIGTERM leaves no worker and resumes on restart, SIGKILL loses nothing."""
import ast
import json
import os
import pathlib
import re
import shutil
import signal
import sqlite3
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import ROOT
from dtxd import Daemon, alive, serving

GEGLU = (ROOT / "templates" / "geglu.dt").read_text()
TEMPLATE = """\
$BY = {32, 64, 128};
geglu.block(x:{1, 2}, y:$BY);
geglu.tensorize(x:0, y:{0, 64});
where geglu.tensorize.y == 0 or geglu.tensorize.y < $BY;
"""
TINY = {"screen_warmup_ms": 1, "screen_rep_ms": 2, "full_warmup_ms": 1, "full_rep_ms": 2,
        "rounds": 2, "top": 2}


def exploration_body(**extra):
    body = {"kernel": "geglu_api", "algorithm": GEGLU, "schedule": TEMPLATE,
            "shapes": [{"x": 4, "y": 96}], "dtype": "float32", "strategy": "exhaustive",
            "baselines": ["reference"], **TINY}
    body.update(extra)
    return body


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    yield from serving(tmp_path_factory.mktemp("dtxd"))


@pytest.fixture(scope="module")
def finished(daemon):
    """One exhaustive exploration through the API, waited for."""
    status, created = daemon.post("/v1/explorations", exploration_body())
    assert status == 202, created
    return daemon.wait_done(created["id"])


def test_health_and_index(daemon):
    status, h = daemon.get("/healthz")
    assert status == 200 and h["status"] == "ok"
    status, index = daemon.get("/")
    assert status == 200 and index["api"] == "/v1/openapi.json"


def test_templates_list_every_template_file(daemon):
    status, r = daemon.get("/v1/templates")
    assert status == 200 and r["errors"] == []
    names = [t["name"] for t in r["templates"]]
    assert names == sorted(p.stem for p in (ROOT / "templates").glob("*.yaml"))
    geglu = next(t for t in r["templates"] if t["name"] == "geglu")
    assert geglu["kernel"] == "geglu" and geglu["description"].startswith("GeGLU")
    assert "geglu.block(x:{1, 2, 4}, y:$BY);" in geglu["schedule"]
    assert geglu["shapes"][0] == {"x": 16384, "y": 16384} and "torch" in geglu["baselines"]
    # Each one is what POST /v1/expand accepts as it is.
    status, space = daemon.post("/v1/expand", {"algorithm": geglu["algorithm"],
                                               "schedule": geglu["schedule"],
                                               "shape": geglu["shapes"][0], "limit": 1})
    assert status == 200 and space["distinct"] > 0


def test_web_page_is_served_with_its_libraries(daemon):
    def fetch(path, accept="text/html"):
        req = urllib.request.Request(daemon.base + path, headers={"Accept": accept})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.headers, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read().decode()
    for path in ("/", "/explorations", "/explorations/1,2", "/schedules/3", "/compare/1/2", "/new"):
        status, headers, body = fetch(path)
        assert status == 200 and headers["Content-Type"].startswith("text/html"), path
        assert '<script type="module" src="/web/js/app.js">' in body
        assert "default-src 'self'" in headers["Content-Security-Policy"]
    status, headers, body = fetch("/web/js/app.js", "*/*")
    assert status == 200 and "javascript" in headers["Content-Type"] and "ROUTES" in body
    for lib in ("/vendor/chart.js/chart.min.js", "/vendor/highlight.js/highlight.min.js"):
        status, headers, body = fetch(lib, "*/*")
        assert status == 200 and "javascript" in headers["Content-Type"], lib
    # Only the two libraries, not the directory they live in.
    assert fetch("/vendor/jquery/jquery.js", "*/*")[0] == 404
    # A browser asking for an unknown page gets the page (its Not found view), status 404; the
    # API's unknown paths stay JSON.
    status, headers, body = fetch("/no/such/page")
    assert status == 404 and "app.js" in body
    status, headers, body = fetch("/v1/nothing")
    assert status == 404 and json.loads(body)["error"]["code"] == "not_found"


def test_names_are_words_and_cannot_reach_the_generated_code(daemon):
    # The kernel's name ends up in file names, the module and shell lines a CI job copies.
    for bad in ('k"""\nimport os\nx = """', "k;touch${IFS}x", "", "a b", "-k", "x" * 101):
        status, r = daemon.post("/v1/explorations", exploration_body(kernel=bad))
        assert status == 400 and r["error"]["field"] == "kernel", bad
    status, r = daemon.post("/v1/explorations", exploration_body(algorithm_name='a"""b.dt'))
    assert status == 400 and r["error"]["field"] == "algorithm_name"
    # The compiler quotes whatever file name it is given (a library caller may pass any).
    name = 'odd"""\nimport os; os.system("false")\n"""\\.dt'
    status, r = daemon.post("/v1/compile", {"source": GEGLU, "file_name": name})
    assert status == 200 and r["ok"]
    tree = ast.parse(r["output"])
    assert name in ast.get_docstring(tree)
    assert not any(isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) for n in tree.body)


def test_shapes_must_fit_the_algorithm(daemon):
    for shape, words in (({"x": 4, "z": 96}, "no label `z`"), ({"x": 4}, "no size for `y`"),
                         ({"x": 4, "y": 0}, "whole number >= 1")):
        status, r = daemon.post("/v1/explorations", exploration_body(shapes=[shape]))
        assert status == 400 and r["error"]["field"] == "shapes" and words in r["error"]["message"]
        status, r = daemon.post("/v1/expand", {"algorithm": GEGLU, "schedule": TEMPLATE,
                                               "shape": shape})
        assert status == 400 and r["error"]["field"] == "shape" and words in r["error"]["message"]
    status, r = daemon.post("/v1/explorations", exploration_body(shapes=[{"x": 4, "y": 96}] * 2))
    assert status == 400 and "listed twice" in r["error"]["message"]
    status, r = daemon.post("/v1/compile", {"source": GEGLU, "file_name": 123})
    assert status == 400 and r["error"]["field"] == "file_name"
    # The longest kernel name leaves room for its file name.
    status, r = daemon.post("/v1/expand", {"kernel": "k" * 100, "algorithm": GEGLU,
                                           "schedule": TEMPLATE, "shape": {"x": 4, "y": 96}})
    assert status == 200, r
    status, r = daemon.post("/v1/explorations", exploration_body(budget=1.5))
    assert status == 400 and r["error"]["field"] == "budget"


def test_page_urls_answer_like_the_api(daemon):
    def fetch(path, method="GET", accept="text/html"):
        req = urllib.request.Request(daemon.base + path, method=method, data=b"" if method != "GET" else None,
                                     headers={"Accept": accept})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.headers, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read().decode()
    status, headers, _ = fetch("/explorations", "POST", "application/json")
    assert status == 405 and headers["Allow"] == "GET"
    assert fetch("/explorations/")[0] == 200
    # Static files carry the page's policy, and no type is guessed.
    for path in ("/web/", "/web/js/app.js", "/web/css/app.css"):
        status, headers, _ = fetch(path, accept="*/*")
        assert status == 200 and "default-src 'self'" in headers["Content-Security-Policy"], path
        assert headers["X-Content-Type-Options"] == "nosniff"


def test_openapi_covers_every_route(daemon):
    status, doc = daemon.get("/v1/openapi.json")
    assert status == 200 and doc["openapi"].startswith("3.")
    registered = set()
    for f in (ROOT / "server" / "src" / "handlers").glob("*.cpp"):
        for method, route in re.findall(r'api\.(get|post)\(\s*(?:R?"[^"]*"\s*,\s*)?"([^"]+)"',
                                        f.read_text()):
            registered.add((method, route))
    documented = {(m, p) for p, ops in doc["paths"].items() for m in ops}
    assert registered == documented
    # Every documented path answers (not "no route").
    for method, path in documented:
        if method == "get":
            status, body = daemon.get(path.replace("{id}", "999999"))
            assert not (status == 404 and "no route" in json.dumps(body)), path


def test_compile(daemon):
    status, r = daemon.post("/v1/compile", {"source": GEGLU, "emit": "canonical",
                                            "schedule": "geglu.block(x:1, y:256)"})
    assert status == 200 and r["ok"] and r["canonical"].startswith("geglu.block(x:1,y:256)")
    status, r = daemon.post("/v1/compile", {"source": GEGLU, "schedule": "geglu.tensorize(y:3)"})
    assert status == 200 and not r["ok"]
    d = r["diagnostics"][0]
    assert d["code"] == "tensor-not-power-of-two" and d["line"] == 1 and d["col"] > 1
    status, r = daemon.post("/v1/compile", {"source": GEGLU})
    assert status == 200 and r["ok"] and "@triton.jit" in r["output"]


def test_expand(daemon):
    status, r = daemon.post("/v1/expand", {"algorithm": GEGLU, "schedule": TEMPLATE,
                                           "shape": {"x": 4, "y": 96}, "limit": 3})
    assert status == 200, r
    assert r["space_size"] == 12 and r["rejected"] == {"where": 4} and r["distinct"] == 8
    assert len(r["schedules"]) == 3
    status, r = daemon.post("/v1/expand", {"algorithm": GEGLU, "shape": {"x": 4, "y": 96},
                                           "schedule": "geglu.block(y:{64..128);\n"})
    assert status == 422 and r["error"]["code"] == "template_error"
    assert r["error"]["field"] == "schedule" and r["error"]["details"][0]["line"] == 1


def test_exploration_from_post_to_ranked_schedules(daemon, finished):
    x = finished
    assert x["state"] == "done" and x["measured"] == 8 and x["failed"] == 0
    assert x["rejected"] == {"where": 4}
    assert x["best_ms"] > 0 and x["baselines"] == ["reference"]
    status, page = daemon.get(f"/v1/explorations/{x['id']}/schedules?limit=5")
    assert status == 200
    assert [s["rank"] for s in page["schedules"]] == [1, 2, 3, 4, 5]
    assert "full" in page["schedules"][0] and page["baselines"][0]["name"] == "reference"
    status, ok = daemon.get(f"/v1/explorations/{x['id']}/schedules?status=ok&offset=7")
    assert [s["rank"] for s in ok["schedules"]] == [8]
    # Read from all of its text: `7x` and `1.5` were read as 7 and 1.
    for query in ("offset=7x", "limit=1.5"):
        status, r = daemon.get(f"/v1/explorations/{x['id']}/schedules?{query}")
        assert status == 400 and r["error"]["field"] == query.split("=")[0], r
    status, listing = daemon.get("/v1/explorations?kernel=geglu_api&state=done")
    assert status == 200 and x["id"] in [e["id"] for e in listing["explorations"]]


def test_schedule_page_has_program_module_and_measurements(daemon, finished):
    status, page = daemon.get(f"/v1/explorations/{finished['id']}/schedules?limit=1")
    sid = page["schedules"][0]["schedule_id"]
    status, s = daemon.get(f"/v1/schedules/{sid}")
    assert status == 200
    assert s["exploration"] == finished["id"] and s["kernel"] == "geglu_api"
    assert "@triton.jit" in s["module"]
    for stmt in s["canonical"].split(";"):
        assert stmt + ";" in s["program"]
    assert "geglu.compile();" in s["program"]
    assert {m["protocol"] for m in s["measurements"]} == {"screen", "full"}
    # The GPU's index is `gpu_index`: `gpu` is the CUDA-graph time, which replaced it when both
    # were there. The interpreter has neither.
    assert all(m["gpu_index"] is None and "gpu" not in m for m in s["measurements"])


def test_best_for_ci(daemon, finished, tmp_path):
    status, b = daemon.get("/v1/best?kernel=geglu_api&shape=x=4,y=96&dtype=float32")
    assert status == 200 and b["canonical"] and "def geglu(" in b["module"]
    assert b["measurement"]["protocol"] == "full"
    # The module CI fetches computes GeGLU (checked against torch written here).
    (tmp_path / "best.py").write_text(b["module"])
    from conftest import load_module
    import torch
    m = load_module(tmp_path / "best.py")
    A, B = torch.randn(4, 96), torch.randn(4, 96)
    want = 0.5 * A * (1 + torch.tanh(0.7978845608028654 * (A + 0.044715 * A ** 3))) * B
    torch.testing.assert_close(m.geglu(A, B), want, rtol=1e-5, atol=1e-5)
    status, b = daemon.get("/v1/best?kernel=geglu_api&shape=x=4,y=97")
    assert status == 404 and "no correct schedule" in b["error"]["message"]
    status, b = daemon.get("/v1/best?kernel=geglu_api")
    assert status == 400 and b["error"]["field"] == "shape"


def test_best_answers_at_once_when_an_exploration_ends(daemon):
    # The daemon keeps /v1/best's answers for a second; a "nothing known" asked for while an
    # exploration runs (as a CI job polling for it would) must not hide the result it stored.
    shape = "x=3,y=64"
    status, created = daemon.post("/v1/explorations", exploration_body(
        shapes=[{"x": 3, "y": 64}], strategy="random", budget=1, top=1, seed=2))
    assert status == 202, created
    deadline = time.monotonic() + 600
    while True:
        status, x = daemon.get(f"/v1/explorations/{created['id']}")
        status, b = daemon.get(f"/v1/best?kernel=geglu_api&shape={shape}")
        # Once a schedule is measured, it is known (and may be by the time it is asked for).
        assert status == 200 if x["measured"] else status in (200, 404), (x, b)
        if x["state"] in ("done", "failed", "cancelled") or time.monotonic() > deadline:
            break
    assert x["state"] == "done" and x["measured"] == 1, x
    status, b = daemon.get(f"/v1/best?kernel=geglu_api&shape={shape}")
    assert status == 200 and b["canonical"] == x["progress"]["best_schedule"], b


def test_events_stream_progress_then_done(daemon):
    status, created = daemon.post("/explore", exploration_body(strategy="random", budget=3,
                                                               top=0, seed=5))
    assert status == 202
    eid = created["id"]
    with urllib.request.urlopen(daemon.base + f"/v1/explorations/{eid}/events",
                                timeout=300) as stream:
        events = []
        for raw in stream:
            line = raw.decode().strip()
            if line.startswith("event: "):
                events.append(line[7:])
            if events and events[-1] == "done":
                break
    assert "progress" in events and events[-1] == "done"
    assert daemon.wait_done(eid)["measured"] == 3


def test_bad_requests_are_named(daemon):
    status, r = daemon.post("/v1/explorations", raw=b"{not json")
    assert status == 400 and r["error"]["code"] == "malformed_json"
    body = exploration_body()
    del body["schedule"]
    status, r = daemon.post("/v1/explorations", body)
    assert status == 400 and r["error"]["field"] == "schedule"
    status, r = daemon.post("/v1/explorations", exploration_body(strategy="annealing"))
    assert status == 400 and r["error"]["field"] == "strategy"
    status, r = daemon.post("/v1/explorations", exploration_body(colour="blue"))
    assert status == 400 and r["error"]["code"] == "unknown_field"
    status, r = daemon.post("/v1/explorations", exploration_body(shapes=[{"x": -1}]))
    assert status == 400 and r["error"]["field"] == "shapes"
    status, r = daemon.post("/v1/explorations", exploration_body(baselines=["../../etc/x.py:f"]))
    assert status == 400 and r["error"]["field"] == "baselines"
    status, r = daemon.post("/v1/explorations", exploration_body(algorithm="Func f;\nf[x] = 1;"))
    assert status == 422 and r["error"]["code"] == "algorithm_error"
    assert r["error"]["details"][0]["line"] == 2
    status, r = daemon.post("/v1/explorations", raw=b"[" + b"1," * 700000 + b"1]")
    assert status == 413
    status, r = daemon.get("/v1/explorations/424242")
    assert status == 404
    status, r = daemon.get("/v1/nothing")
    assert status == 404 and "no route" in r["error"]["message"]


def test_cancel(daemon, finished):
    status, r = daemon.post(f"/v1/explorations/{finished['id']}/cancel")
    assert status == 409 and r["error"]["code"] == "not_running"
    # Another shape, so that nothing is reused from the explorations before.
    status, created = daemon.post("/v1/explorations", exploration_body(
        screen_rep_ms=200, strategy="exhaustive", shapes=[{"x": 4, "y": 80}]))
    eid = created["id"]
    time.sleep(1)
    status, r = daemon.post(f"/v1/explorations/{eid}/cancel")
    assert status == 202
    x = daemon.wait_done(eid, timeout=300)
    assert x["state"] == "cancelled" and x["measured"] < 8


def test_metrics(daemon, finished):
    daemon.post("/v1/compile", {"source": GEGLU, "emit": "check"})
    status, text = daemon.get("/metrics")
    assert status == 200
    assert re.search(r'dtxd_http_requests_total\{method="POST",route="/v1/explorations",'
                     r'status="202"\} \d+', text)
    assert "dtxd_explorations_queued" in text and "dtxd_worker_starts_total 2" in text
    assert re.search(r'dtxd_schedules_measured_total\{status="ok"\} [1-9]', text)
    assert 'dtxd_schedules_measured_total{status="failed"}' in text
    assert 'dtxd_http_request_seconds_bucket{route="/v1/compile"' in text


def test_tokens_guard_writes(tmp_path):
    d = Daemon(tmp_path, "--token", "s3cret")
    try:
        status, r = d.post("/v1/explorations", exploration_body())
        assert status == 401 and "Bearer" in r["error"]["message"]
        status, r = d.post("/v1/explorations", exploration_body(budget=1, top=0,
                                                                 strategy="random"),
                           headers={"Authorization": "Bearer s3cret"})
        assert status == 202
        assert d.get("/healthz")[0] == 200  # reads need no token
        assert d.get("/v1/explorations")[0] == 200
    finally:
        d.stop()
    d = Daemon(tmp_path / "reads", "--token", "s3cret", "--protect-reads")
    try:
        assert d.get("/v1/explorations")[0] == 401
        assert d.request("GET", "/v1/explorations",
                         headers={"Authorization": "Bearer s3cret"})[0] == 200
        assert d.get("/healthz")[0] == 200 and d.get("/metrics")[0] == 200
        # A wrong token is told apart from none.
        status, r = d.request("GET", "/v1/explorations", headers={"Authorization": "Bearer nope"})
        assert status == 401 and "not accepted" in r["error"]["message"]
        # A browser opening the root gets the page (which asks for the token), not a 401.
        req = urllib.request.Request(d.base + "/", headers={"Accept": "text/html"})
        with urllib.request.urlopen(req, timeout=30) as page:
            assert page.status == 200 and "app.js" in page.read().decode()
    finally:
        d.stop()


def screened(db):
    with sqlite3.connect(db, timeout=10) as c:
        return c.execute("SELECT s.canonical, COUNT(*) FROM measurements m JOIN schedules s "
                         "ON s.id = m.schedule_id WHERE m.protocol = 'screen' "
                         "GROUP BY s.id").fetchall()


def test_sigterm_checkpoints_and_sigkill_loses_nothing(tmp_path):
    d = Daemon(tmp_path)
    status, created = d.post("/v1/explorations", exploration_body(screen_rep_ms=40, top=0,
                                                                  shapes=[{"x": 4, "y": 72}]))
    eid = created["id"]
    db = tmp_path / "dtx.db"
    deadline = time.time() + 300
    while time.time() < deadline and len(screened(db)) < 2:
        time.sleep(0.3)
    rc, err = d.stop(signal.SIGTERM)
    assert rc == 0, err
    workers = [int(p) for p in re.findall(r"started pid (\d+)", err)]
    assert workers and not [p for p in workers if alive(p)], "a worker outlived dtxd"
    with sqlite3.connect(db) as c:
        (state,), = c.execute("SELECT state FROM explorations WHERE id = ?", (eid,)).fetchall()
    assert state == "queued"
    before = len(screened(db))

    # Restart: it resumes; then SIGKILL in the middle, and restart again.
    d2 = Daemon(tmp_path)
    while time.time() < deadline and len(screened(db)) < before + 1:
        time.sleep(0.3)
    d2.proc.send_signal(signal.SIGKILL)
    d2.proc.wait()
    d3 = Daemon(tmp_path)
    try:
        x = d3.wait_done(eid)
        assert x["state"] == "done" and x["measured"] == 8
        rows = screened(db)
        assert len(rows) == 8 and all(n == 1 for _, n in rows), rows
    finally:
        d3.stop()


BAD_REQUESTS = [
    # (method, path, body (dict, bytes or None), expected status, expected code or field)
    ("POST", "/v1/explorations", b"{not json", 400, "malformed_json"),
    ("POST", "/v1/explorations", b"[1, 2]", 400, "bad_request"),
    ("POST", "/v1/explorations", b"", 400, "malformed_json"),
    ("POST", "/v1/explorations", {"algorithm": "x", "schedule": "y", "shapes": []}, 400, "kernel"),
    ("POST", "/v1/explorations", {**exploration_body(), "kernel": 7}, 400, "kernel"),
    ("POST", "/v1/explorations", {**exploration_body(), "kernel": ""}, 400, "kernel"),
    ("POST", "/v1/explorations", {k: v for k, v in exploration_body().items() if k != "algorithm"},
     400, "algorithm"),
    ("POST", "/v1/explorations", {**exploration_body(), "shapes": []}, 400, "shapes"),
    ("POST", "/v1/explorations", {**exploration_body(), "shapes": "x=4"}, 400, "shapes"),
    ("POST", "/v1/explorations", {**exploration_body(), "shapes": [{"x": 1.5}]}, 400, "shapes"),
    ("POST", "/v1/explorations", {**exploration_body(), "shape": {}}, 400, "shape"),
    ("POST", "/v1/explorations", {k: v for k, v in exploration_body().items() if k != "shapes"},
     400, "shapes"),
    ("POST", "/v1/explorations", {**exploration_body(), "dtype": "float64"}, 400, "dtype"),
    ("POST", "/v1/explorations", {**exploration_body(), "budget": -1}, 400, "budget"),
    ("POST", "/v1/explorations", {**exploration_body(), "budget": "many"}, 400, "budget"),
    ("POST", "/v1/explorations", {**exploration_body(), "top": 5000}, 400, "top"),
    ("POST", "/v1/explorations", {**exploration_body(), "rounds": 0}, 400, "rounds"),
    # 2^62 + 1 was read as the double 2^62, within the range, and taken as 2^62.
    ("POST", "/v1/explorations", {**exploration_body(), "seed": 2**62 + 1}, 400, "seed"),
    ("POST", "/v1/explorations", {**exploration_body(), "times": ["wall"]}, 400, "times"),
    ("POST", "/v1/explorations", {**exploration_body(), "compile": "geglu"}, 400, "compile"),
    ("POST", "/v1/explorations", {**exploration_body(), "baselines": "torch"}, 400, "baselines"),
    ("POST", "/v1/explorations", {**exploration_body(), "baselines": ["/etc/passwd:f"]}, 400,
     "baselines"),
    ("POST", "/v1/explorations", {**exploration_body(), "baselines": ["nothere.py:f"]}, 400,
     "baselines"),
    ("POST", "/v1/explorations", {**exploration_body(), "schedule": "geglu.block(y:{1..3})"}, 422,
     "template_error"),
    ("POST", "/v1/explorations", {**exploration_body(), "schedule": "nofunc.block(y:64)"}, 422,
     "template_error"),
    ("POST", "/v1/explorations", {**exploration_body(), "algorithm": "Func f;\nf[x] = 1;"}, 422,
     "algorithm_error"),
    ("POST", "/v1/explorations", {**exploration_body(), "strategy": "annealing"}, 400, "strategy"),
    ("POST", "/v1/explorations", {**exploration_body(), "extra": 1}, 400, "unknown_field"),
    # `source` is another name of `algorithm`: both at once was `source`, whatever `algorithm` was.
    ("POST", "/v1/explorations", {**exploration_body(), "source": GEGLU}, 400, "source"),
    # `test_shapes` (a template file's field) was taken as anything, unread.
    ("POST", "/v1/explorations", {**exploration_body(), "test_shapes": 5}, 400, "test_shapes"),
    ("POST", "/v1/explorations", {**exploration_body(), "test_shapes": [{"x": 0}]}, 400,
     "test_shapes"),
    ("POST", "/v1/compile", {}, 400, "source"),
    ("POST", "/v1/compile", {"source": GEGLU, "emit": "asm"}, 400, "emit"),
    ("POST", "/v1/compile", {"source": GEGLU, "schedule": 5}, 400, "schedule"),
    ("POST", "/v1/expand", {"algorithm": GEGLU, "schedule": TEMPLATE}, 400, "shapes"),
    ("GET", "/v1/explorations?state=sleeping", None, 400, "state"),
    ("GET", "/v1/explorations?limit=lots", None, 400, "bad_parameter"),
    ("GET", "/v1/explorations?offset=1e3", None, 400, "offset"),
    ("GET", "/v1/explorations?offset=-1", None, 400, "offset"),
    ("GET", "/v1/explorations?limit=-5", None, 400, "limit"),
    ("GET", "/v1/explorations?limit=0", None, 400, "limit"),
    ("GET", "/v1/explorations?limit=1001", None, 400, "limit"),
    ("GET", "/v1/explorations?limit=", None, 400, "limit"),
    # Numbers are read from all of their text: these were read as 5 and -7, and served.
    ("GET", "/v1/explorations?limit=5x", None, 400, "limit"),
    ("GET", "/v1/explorations?offset=-7.5e-25", None, 400, "offset"),
    # Ids too large for 64 bits were 400 "not a number".
    ("GET", "/v1/explorations/99999999999999999999", None, 404, "not_found"),
    ("GET", "/v1/schedules/99999999999999999999", None, 404, "not_found"),
    ("POST", "/v1/explorations/99999999999999999999/cancel", None, 404, "not_found"),
    # A cancel has no fields (its body was not read at all).
    ("POST", "/v1/explorations/99999/cancel", {"force": True}, 400, "unknown_field"),
    ("POST", "/v1/explorations/99999/cancel", b"[]", 400, "bad_request"),
    ("POST", "/v1/explorations/99999/cancel", {}, 404, "not_found"),
    ("GET", "/v1/explorations/99999", None, 404, "not_found"),
    ("GET", "/v1/explorations/99999/schedules", None, 404, "not_found"),
    ("GET", "/v1/explorations/99999/events", None, 404, "not_found"),
    ("POST", "/v1/explorations/99999/cancel", None, 404, "not_found"),
    ("GET", "/v1/schedules/99999", None, 404, "not_found"),
    ("GET", "/v1/best?shape=x=1", None, 400, "kernel"),
    ("GET", "/v1/best?kernel=k&shape=x", None, 400, "shape"),
    ("GET", "/v1/best?kernel=k&shape=", None, 400, "shape"),
    ("GET", "/v1/best?kernel=k&shape=%20", None, 400, "shape"),
    ("GET", "/v1/nowhere", None, 404, "not_found"),
    ("DELETE", "/v1/explorations", None, 405, "method_not_allowed"),
    ("PUT", "/v1/compile", {}, 405, "method_not_allowed"),
    ("GET", "/v1/expand", None, 405, "method_not_allowed"),
]


@pytest.mark.parametrize("method,path,body,status,what", BAD_REQUESTS,
                         ids=[f"{m} {p} {w}" for m, p, _, _, w in BAD_REQUESTS])
def test_bad_request_kinds(daemon, method, path, body, status, what):
    raw = body if isinstance(body, bytes) else None
    got, r = daemon.request(method, path, None if raw is not None else body, raw=raw)
    assert got == status, r
    err = r["error"]
    assert what in (err["code"], err.get("field")), err
    assert daemon.get("/healthz")[0] == 200


def test_paging_parameters_are_whole_numbers_in_their_range(daemon, finished):
    """`offset` and `limit` of every list: a value out of range or not a whole number is
    refused, naming the parameter and its range (they used to become 1 or 0 unsaid)."""
    schedules = f"/v1/explorations/{finished['id']}/schedules"
    for path, limit in (("/v1/explorations", 1000), (schedules, 10000)):
        for query, name, words in (("offset=1e3", "offset", "from 0 to 1000000000000"),
                                   ("offset=-1", "offset", "from 0 to 1000000000000"),
                                   ("limit=-5", "limit", f"from 1 to {limit}"),
                                   ("limit=1.5", "limit", f"from 1 to {limit}"),
                                   (f"limit={limit + 1}", "limit", f"from 1 to {limit}")):
            status, r = daemon.get(f"{path}?{query}")
            assert status == 400 and r["error"]["field"] == name, (path, query, r)
            value = query.split("=")[1]
            assert r["error"]["message"] == f"`{name}` is a whole number {words}, not `{value}`", r
        status, r = daemon.get(f"{path}?offset=0&limit={limit}")
        assert status == 200 and r["limit"] == limit and r["offset"] == 0, r
    status, r = daemon.get(f"{schedules}?limit=1&offset=1")
    assert status == 200 and r["limit"] == 1 and r["offset"] == 1 and len(r["schedules"]) == 1


def test_best_needs_a_shape(daemon):
    status, r = daemon.get("/v1/best?kernel=geglu&shape=")
    assert status == 400 and r["error"]["field"] == "shape", r
    assert "`shape` is empty" in r["error"]["message"], r


def test_a_size_beyond_64_bits_is_refused_as_itself(daemon):
    """2^64 - 1 was read as the size -1, and refused as `not -1`."""
    body = exploration_body(shapes=[{"x": 4, "y": 2**64 - 1}])
    status, r = daemon.post("/v1/explorations", body)
    assert status == 400 and r["error"]["field"] == "shapes", r
    assert "-1" not in r["error"]["message"], r


def test_names_cannot_inject_python_through_the_api(daemon, tmp_path):
    # Labels and Funcs named like Python builtins, keywords and the module's own names.
    source = ("Func os, exec_;\nIn __import__, print;\nVar eval, lambda_, x;\n"
              "os[eval, x] = __import__[eval, x] * 2 + print[eval, x];\nos.compile();\n")
    status, r = daemon.post("/v1/compile", {"source": source})
    assert status == 200, r
    if not r["ok"]:
        assert all(d["severity"] != "error" or d["code"] == "semantic" for d in r["diagnostics"])
        return
    module = tmp_path / "m.py"
    module.write_text(r["output"])
    from conftest import load_module
    import torch
    m = load_module(module)
    a, b = torch.randn(3, 5), torch.randn(3, 5)
    torch.testing.assert_close(m.os(a, b), a * 2 + b)
    assert __builtins__ is not None and callable(print)


DTX = pathlib.Path(os.environ.get("DTX", ROOT / "build" / "explorer" / "dtx"))


def test_dtx_client_mode(daemon, tmp_path):
    """`dtx explore|results|best --server URL` do the same work through the daemon."""
    shutil.copy(ROOT / "templates" / "geglu.dt", tmp_path / "geglu.dt")
    (tmp_path / "t.yaml").write_text(
        "kernel: geglu_client\nalgorithm: geglu.dt\ncompile: [geglu]\nschedule: |\n"
        + "".join("  " + line + "\n" for line in TEMPLATE.splitlines())
        + "dtype: float32\nbaselines: [reference]\n")

    def dtx(*args):
        return subprocess.run([str(DTX), *map(str, args), "--server", daemon.base],
                              capture_output=True, text=True, timeout=600)

    r = dtx("explore", tmp_path / "t.yaml", "--shape", "x=4,y=64", "--strategy", "exhaustive",
            "--top", "1", "--rounds", "1", "--screen-rep", "2", "--full-rep", "2", "--json")
    assert r.returncode == 0, r.stderr
    (run,) = json.loads(r.stdout)
    assert run["exploration"]["state"] == "done" and run["exploration"]["measured"] > 0
    assert "progress" in r.stderr or "[" in r.stderr
    out = tmp_path / "best.py"
    r = dtx("best", "geglu_client", "--shape", "x=4,y=64", "-o", out)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == run["top"]["schedules"][0]["canonical"]
    assert "def geglu(" in out.read_text()
    r = dtx("results", "--json")
    assert run["exploration"]["id"] in [x["id"] for x in json.loads(r.stdout)]
    r = dtx("best", "geglu_client", "--shape", "x=4,y=65")
    assert r.returncode == 3 and "no correct schedule" in r.stderr
    bad = subprocess.run([str(DTX), "results", "--server", "http://127.0.0.1:1"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "cannot reach dtxd" in bad.stderr


def test_explorations_share_the_workers(tmp_path):
    """Two explorations queued together are measured at the same time, not one after the other."""
    d = Daemon(tmp_path, "--max-running", "2")
    try:
        ids = []
        for y in (88, 104):  # shapes no earlier test measured: nothing is reused
            status, created = d.post("/v1/explorations", exploration_body(
                screen_rep_ms=60, top=0, shapes=[{"x": 4, "y": y}]))
            assert status == 202
            ids.append(created["id"])
        both_progressed = False
        deadline = time.time() + 300
        while time.time() < deadline:
            xs = [d.get(f"/v1/explorations/{i}")[1] for i in ids]
            if any(x["state"] == "done" for x in xs):
                break
            if all(x["state"] == "running" and x["progress"]["done"] >= 1 for x in xs):
                both_progressed = True
                break
            time.sleep(0.2)
        assert both_progressed, "one exploration waited for the other"
        for i in ids:
            assert d.wait_done(i)["state"] == "done"
    finally:
        d.stop()
