"""schemathesis against a real dtxd: requests generated from server/openapi.json for every
operation, valid ones and ones the document calls invalid, through all of schemathesis's phases
(the document's examples, boundary values and missing parts, random requests, and sequences that
follow the document's links from a new exploration to its schedules and events). No answer may
be a 5xx; every answer must be one the document describes (status, content type, body and
headers); an invalid request must be refused, a request without the token too, and a method the
document does not list must answer 405. The settings are schemathesis.toml beside this file.

The daemon runs on the Triton interpreter, with a token (sent as the document's bearer scheme)
and the Host of its own URL, and holds one small finished exploration (the document's example,
measured cheaply) for the requests to find; explorations the requests create are cancelled as
soon as they are queued (schemathesis_hooks.py). A fixed seed and schemathesis's deterministic
mode make the requests the same each time: about a minute and a half on two cores.

A longer run with random data, to look for more (it prints how to replay each failure):

    DTX_SCHEMATHESIS_SECONDS=900 DTX_SCHEMATHESIS_SEED=7 \\
        .venv/bin/python -m pytest -q tests/server/test_schemathesis.py
"""
import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

from conftest import ROOT
from dtxd import serving

HERE = pathlib.Path(__file__).resolve().parent
TOKEN = "schemathesis-token"
# Examples per operation and phase: about a minute of requests on two cores (3,500 to 5,000 of
# them), well within the bound below.
MAX_EXAMPLES = 200


@pytest.fixture
def daemon(tmp_path):
    yield from serving(tmp_path / "data", "--token", TOKEN, "--max-running", "1")


@pytest.fixture
def seeded(daemon):
    """One finished exploration, the document's example measured cheaply: the examples' ids
    (1) and /v1/best's example (geglu at x=4,y=64) find it, and links from it lead schemathesis
    to its schedules, their measurements and its events."""
    doc = json.loads((ROOT / "server" / "openapi.json").read_text())
    body = dict(doc["components"]["schemas"]["ExplorationRequest"]["example"], budget=3,
                baselines=[], top=1, rounds=1, screen_warmup_ms=0, screen_rep_ms=1,
                full_warmup_ms=0, full_rep_ms=1)
    status, created = daemon.post("/v1/explorations", body,
                                  headers={"Authorization": f"Bearer {TOKEN}"})
    assert status == 202 and created["id"] == 1, created
    x = daemon.wait_done(created["id"], timeout=120)
    assert x["state"] == "done" and x["measured"] == 3 and x["failed"] == 0, x
    status, best = daemon.get("/v1/best?kernel=geglu&shape=x=4,y=64&dtype=float32")
    assert status == 200, best
    return daemon


def test_generated_requests_get_documented_answers_and_no_server_error(seeded, tmp_path):
    daemon = seeded
    seconds = os.environ.get("DTX_SCHEMATHESIS_SECONDS")
    seed = os.environ.get("DTX_SCHEMATHESIS_SEED", "1")
    # A time budget repeats the random phases until it is spent: random data then, not the
    # deterministic mode's same cases again.
    budget = ["--max-time", seconds] if seconds else \
        ["--max-examples", str(MAX_EXAMPLES), "--generation-deterministic"]
    reports = tmp_path / "reports"
    command = [sys.executable, "-m", "schemathesis.cli", "--config-file",
               str(HERE / "schemathesis.toml"), "run", str(ROOT / "server" / "openapi.json"),
               "--url", daemon.base, "--seed", seed, *budget, "--request-timeout", "30",
               "--no-color", "--report", "json", "--report-dir", str(reports)]
    env = {**os.environ, "DTXD_TOKEN": TOKEN, "SCHEMATHESIS_HOOKS": "schemathesis_hooks",
           "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    start = time.monotonic()
    # The bound of CI's run: a run that needs more fails here rather than slowing CI down.
    run = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=int(seconds) + 300 if seconds else 240)
    took = time.monotonic() - start
    output = run.stdout + run.stderr
    print(output)
    failures = output.find("FAILURES")
    assert run.returncode == 0, output[failures:] if failures >= 0 else output

    (report_file,) = reports.glob("*.json")
    report = json.loads(report_file.read_text())
    print(f"schemathesis: {took:.0f} s, seed {seed}: {json.dumps(summary(report))}")
    # Every operation of the document was tested, none skipped for an error of its own.
    operations = report["operations"]
    assert operations["tested"] == operations["total"] == len(documented_operations()), operations
    assert operations["errored"] == 0 and not report["errors"], report["errors"]

    assert daemon.proc.poll() is None, "dtxd died"
    status, health = daemon.get("/healthz")
    assert status == 200 and health["status"] == "ok", health
    # Nothing the run created is still measured.
    deadline = time.monotonic() + 60
    while (health["queued"] or health["running"]) and time.monotonic() < deadline:
        time.sleep(0.5)
        health = daemon.get("/healthz")[1]
    assert health["queued"] == 0 and health["running"] == 0, health
    rc, err = daemon.stop()
    assert rc == 0, err[-3000:]


def summary(report):
    return {"operations": report["operations"]["tested"],
            "test_cases": report["test_cases"]["generated"],
            "phases": {name: phase["status"] for name, phase in report["phases"].items()}}


def documented_operations():
    doc = json.loads((ROOT / "server" / "openapi.json").read_text())
    return {f"{method.upper()} {path}" for path, ops in doc["paths"].items() for method in ops}
