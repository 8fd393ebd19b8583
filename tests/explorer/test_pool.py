"""The pool and `dtx measure` end to end, against real workers (src/dtx/worker.py)
under the Triton interpreter: every status, nothing queued lost, the thesis' rounds, and no
worker process left behind after shutdown or after SIGKILL of the parent.

One `dtx measure` run (the `report` fixture) carries most checks: starting a worker imports
torch and triton, which takes seconds."""
import json
import os
import pathlib
import re
import signal
import subprocess
import time

import pytest

from conftest import ROOT, run_dtc

DTX = pathlib.Path(os.environ.get("DTX", ROOT / "build" / "explorer" / "dtx"))
TIMEOUT_S = 15          # per request: the hanging cases cost this much
TINY = ["--warmup", "1", "--rep", "2"]

PROGRAM = """\
Func f;
In A, B;
Var x, y;
f[x, y] = A[x, y] * 2 + B[x, y];
f.block(x:1, y:32);
f.tensorize(x:0, y:0);
f.map(x, y);
f.compile();
"""
KERNEL_LINE = "f = A * 2.0 + B\n"       # the kernel's arithmetic, as dtc prints it
LAUNCH = "f_kernel, ("                    # the start of the launch in the wrapper
SHAPE = "x=4,y=40"                       # 5 blocks of 32 along y: the last one masked

BASELINES = """\
import os
import time
import torch


def good(A, B):
    return A * 2 + B


def wrong(A, B):
    return A * 3 + B


def hang(A, B):
    time.sleep(3600)


def kill(A, B):
    os.kill(os.getpid(), 9)
"""

# Generated modules edited to fail in one way each: file name -> (old, new) or a prefix.
EDITS = {
    "not_python.py": ("", "def (:\n"),
    "raises.py": (LAUNCH, "(1 / 0 or f_kernel), ("),
    "wrong.py": (KERNEL_LINE, "f = A * 3.0 + B\n"),
    "unwritten.py": (LAUNCH, "f_kernel, (1,) if True else ("),
    "hangs.py": (LAUNCH, "(__import__('time').sleep(3600) or f_kernel), ("),
    "kills.py": (LAUNCH, "(__import__('os').kill(__import__('os').getpid(), 9) or f_kernel), ("),
    "exits.py": (LAUNCH, "(__import__('os')._exit(7) or f_kernel), ("),
}


