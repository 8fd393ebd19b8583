"""Single requests that used to crash or wedge dtxd, sent to the built daemon: templates nested
deeper than the parser and evaluator may recurse, chains of ties, ranges too long to list, sizes
whose arithmetic overflowed. Each gets an answer naming the limit, promptly, and the daemon
keeps serving."""
import json
import os
import pathlib
import subprocess
import time

import pytest

from conftest import ROOT
from dtxd import serving

DTX = pathlib.Path(os.environ.get("DTX", ROOT / "build" / "explorer" / "dtx"))

GEGLU = (ROOT / "templates" / "geglu.dt").read_text()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    yield from serving(tmp_path_factory.mktemp("limits"), must_survive=True)


def expand(daemon, schedule, shape=None, **extra):
    start = time.monotonic()
    status, body = daemon.post("/v1/expand", {"algorithm": GEGLU, "schedule": schedule,
                                              "shape": shape or {"x": 4, "y": 64}, **extra})
    assert time.monotonic() - start < 30, "the answer took too long"
    assert daemon.proc.poll() is None, "dtxd died"
    status_h, _ = daemon.get("/healthz")
    assert status_h == 200
    return status, body


def messages(body):
    return " ".join(d.get("message", "") for d in body["error"].get("details", [])) + \
        body["error"]["message"]


NESTED_CHOICES = "geglu.num_warps(" + "{(" * 20000 + "4" + ")}" * 20000 + ");\n"
NESTED_WHERE = "geglu.num_warps({4, 8});\nwhere " + "(" * 100000 + "1" + ")" * 100000 + ";\n"
NOT_CHAIN = "geglu.num_warps({4, 8});\nwhere " + "not " * 100000 + "1;\n"
LONG_SUM = "geglu.num_warps({4, 8});\nwhere " + " + ".join(["1"] * 100000) + " > 0;\n"
TIE_CHAIN = "$T0 = {4, 8};\n" + "".join(f"$T{i} = {{$T{i - 1}}};\n" for i in range(1, 5000)) + \
    "geglu.num_warps($T4999);\n"


@pytest.mark.parametrize("schedule", [NESTED_CHOICES, NESTED_WHERE, NOT_CHAIN, LONG_SUM,
                                      TIE_CHAIN],
                         ids=["choices", "parentheses", "not", "sum", "ties"])
def test_deep_templates_are_refused_with_the_limit(daemon, schedule):
    status, body = expand(daemon, schedule)
    assert status == 422, body
    assert "200 levels deep" in messages(body), body
    status, body = daemon.post("/v1/explorations", {
        "kernel": "deep", "algorithm": GEGLU, "schedule": schedule,
        "shapes": [{"x": 4, "y": 64}]})
    assert status == 422 and "200 levels deep" in messages(body), body


def test_a_range_too_long_to_list_is_refused_at_once(daemon):
    status, body = expand(daemon, "geglu.num_warps({1..1000000000000000:+1});\n")
    assert status == 422 and "more than 100000 values" in messages(body), body
    status, body = expand(daemon, "geglu.block(y:{1..576460752303423488});\n")
    assert status == 200 and body["space_size"] == 60, body  # 2^0 .. 2^59, listed once each


def test_arithmetic_that_overflows_is_an_error_not_a_wrap(daemon):
    status, body = expand(daemon, "geglu.num_warps({4, 8});\n"
                                  "where 576460752303423488 * 64 > 0;\n")
    assert status == 200, body
    assert body["distinct"] == 0 and sum(body["rejected"].values()) == 2, body


def test_within_the_limits_still_works(daemon):
    schedule = "geglu.num_warps(" + "{(" * 50 + "4" + ")}" * 50 + ");\nwhere " + \
        " + ".join(["1"] * 150) + " > 0;\n"
    status, body = expand(daemon, schedule)
    assert status == 200 and body["distinct"] == 1, body


