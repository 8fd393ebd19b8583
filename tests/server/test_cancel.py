"""A cancel or a shutdown takes effect at once in every phase of an exploration: a baseline or a
full-protocol round being measured is abandoned, as the search's requests are, instead of being
waited out (found by schemathesis's long runs, whose explorations with minutes of repetitions
stayed `running` after their cancel)."""
import re
import time

import pytest

from conftest import ROOT
from dtxd import Daemon, serving

GEGLU = (ROOT / "templates" / "geglu.dt").read_text()
# Repetitions for much longer than a cancel may take.
SLOW = 40000


def body(**settings):
    return {"kernel": "slow", "algorithm": GEGLU, "shapes": [{"x": 4, "y": 64}],
            "schedule": "geglu.block(x:1, y:64);\ngeglu.tensorize(x:0, y:0);\n",
            "strategy": "exhaustive", "rounds": 1, "screen_warmup_ms": 1, "full_warmup_ms": 1,
            **settings}


PHASES = {
    "baselines": body(baselines=["reference"], screen_rep_ms=SLOW, top=0),
    "full": body(baselines=[], screen_rep_ms=1, full_rep_ms=SLOW, top=1),
    # Four schedules screened for 15 s each, all in flight at once: one with the timing worker,
    # the others queued behind it.
    "search": body(baselines=[], screen_rep_ms=15000, top=0,
                   schedule="geglu.block(x:{1, 2}, y:{32, 64});\ngeglu.tensorize(x:0, y:0);\n"),
}


@pytest.fixture
def daemon(tmp_path):
    """One per test: a worker stays busy with the measurement a cancel abandoned."""
    yield from serving(tmp_path)


def started(daemon, phase):
    status, created = daemon.post("/v1/explorations", PHASES[phase])
    assert status == 202, created
    eid = created["id"]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        x = daemon.get(f"/v1/explorations/{eid}")[1]
        if x.get("progress", {}).get("phase") == phase:
            time.sleep(1)  # its requests are with the workers
            return eid
        assert x["state"] in ("queued", "running"), x
        time.sleep(0.2)
    raise AssertionError(f"exploration {eid} did not reach {phase}: {x}")


@pytest.mark.parametrize("phase", ["baselines", "full"])
def test_a_cancel_is_prompt_in_every_phase(daemon, phase):
    eid = started(daemon, phase)
    status, r = daemon.post(f"/v1/explorations/{eid}/cancel")
    assert status == 202, r
    start = time.monotonic()
    x = daemon.wait_done(eid, timeout=SLOW / 1000 / 2)
    assert x["state"] == "cancelled" and time.monotonic() - start < 15, x
    if phase == "full":  # the rounds not all measured: none is stored
        status, page = daemon.get(f"/v1/explorations/{eid}/schedules")
        assert all("full" not in s for s in page["schedules"]), page


def test_a_shutdown_in_the_baselines_is_prompt_and_resumes(tmp_path):
    d = Daemon(tmp_path)
    try:
        eid = started(d, "baselines")
        start = time.monotonic()
        rc, err = d.stop()
        assert rc == 0 and time.monotonic() - start < 20, err[-2000:]
    finally:
        if d.proc.poll() is None:
            d.stop()
    d = Daemon(tmp_path)  # it was left queued, and resumes
    try:
        x = d.get(f"/v1/explorations/{eid}")[1]
        assert x["state"] in ("queued", "running"), x
        assert d.post(f"/v1/explorations/{eid}/cancel")[0] == 202
    finally:
        d.stop()


def test_a_cancel_withdraws_the_queued_requests(daemon):
    """The requests a cancelled exploration still had queued never reach a worker (found in CI:
    the abandoned ones of cancelled explorations held the only worker for minutes, and a
    shutdown waited for room in the pool behind them): the next exploration waits for the one
    being measured only, not for the three queued behind it (15 s each)."""
    eid = started(daemon, "search")
    assert daemon.post(f"/v1/explorations/{eid}/cancel")[0] == 202
    start = time.monotonic()
    assert daemon.wait_done(eid, timeout=60)["state"] == "cancelled"
    status, created = daemon.post("/v1/explorations", body(baselines=[], screen_rep_ms=1, top=0))
    assert status == 202, created
    x = daemon.wait_done(created["id"], timeout=120)
    took = time.monotonic() - start
    assert x["state"] == "done" and took < 40, (took, x)
    log = daemon.stderr_so_far()
    withdrawn = re.search(rf"exploration {eid}: (\d+) queued requests withdrawn", log)
    assert withdrawn and int(withdrawn.group(1)) >= 2, log[-3000:]