def dtx(*args, timeout=600):
    return subprocess.run([str(DTX), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def started_pids(stderr):
    return [int(p) for p in re.findall(r"\] started pid (\d+)", stderr)]


def live(pid):
    """Whether `pid` is a process that is not a zombie."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def in_groups(pgids):
    """Live processes whose process group is one of `pgids` (a worker's own group)."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z" and int(fields[2]) in pgids:
            found.append(int(entry.name))
    return found


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, dtc_binary):
    if not DTX.exists():
        pytest.fail(f"{DTX} is not built; run deploy/setup.sh")
    d = tmp_path_factory.mktemp("pool")
    (d / "f.dt").write_text(PROGRAM)
    (d / "baselines.py").write_text(BASELINES)
    assert run_dtc(d / "f.dt", "-o", d / "f.py").returncode == 0
    source = (d / "f.py").read_text()
    assert KERNEL_LINE in source and LAUNCH in source
    for name, (old, new) in EDITS.items():
        (d / name).write_text(new + source if old == "" else source.replace(old, new, 1))
    return d


@pytest.fixture(scope="module")
def report(workdir):
    d = workdir
    args = ["measure", d / "f.dt", "--shape", SHAPE, "--dtype", "float32", "--json", "-v",
            "--protocol", "thesis", *TINY, "--timeout", TIMEOUT_S, "--compile-workers", "1",
            "--schedule", "f.block(x:1, y:32); f.tensorize(x:0, y:0); f.map(x, y)",
            "--schedule", "f.block(x:2, y:16); f.tensorize(x:0, y:0)",
            "--schedule", "f.block(q:1)"]
    for name in EDITS:
        args += ["--module", d / name]
    for fn in ("good", "wrong", "hang", "kill"):
        args += ["--baseline", f"{d / 'baselines.py'}:{fn}"]
    args += ["--baseline", "reference"]
    start = time.monotonic()
    run = dtx(*args)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    out["_stderr"] = run.stderr
    out["_wall_s"] = time.monotonic() - start
    out["_by_label"] = {e["label"]: e for e in out["entries"]}
    return out


def entry(report, label):
    return report["_by_label"][label]


def test_every_candidate_and_baseline_gets_a_result(report):
    assert len(report["entries"]) == 3 + len(EDITS) + 5
    for e in report["entries"]:
        assert e["status"], e
        if e["status"] != "rejected":
            assert e["results"], e


def test_good_schedules_and_baselines_are_ok_and_ranked(report):
    ok = [e for e in report["entries"] if e["status"] == "ok"]
    labels = {e["label"] for e in ok}
    assert labels == {"f.block(x:1, y:32); f.tensorize(x:0, y:0); f.map(x, y)",
                      "f.block(x:2, y:16); f.tensorize(x:0, y:0)",
                      "baselines.py:good", "reference"}
    assert [e["rank"] for e in report["entries"][:4]] == [1, 2, 3, 4]
    means = [e["times"]["bench"]["mean"] for e in report["entries"][:4]]
    assert means == sorted(means)
    for e in ok:
        assert e["check"]["mismatched"] == 0 and e["check"]["unwritten"] == 0
        assert e["speedup"] is not None


def test_thesis_protocol_rounds(report):
    assert report["rounds"] == 5
    for e in report["entries"]:
        if e["status"] == "ok":
            bench = e["times"]["bench"]
            assert len(bench["rounds"]) == 5 and len(e["results"]) == 5
            assert bench["min"] <= bench["mean"] <= bench["max"]
            assert abs(bench["mean"] - sum(bench["rounds"]) / 5) < 1e-9
        elif e["status"] != "rejected":
            assert len(e["results"]) == 1       # a failure is not measured again


def test_interpreter_times_are_not_comparable(report):
    assert report["comparable"] is False
    assert report["devices"][0]["device"]["kind"] == "cpu-interpreter"


def test_rejected_schedule_keeps_its_diagnostic(report):
    e = entry(report, "f.block(q:1)")
    assert e["status"] == "rejected"
    assert "error" in e["message"] and "q" in e["message"]


@pytest.mark.parametrize("label,status,words", [
    ("not_python.py", "compile_error", "does not import"),
    ("raises.py", "runtime_error", "ZeroDivisionError"),
    ("wrong.py", "wrong_result", "mismatch"),
    ("unwritten.py", "wrong_result", "unwritten"),
    ("hangs.py", "timeout", "killed"),
    ("kills.py", "crashed", "signal 9"),
    ("exits.py", "crashed", "status 7"),
    ("baselines.py:wrong", "wrong_result", "mismatch"),
    ("baselines.py:hang", "timeout", "killed"),
    ("baselines.py:kill", "crashed", "signal 9"),
])
def test_each_status(report, label, status, words):
    e = entry(report, label)
    assert e["status"] == status, e
    assert words in e["message"], e["message"]
    assert not e["times"]


def test_compile_workers_compile_ahead(report):
    # Candidates reach the timing worker through a compile worker; later rounds skip it.
    e = entry(report, "f.block(x:2, y:16); f.tensorize(x:0, y:0)")
    assert "ahead_compile_s" in e["results"][0]
    assert all("ahead_compile_s" not in r for r in e["results"][1:])


def test_no_worker_left_after_shutdown(report):
    pids = started_pids(report["_stderr"])
    # The first two workers, plus one per hang, kill and exit in either stage.
    assert len(pids) >= 2 + 5, report["_stderr"]
    assert [p for p in pids if live(p)] == []
    assert in_groups(set(pids)) == []


def test_no_worker_left_after_sigkill_of_the_parent(workdir):
    d = workdir
    proc = subprocess.Popen(
        [str(DTX), "measure", str(d / "f.dt"), "--shape", SHAPE, *TINY, "-v",
         "--module", str(d / "hangs.py"), "--baseline", f"{d / 'baselines.py'}:hang",
         "--timeout", "600"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = ""
    try:
        deadline = time.monotonic() + 300
        while seen.count("request") < 0 or len(re.findall(r"hello: pid", seen)) < 2:
            line = proc.stderr.readline()
            assert line and time.monotonic() < deadline, seen
            seen += line
        time.sleep(2)       # both workers are now inside their hanging requests
        children = [int(p.name) for p in pathlib.Path("/proc").iterdir() if p.name.isdigit()
                    and _ppid(p) == proc.pid]
        pids = started_pids(seen)
        assert sorted(children) == sorted(pids), (children, seen)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        until = time.monotonic() + 10
        while any(live(p) for p in pids) and time.monotonic() < until:
            time.sleep(0.1)
        assert [p for p in pids if live(p)] == []
        assert in_groups(set(pids)) == []
    finally:
        if proc.poll() is None:
            proc.kill()


def _ppid(proc_dir):
    try:
        stat = (proc_dir / "stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[1])


def test_usage_errors(workdir):
    run = dtx("measure", workdir / "f.dt", "--shape", "x=4,y")
    assert run.returncode == 2 and "LABEL=SIZE" in run.stderr
    run = dtx("measure", workdir / "f.dt", "--shape", "x=4,y=40", "--schedule", "a",
              "--schedules", workdir / "f.dt")
    assert run.returncode == 2