@pytest.mark.parametrize("size", [2**40 + 1, 2**62, 2**62 + 1, 2**63 - 1])
def test_sizes_near_the_top_of_int64_answer_promptly(daemon, size, tmp_path):
    """A size past 2^40 is refused, naming the bound, by dtxd's expand and explorations and by
    dtx expand and explore (one rule, Request.h)."""
    status, body = expand(daemon, "geglu.block(y:{64..1024});\n", shape={"x": 4, "y": size})
    assert status == 400 and body["error"]["field"] == "shape", body
    message = body["error"]["message"]
    assert "2^40 (1099511627776)" in message and f"y={size}" in message, body
    status, body = daemon.post("/v1/explorations", {
        "kernel": "huge", "algorithm": GEGLU, "schedule": "geglu.block(y:{64..1024});\n",
        "shapes": [{"x": 4, "y": 64}, {"x": 4, "y": size}]})
    assert status == 400 and body["error"]["field"] == "shapes", body
    assert "2^40 (1099511627776)" in body["error"]["message"], body
    template = ROOT / "templates" / "geglu.yaml"
    for args in (["expand", template], ["explore", template, "--gpus", "none", "--db", tmp_path / "x.db"]):
        run = subprocess.run([str(DTX), *map(str, args), "--shape", f"x=4,y={size}"],
                             capture_output=True, text=True, timeout=60)
        command = args[0]
        assert run.returncode == 2, (command, run.stderr)
        assert run.stderr.startswith("dtx: --shape: shape x=4,y=") and \
            "2^40 (1099511627776)" in run.stderr, (command, run.stderr)


def test_a_size_at_the_bound_is_accepted(daemon):
    status, body = expand(daemon, "geglu.block(y:{64..1024});\n", shape={"x": 4, "y": 2**40})
    assert status == 200, body


def test_a_request_lists_at_most_64_shapes(daemon):
    shapes = [{"x": 4, "y": 64 + i} for i in range(65)]
    for path in ("/v1/expand", "/v1/explorations"):
        status, body = daemon.post(path, {"kernel": "many", "algorithm": GEGLU,
                                          "schedule": "geglu.block(y:64);\n", "shapes": shapes})
        assert status == 400 and body["error"]["field"] == "shapes", body
        assert "at most 64 shapes, not 65" in body["error"]["message"], body
    status, body = daemon.post("/v1/expand", {"kernel": "many", "algorithm": GEGLU,
                                              "schedule": "geglu.block(y:64);\n",
                                              "shapes": shapes[:64]})
    assert status == 200, body


