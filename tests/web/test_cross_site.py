"""A page on another origin, opened in headless Chromium, tries to drive a local dtxd the way a
malicious site would: no-cors POSTs with `text/plain` bodies (no CORS preflight) to create and
cancel explorations and to expand a template, and a CORS POST with JSON (which needs a preflight
dtxd never grants). None of them may create or cancel anything."""
import http.server
import json
import socketserver
import threading

import pytest
from selenium.webdriver.support.ui import WebDriverWait

from dtxd import ROOT, Daemon
from test_pages import driver  # noqa: F401  (the headless Chromium fixture)

GEGLU = (ROOT / "templates" / "geglu.dt").read_text()

ATTACK = """<!doctype html><title>running</title><script>
const base = "%(base)s";
const exploration = JSON.stringify(%(exploration)s);
const attempts = [
  ["/v1/explorations", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"},
                        body: exploration}],
  ["/explore", {method: "POST", mode: "no-cors", body: exploration}],
  ["/v1/explorations/%(victim)d/cancel", {method: "POST", mode: "no-cors", body: "{}"}],
  ["/v1/expand", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"},
                  body: JSON.stringify(%(expand)s)}],
  ["/v1/explorations", {method: "POST", headers: {"Content-Type": "application/json"},
                        body: exploration}],
];
(async () => {
  const seen = [];
  for (const [path, init] of attempts) {
    try { const r = await fetch(base + path, init); seen.push(path + " " + r.type + " " + r.status); }
    catch (e) { seen.push(path + " blocked"); }
  }
  document.body.textContent = seen.join("\\n");
  document.title = "done";
})();
</script>"""


@pytest.fixture
def evil_site(tmp_path):
    """A second HTTP server on another port of this machine: another origin."""
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(tmp_path))  # noqa: E731
    httpd = socketserver.TCPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield tmp_path, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_another_origin_cannot_create_or_cancel(driver, evil_site, tmp_path):  # noqa: F811
    site_dir, site = evil_site
    d = Daemon(tmp_path / "dtxd")
    try:
        # The victim: an exploration that runs for a while (slow repetitions, many points).
        status, victim = d.post("/v1/explorations", {
            "kernel": "victim", "algorithm": GEGLU, "strategy": "exhaustive",
            "schedule": "geglu.block(x:{1, 2}, y:{32, 64, 128, 256});\n",
            "shapes": [{"x": 4, "y": 256}], "screen_warmup_ms": 1, "screen_rep_ms": 200,
            "baselines": []})
        assert status == 202, victim
        exploration = {"kernel": "planted", "algorithm": GEGLU, "schedule": "geglu.block(y:{64});\n",
                       "shapes": [{"x": 4, "y": 64}]}
        expand = {"algorithm": GEGLU, "schedule": "geglu.block(y:{64});\n",
                  "shape": {"x": 4, "y": 64}}
        (site_dir / "attack.html").write_text(ATTACK % {
            "base": d.base, "exploration": json.dumps(exploration), "victim": victim["id"],
            "expand": json.dumps(expand)})
        driver.get(site + "/attack.html")
        WebDriverWait(driver, 60).until(lambda dr: dr.title == "done")
        seen = driver.find_element("css selector", "body").text
        status, listed = d.get("/v1/explorations")
        kernels = [x["kernel"] for x in listed["explorations"]]
        assert kernels == ["victim"], (kernels, seen)
        status, x = d.get(f"/v1/explorations/{victim['id']}")
        assert x["state"] != "cancelled", (x, seen)
        # The CORS POST never got past the preflight: the page could not read an answer.
        assert "/v1/explorations blocked" in seen, seen
    finally:
        d.stop()