def test_names_in_a_request_have_a_length(daemon):
    """Every text of a request that names something is bounded, and the answer says the bound:
    a baseline's name (it used to reach the file system, which failed with a 500), a label, the
    device model."""
    body = {"kernel": "long", "algorithm": GEGLU, "schedule": "geglu.block(y:64);\n",
            "shapes": [{"x": 4, "y": 64}]}
    for name in ("b" * 5000 + ".py:f", "torch:" + "x" * 300, "a/" * 200 + "b.py:f"):
        status, r = daemon.post("/v1/explorations", {**body, "baselines": [name]})
        assert status == 400 and r["error"]["field"] == "baselines", r
        assert "at most 200 characters" in r["error"]["message"], r
        assert len(r["error"]["message"]) < 300, r
    status, r = daemon.post("/v1/explorations", {**body, "baselines": ["c" * 190 + ".py:f"]})
    assert status == 400 and "does not exist" in r["error"]["message"], r  # a name, not a 500
    status, r = daemon.post("/v1/expand", {**body, "shapes": [{"x": 4, "y": 64, "z" * 101: 1}]})
    assert status == 400 and r["error"]["field"] == "shapes", r
    assert "at most 100 characters" in r["error"]["message"], r
    # The device to measure on is kept with the exploration and quoted in every measurement
    # when no worker has it.
    status, r = daemon.post("/v1/explorations", {**body, "device": "GPU" * 100})
    assert status == 400 and r["error"]["field"] == "device", r
    assert "at most 200 characters" in r["error"]["message"], r
    run = subprocess.run([str(DTX), "explore", str(ROOT / "templates" / "geglu.yaml"),
                          "--device", "GPU" * 100], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "--device" in run.stderr and \
        "at most 200 characters" in run.stderr, run.stderr


def test_each_baseline_is_named_once(daemon):
    status, r = daemon.post("/v1/explorations", {
        "kernel": "twice", "algorithm": GEGLU, "schedule": "geglu.block(y:64);\n",
        "shapes": [{"x": 4, "y": 64}], "baselines": ["reference", "torch", "reference"]})
    assert status == 400 and r["error"]["field"] == "baselines", r
    assert "baseline `reference` is listed twice" in r["error"]["message"], r


@pytest.mark.parametrize("algorithm", ["", "\n  \n", "# nothing but a comment\n"])
def test_an_empty_algorithm_is_said_to_be_empty(daemon, algorithm):
    for path in ("/v1/expand", "/v1/explorations"):
        status, r = daemon.post(path, {"kernel": "empty", "algorithm": algorithm,
                                       "schedule": "geglu.num_warps({4});\n",
                                       "shapes": [{"x": 4}]})
        assert status == 400 and r["error"]["field"] == "algorithm", r
        assert "the algorithm is empty" in r["error"]["message"], r
        assert "its labels" not in r["error"]["message"], r


# Four choices of 100,000 values each: 10^20 points, more than 64 bits count.
OVERFLOWING = "".join(f"${v} = {{1..100000:+1}};\n" for v in "ABCD") + \
    "geglu.num_warps({4});\nwhere $A + $B + $C + $D > 0;\n"
SHOWN = 2**63 - 1  # the largest count the store and the API hold


def test_a_space_too_large_to_count_is_shown_as_a_lower_bound(daemon, tmp_path):
    """The space's size saturates (Space::size); an exploration of it used to show -1. Its size
    is shown as 2^63 - 1 with `space_overflowed`, by the API and by dtx explore alike."""
    status, created = daemon.post("/v1/explorations", {
        "kernel": "overflowing", "algorithm": GEGLU, "schedule": OVERFLOWING,
        "shapes": [{"x": 4, "y": 64}], "strategy": "random", "budget": 1, "baselines": [],
        "screen_warmup_ms": 1, "screen_rep_ms": 2, "top": 0})
    assert status == 202, created
    x = daemon.wait_done(created["id"])
    assert x["state"] == "done", x
    assert x["space_size"] == SHOWN and x["space_overflowed"] is True, x
    status, listing = daemon.get("/v1/explorations?kernel=overflowing")
    (listed,) = listing["explorations"]
    assert listed["space_size"] == SHOWN and listed["space_overflowed"] is True, listed
    status, small = daemon.get("/v1/explorations?limit=1000")
    assert all(e["space_overflowed"] is False for e in small["explorations"]
               if e["kernel"] != "overflowing"), small
    (tmp_path / "geglu.dt").write_text(GEGLU)
    (tmp_path / "t.yaml").write_text(
        "kernel: overflowing\nalgorithm: geglu.dt\nschedule: |\n" +
        "".join("  " + line + "\n" for line in OVERFLOWING.splitlines()) +
        "shapes: [{x: 4, y: 64}]\nbaselines: []\n")
    args = [str(DTX), "explore", str(tmp_path / "t.yaml"), "--gpus", "none", "--db",
            str(tmp_path / "x.db"), "--strategy", "random", "--budget", "1", "--top", "0",
            "--screen-rep", "2"]
    run = subprocess.run(args + ["--json"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    (summary,) = json.loads(run.stdout)
    assert summary["space_size"] == SHOWN and summary["space_overflowed"] is True, summary
    run = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert f"space {SHOWN}+," in run.stdout, run.stdout


def test_a_schedule_of_an_algorithm_with_a_huge_line_can_be_viewed(daemon):
    """The schedule view prints the algorithm with the schedule: it used to run a regex whose
    executor recursed once per character, and a line of 200,000 spaces killed dtxd."""
    status, created = daemon.post("/v1/explorations", {
        "kernel": "wide_line", "algorithm": GEGLU + "\n" + " " * 200000 + "\n",
        "schedule": "geglu.block(x:1, y:64);\ngeglu.tensorize(x:0, y:0);\n",
        "shapes": [{"x": 4, "y": 64}], "strategy": "exhaustive", "baselines": [],
        "screen_warmup_ms": 1, "screen_rep_ms": 2, "top": 0})
    assert status == 202, created
    x = daemon.wait_done(created["id"])
    assert x["state"] == "done", x
    status, page = daemon.get(f"/v1/explorations/{created['id']}/schedules")
    (schedule,) = page["schedules"]
    status, one = daemon.get(schedule["url"])
    assert status == 200 and "geglu.block(x:1,y:64);" in one["program"], one
    assert daemon.proc.poll() is None
