"""The measurement worker (src/dtx/worker.py) as the pool sees it: a subprocess
speaking the JSON-lines protocol of docs/worker-protocol.md, here under the Triton interpreter.

One worker serves most tests (starting one imports torch and triton, seconds); the tests of
exit paths start their own."""
import hashlib
import importlib.util
import json
import os
import queue
import subprocess
import sys
import threading

import pytest

from conftest import ROOT, run_dtc

WORKER = ROOT / "src" / "dtx" / "worker.py"
PYTHON = os.environ.get("DTX_WORKER_PYTHON", sys.executable)
REPLY_TIMEOUT_S = 120

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
LAUNCH = "f_kernel, ("                    # the start of the launch grid in the wrapper
SIZES = {"x": 4, "y": 40}                # 5 blocks of 32 along y: the last one masked
TINY = {"bench": {"warmup_ms": 1, "rep_ms": 2}, "host": {"calls": 3}}


class Worker:
    """A worker subprocess with a thread that queues its standard output lines."""

    def __init__(self, *args):
        env = dict(os.environ)
        env.pop("TRITON_INTERPRET", None)   # the worker must set it itself
        env["CUDA_VISIBLE_DEVICES"] = ""
        self.proc = subprocess.Popen([PYTHON, str(WORKER), *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.lines = queue.Queue()
        self.stderr = []
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines.put, True),
                         daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr.append, False),
                         daemon=True).start()
        self.hello = self.read()

    @staticmethod
    def _pump(stream, put, mark_end):
        for line in stream:
            put(line)
        if mark_end:
            put(None)

    def read(self):
        line = self.lines.get(timeout=REPLY_TIMEOUT_S)
        assert line is not None, "the worker closed its standard output; stderr:\n" + \
            b"".join(self.stderr).decode(errors="replace")[-3000:]
        return json.loads(line)   # strict: any stray output would fail here

    def send_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, request):
        self.send_raw((json.dumps(request) + "\n").encode())

    def ask(self, request):
        self.send(request)
        reply = self.read()
        assert reply["type"] == "result"
        if "id" in request:
            assert reply["id"] == request["id"]
        return reply

    def close_input(self):
        self.proc.stdin.close()
        return self.proc.wait(timeout=60)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def module_of(source):
    return {"source": source, "sha256": hashlib.sha256(source.encode()).hexdigest()}


def request(kind, source, rid, **fields):
    base = {"type": kind, "id": rid, "module": module_of(source), "func": "f", "sizes": SIZES,
            "dtype": "float32", "seed": 0}
    base.update(fields)
    return base


def edited(source, old, new):
    assert source.count(old) == 1, f"{old!r} not found once in the generated module"
    return source.replace(old, new)


@pytest.fixture(scope="module")
def source(tmp_path_factory, dtc_binary):
    work = tmp_path_factory.mktemp("worker")
    (work / "add.dt").write_text(PROGRAM)
    result = run_dtc(work / "add.dt", "-o", work / "add.py")
    assert result.returncode == 0, result.stderr
    text = (work / "add.py").read_text()
    assert KERNEL_LINE in text and LAUNCH in text
    return text


@pytest.fixture(scope="module")
def worker():
    w = Worker("--role", "timing")
    yield w
    w.kill()


def test_hello(worker):
    hello = worker.hello
    assert hello["type"] == "hello" and hello["protocol"] == 1 and hello["role"] == "timing"
    assert hello["pid"] == worker.proc.pid
    assert hello["device"] == {"kind": "cpu-interpreter", "name": "cpu-interpreter"}
    assert hello["comparable"] is False
    for key in ("python", "torch", "triton"):
        assert isinstance(hello[key], str) and hello[key]


def test_correct_module_is_checked_and_timed(worker, source):
    reply = worker.ask(request("measure", source, "ok", check=True,
                               times=dict(TINY, gpu={"rep_ms": 1})))
    assert reply["status"] == "ok", reply["message"]
    check = reply["check"]
    assert check["mismatched"] == 0 and check["unwritten"] == 0
    assert check["max_abs"] <= 1e-5 and (check["rtol"], check["atol"]) == (1e-4, 1e-5)
    bench = reply["times"]["bench"]
    assert bench["samples"] >= 1
    assert 0 < bench["min_ms"] <= bench["q20_ms"] <= bench["median_ms"] <= bench["q80_ms"] \
        <= bench["max_ms"]
    assert reply["times"]["host"]["calls"] == 3 and reply["times"]["host"]["per_call_us"] > 0
    assert "gpu" not in reply["times"]          # not measured on the interpreter, and said so
    assert "gpu not measured" in reply["message"] and "interpreter" in reply["message"]
    for key in ("compile_s", "import_s", "wall_s"):
        assert reply[key] >= 0


def test_a_warmup_of_zero_is_one_call(worker, source):
    """dtx, template files and dtxd's API take `screen_warmup_ms: 0` (setting_rule): the worker
    refused it, and every schedule of such an exploration failed with runtime_error."""
    reply = worker.ask(request("measure", source, "warm0", check=True,
                               times={"bench": {"warmup_ms": 0, "rep_ms": 2}}))
    assert reply["status"] == "ok", reply["message"]
    assert reply["times"]["bench"]["samples"] >= 1


def test_float16_tolerances_and_no_times_unless_asked(worker, source):
    reply = worker.ask(request("measure", source, "f16", dtype="float16", check=True))
    assert reply["status"] == "ok", reply["message"]
    assert (reply["check"]["rtol"], reply["check"]["atol"]) == (1e-2, 1e-2)
    assert "times" not in reply
    reply = worker.ask(request("measure", source, "nocheck", times={"host": {"calls": 1}}))
    assert reply["status"] == "ok" and "check" not in reply and "host" in reply["times"]


def test_module_that_does_not_import(worker, source):
    reply = worker.ask(request("measure", "import dtx_no_such_module\n" + source, "imp",
                               check=True, times=TINY))
    assert reply["status"] == "compile_error"
    assert "dtx_no_such_module" in reply["message"] and "times" not in reply
    reply = worker.ask(request("measure", source + "\ndef broken(:\n", "syntax", check=True))
    assert reply["status"] == "compile_error" and "SyntaxError" in reply["message"]


def test_kernel_that_fails_in_the_interpreter_is_a_compile_error(worker, source):
    bad = edited(source, KERNEL_LINE, "f = A * 2.0 + dtx_undefined_name\n")
    reply = worker.ask(request("measure", bad, "kernel", check=True, times=TINY))
    assert reply["status"] == "compile_error", reply
    assert "dtx_undefined_name" in reply["message"]


def test_wrapper_that_raises(worker, source):
    bad = source + "\n\ndef f(*args, **kwargs):\n    raise RuntimeError('the wrapper broke')\n"
    reply = worker.ask(request("measure", bad, "raise", check=True, times=TINY))
    assert reply["status"] == "runtime_error"
    assert reply["message"].endswith("RuntimeError: the wrapper broke")
    assert "times" not in reply
    # The worker lives on, even after a wrapper that asks the interpreter to exit.
    assert worker.ask(request("compile", source, "after"))["status"] == "ok"
    exits = source + "\n\ndef f(*args, **kwargs):\n    raise SystemExit(7)\n"
    reply = worker.ask(request("measure", exits, "exit", check=True))
    assert reply["status"] == "runtime_error" and "SystemExit" in reply["message"]
    assert worker.ask(request("compile", source, "after-exit"))["status"] == "ok"


def test_wrong_values_are_caught_and_not_timed(worker, source):
    bad = edited(source, KERNEL_LINE, "f = A * 2.0 + B + 0.01\n")
    reply = worker.ask(request("measure", bad, "wrong", check=True, times=TINY))
    assert reply["status"] == "wrong_result"
    check = reply["check"]
    assert check["mismatched"] == SIZES["x"] * SIZES["y"] and check["unwritten"] == 0
    assert check["max_abs"] == pytest.approx(0.01, rel=1e-3)
    assert "times" not in reply
    assert "first at [0, 0]" in reply["message"]


def test_small_error_everywhere_is_caught_by_the_relative_l2_error(worker, source):
    # 0.5% off on every element: each is within float16's rtol of 1%, the whole result is not
    # (its relative L2 error, 5e-3, exceeds float16's 1e-3).
    bad = edited(source, KERNEL_LINE, "f = (A * 2.0 + B) * 1.005\n")
    reply = worker.ask(request("measure", bad, "l2", dtype="float16", check=True, times=TINY))
    assert reply["status"] == "wrong_result", reply
    check = reply["check"]
    assert check["mismatched"] == 0 and check["unwritten"] == 0
    assert check["rel_l2"] == pytest.approx(5e-3, rel=0.2) and check["rel_l2_tol"] == 1e-3
    assert "relative L2 error" in reply["message"] and "times" not in reply
    good = worker.ask(request("measure", source, "l2-good", dtype="float16", check=True))
    assert good["status"] == "ok" and good["check"]["rel_l2"] < 1e-3


def test_unwritten_elements_are_caught(worker, source):
    # Launch only the first program: one block of 32 of the 160 elements is stored.
    bad = edited(source, LAUNCH, "f_kernel, (1,) if True else (")
    reply = worker.ask(request("measure", bad, "unwritten", check=True, times=TINY))
    assert reply["status"] == "wrong_result"
    check = reply["check"]
    assert check["unwritten"] == SIZES["x"] * SIZES["y"] - 32 and check["mismatched"] == 0
    assert "unwritten" in reply["message"] and "times" not in reply


def test_without_check_nothing_is_compared(worker, source):
    # Without `check`, a wrong kernel is timed: the check is what guards the times.
    bad = edited(source, KERNEL_LINE, "f = A * 2.0 + B + 0.01\n")
    reply = worker.ask(request("measure", bad, "unchecked", times={"host": {"calls": 1}}))
    assert reply["status"] == "ok" and "check" not in reply


def test_baseline_from_file(worker, source, tmp_path):
    baselines = tmp_path / "baselines.py"
    baselines.write_text("def torch_f(A, B):\n    return A * 2 + B\n\n"
                         "def wrong_f(A, B):\n    return A + B\n")
    reply = worker.ask(request("baseline", source, "b1", check=True, times=TINY,
                               baseline={"file": str(baselines), "function": "torch_f"}))
    assert reply["status"] == "ok", reply["message"]
    assert reply["check"]["mismatched"] == 0 and reply["times"]["bench"]["samples"] >= 1
    reply = worker.ask(request("baseline", source, "b2", check=True, times=TINY,
                               baseline={"file": str(baselines), "function": "wrong_f"}))
    assert reply["status"] == "wrong_result" and reply["check"]["mismatched"] > 0
    assert "times" not in reply
    reply = worker.ask(request("baseline", source, "b3", times=TINY,
                               baseline={"file": str(baselines), "function": "missing"}))
    assert reply["status"] == "runtime_error" and "missing" in reply["message"]
    reply = worker.ask(request("baseline", source, "b4", times=TINY,
                               baseline={"file": str(tmp_path / "nope.py"), "function": "f"}))
    assert reply["status"] == "runtime_error" and "nope.py" in reply["message"]


def test_reference_baseline(worker, source):
    reply = worker.ask(request("baseline", source, "ref", check=True, dtype="bfloat16",
                               times=TINY, baseline={"reference": True}))
    assert reply["status"] == "ok", reply["message"]
    assert reply["check"]["max_abs"] == 0 and reply["check"]["rtol"] == 5e-2
    assert reply["times"]["bench"]["median_ms"] > 0


def test_compile_request(worker, source):
    reply = worker.ask(request("compile", source, "c", dtype="float16"))
    assert reply["status"] == "ok" and reply["compile_s"] > 0 and "times" not in reply


def test_sha_mismatch(worker, source):
    req = request("measure", source, "sha", check=True)
    req["module"]["sha256"] = "0" * 64
    reply = worker.ask(req)
    assert reply["status"] == "runtime_error" and "sha256" in reply["message"]


def test_malformed_requests(worker, source):
    worker.send_raw(b"{not json\n")
    reply = worker.read()
    assert reply["status"] == "runtime_error" and reply["id"] is None
    worker.send_raw(b'{"id": "m1", "type": "measure", \n')        # id readable, JSON not
    reply = worker.read()
    assert reply["status"] == "runtime_error" and reply["id"] == "m1"
    worker.send_raw(b"[1, 2]\n")
    assert worker.read()["status"] == "runtime_error"
    worker.send_raw(b"\xff\xfe\n")
    assert worker.read()["status"] == "runtime_error"
    worker.send_raw(b"\n")                                          # blank lines are skipped
    for bad, words in [({"type": "frobnicate"}, "unknown request type"),
                       ({"type": "measure"}, "module"),
                       (request("measure", source, 0, func="g"), "not a compiled Func"),
                       (request("measure", source, 0, dtype="int8"), "dtype"),
                       (request("measure", source, 0, sizes={"x": -1}), "sizes"),
                       (request("measure", source, 0, sizes={"x": 4}), "sizes lacks y"),
                       (request("measure", source, 0, times={"bench": {"rep_ms": 0}}), "rep_ms"),
                       (request("measure", source, 0, times={"bench": {"warmup_ms": -1}}),
                        "warmup_ms"),
                       (request("measure", source, 0, times={"wall": {}}), "unknown time")]:
        bad = dict(bad, id="m2")
        reply = worker.ask(bad)
        assert reply["status"] == "runtime_error" and words in reply["message"], (bad, reply)
    assert worker.ask(request("compile", source, "alive"))["status"] == "ok"


def test_module_output_does_not_reach_the_protocol(worker, source):
    noisy = ("print('module import says hello')\n" + source +
             "\n_f = f\n\ndef f(*a, **k):\n    print('wrapper says hello')\n"
             "    import os\n    os.write(1, b'raw fd 1 write\\n')\n    return _f(*a, **k)\n")
    reply = worker.ask(request("measure", noisy, "noise", check=True, times={"host": {"calls": 2}}))
    assert reply["status"] == "ok", reply["message"]


def test_modules_are_cached_by_hash(worker, source, tmp_path):
    marker = tmp_path / "imports.txt"
    counted = source + f"\nwith open({str(marker)!r}, 'a') as _m:\n    _m.write('x')\n"
    first = worker.ask(request("measure", counted, "k1", check=True))
    second = worker.ask(request("compile", counted, "k2"))
    assert first["status"] == second["status"] == "ok"
    assert marker.read_text() == "x"
    assert first["import_s"] > 0 and second["import_s"] == 0.0
    worker.ask(request("compile", counted + "\n# another text\n", "k3"))
    assert marker.read_text() == "xx"


def test_shutdown_exits_with_zero():
    w = Worker("--role", "compile")
    try:
        assert w.hello["role"] == "compile"
        w.send({"type": "shutdown"})
        assert w.proc.wait(timeout=60) == 0
        assert w.lines.get(timeout=10) is None     # no reply to shutdown
    finally:
        w.kill()


def test_end_of_input_exits_with_zero():
    w = Worker()
    try:
        assert w.close_input() == 0
    finally:
        w.kill()


def test_bad_command_line():
    run = subprocess.run([PYTHON, str(WORKER), "--role", "nonsense"], capture_output=True,
                         timeout=60, stdin=subprocess.DEVNULL)
    assert run.returncode == 2 and run.stdout == b""


def test_inputs_and_reference_are_shared_across_schedules_but_not_corrupted(worker, tmp_path):
    # Two schedules of one program share their inputs and reference result; a baseline that
    # writes into its arguments works on clones, so the next request still sees the inputs.
    (tmp_path / "p.dt").write_text(PROGRAM)
    sources = []
    for i, schedule in enumerate(["f.block(y:8); f.tensorize(y:0)", "f.block(x:2, y:16)"]):
        out = tmp_path / f"p{i}.py"
        assert run_dtc(tmp_path / "p.dt", "-o", out, "--schedule", schedule).returncode == 0
        sources.append(out.read_text())
    spec = importlib.util.spec_from_file_location("dtx_worker_under_test", WORKER)
    worker_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker_module)

    def key(text, name):
        return worker_module.inputs_key(text)

    keys = {key(s, f"s{i}") for i, s in enumerate(sources)}
    assert len(keys) == 1 and None not in keys
    first = sources[0]
    # dtc's key covers the reference, the inputs and the runtime, not the kernels or the
    # schedule: another program's differs.
    (tmp_path / "q.dt").write_text(PROGRAM.replace("A[x, y] * 2", "A[x, y] * 3"))
    assert run_dtc(tmp_path / "q.dt", "-o", tmp_path / "q.py").returncode == 0
    assert key((tmp_path / "q.py").read_text(), "q") not in keys | {None}
    # A module edited after dtc wrote it shares nothing, whatever the edit (each of these once
    # fooled a key computed from the module's text or bytecode).
    reference = "def reference_f(A, B, *, x=None, y=None):\n"
    for i, other in enumerate([
            first.replace("A * 2.0", "A * 3.0"),
            first.replace("SCHEDULE = \"", "SCHEDULE = \"f.num_warps(2);"),
            first.replace("B = _dt_randn(", "B = 0 * _dt_randn("),
            first.replace(reference, reference.replace("B, *", "B=1, *")),
            first + "\nEXTRA = 1\n",
            first.replace("\nINPUTS_KEY", "\n_c = torch.tensor(1.00002)\nINPUTS_KEY"),
            first.replace("\nINPUTS_KEY", "\nreference_f.scale = 2.0\nINPUTS_KEY"),
            first.replace("\n@triton.jit\ndef f_kernel",
                          "\n@triton.jit(debug=False)\ndef f_kernel"),
            first.replace("INPUTS_KEY = (\"", "INPUTS_KEY = (\"0")[:-1],
            first.rstrip("\n"),
            first[:first.rindex("INPUTS_KEY")]]):
        assert key(other, f"other{i}") is None, i
    mutating = tmp_path / "mutating.py"
    mutating.write_text("def f(A, B):\n    out = A * 2 + B\n    A.zero_()\n    B.zero_()\n"
                        "    return out\n")
    reply = worker.ask(request("baseline", sources[0], "m1", check=True, times=TINY,
                               baseline={"file": str(mutating), "function": "f"}))
    assert reply["status"] == "ok", reply["message"]
    for i, s in enumerate(sources):
        reply = worker.ask(request("measure", s, f"m{i + 2}", check=True, times=TINY))
        assert reply["status"] == "ok" and reply["check"]["max_abs"] < 1e-6, reply


def test_compile_mode_keeps_no_plan(tmp_path):
    """A compile worker runs the wrapper with its kernels compiled but not launched; a wrapper's
    plan would launch compiled kernels directly, so none is kept meanwhile."""
    import torch
    spec = importlib.util.spec_from_file_location("dtx_worker_under_test", WORKER)
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    src, out = tmp_path / "f.dt", tmp_path / "f.py"
    src.write_text(PROGRAM)
    assert run_dtc(src, "-o", out).returncode == 0
    spec = importlib.util.spec_from_file_location("f_module", out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    A, B = torch.randn(4, 40), torch.randn(4, 40)
    make_plan = module._dt_plan
    module.f(A, B)
    assert len(module._dt_plans_f) == 1
    with worker.kernels_not_launched(module):
        assert not module._dt_plans_f
        for _ in range(2):
            torch.testing.assert_close(module.f(A, B), A * 2 + B)
        assert not module._dt_plans_f
    assert module._dt_plan is make_plan
    torch.testing.assert_close(module.f(A, B), A * 2 + B)
    assert len(module._dt_plans_f) == 1


def test_next_request_is_prefetched_while_timing(worker, source, tmp_path):
    """A measure request may carry the next one as `prefetch`: the worker imports its module
    (and on a GPU loads its kernels) after this one's timed calls, and reports what it spent
    with the request it readied; the reply of each is as without it."""
    marker = tmp_path / "imports.txt"
    first = source + "\n# first\n"
    second = source + f"\nwith open({str(marker)!r}, 'a') as _m:\n    _m.write('x')\n"
    ahead = request("measure", second, "p2", check=True, times=TINY)
    reply = worker.ask(request("measure", first, "p1", check=True, times=TINY, prefetch=ahead))
    assert reply["status"] == "ok", reply["message"]
    assert "prefetched" not in reply
    assert marker.read_text() == "x"                 # imported while p1 was being timed
    assert reply["timed_s"] <= reply["wall_s"]
    reply = worker.ask(ahead)
    assert reply["status"] == "ok" and reply["check"]["max_abs"] < 1e-6, reply
    assert marker.read_text() == "x"                 # not imported again
    early = reply["prefetched"]
    assert early["import_s"] > 0 and early["prefetch_s"] >= early["import_s"]
    assert reply["import_s"] == early["import_s"]
    # Only once: the same module asked again is a plain cache hit.
    again = worker.ask(dict(ahead, id="p3"))
    assert again["status"] == "ok" and "prefetched" not in again and again["import_s"] == 0.0


def test_a_failed_prefetch_costs_nothing_and_the_request_says_why(worker, source):
    broken = source + "\nraise RuntimeError('broken on import')\n"
    ahead = request("measure", broken, "b2", check=True, times=TINY)
    reply = worker.ask(request("measure", source + "\n# b1\n", "b1", check=True, times=TINY,
                               prefetch=ahead))
    assert reply["status"] == "ok", reply["message"]
    reply = worker.ask(ahead)
    assert reply["status"] == "compile_error" and "broken on import" in reply["message"]
    # A module that raises GeneratorExit on import costs the prefetch, not the worker.
    exits = source + "\nraise GeneratorExit\n"
    reply = worker.ask(request("measure", source + "\n# g1\n", "g1", check=True, times=TINY,
                               prefetch=request("measure", exits, "g2")))
    assert reply["status"] == "ok", reply["message"]
    # A prefetch that failed before importing (its source is not what its hash says) leaves
    # the import to the request, which reports it.
    late = source + "\n# late\n"
    wrong = dict(request("measure", late, "l2"), module={"source": source,
                                                           "sha256": module_of(late)["sha256"]})
    reply = worker.ask(request("measure", source + "\n# l1\n", "l1", check=True, times=TINY,
                               prefetch=wrong))
    assert reply["status"] == "ok", reply["message"]
    reply = worker.ask(request("measure", late, "l2", check=True, times=TINY))
    assert reply["status"] == "ok" and reply["import_s"] > 0, reply
    # Nonsense in `prefetch` is ignored.
    for junk in ([1], {"type": "measure", "module": 3}, "x"):
        reply = worker.ask(request("measure", source, "j", check=True, times=TINY, prefetch=junk))
        assert reply["status"] == "ok", reply["message"]


SEVERAL = """\
Func s, f;
In A, B;
Var x, y; RVar k;
s[x, y] = A[x, y] + B[x, y];
f[x, y] = s[x, y] / rsum(s[x, k], k);
s.fuse_at(f, x);
s.store_in(f);
f.tensorize(y:0, k:0);
f.compile();
"""


def test_every_result_of_a_kernel_with_several_outputs_is_checked(worker, tmp_path):
    """A Func that stores another (store_in) returns both, as its reference does: each is
    compared, and a result one of them leaves unwritten is caught."""
    (tmp_path / "two.dt").write_text(SEVERAL)
    result = run_dtc(tmp_path / "two.dt", "-o", tmp_path / "two.py")
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "two.py").read_text()
    reply = worker.ask(request("measure", text, "two", check=True, times=TINY,
                               sizes={"x": 3, "y": 20}))
    assert reply["status"] == "ok", reply["message"]
    assert reply["check"]["mismatched"] == 0 and reply["check"]["unwritten"] == 0
    # The second result never stored: its elements stay NaN.
    store = "tl.store(s_ptr"
    assert text.count(store) == 1
    bad = edited(text, store, "0 and tl.store(s_ptr")
    reply = worker.ask(request("measure", bad, "two-bad", check=True, times=TINY,
                               sizes={"x": 3, "y": 20}))
    assert reply["status"] == "wrong_result"
    assert reply["check"]["unwritten"] == 60 and "result 2 of 2" in reply["message"]
    # A baseline returning one tensor where two are wanted is a mismatch, not a crash.
    (tmp_path / "one.py").write_text("def f(A, B):\n    return A + B\n")
    reply = worker.ask(request("baseline", text, "two-one", check=True, times=TINY,
                               sizes={"x": 3, "y": 20},
                               baseline={"file": str(tmp_path / "one.py"), "function": "f"}))
    assert reply["status"] == "wrong_result" and "returns 2 results" in reply["message"]


STORE = "    tl.store(f_ptr + (x_idx * f_stride0 + y_idx * f_stride1), f, mask=x_y_mask)\n"
RETURN = "    return f if out is None or f is out else out.copy_(f)\n"
# Adds 1 to every float64 tensor of the output's size in the process: the worker's copy of the
# reference (as a kernel writing at a wrong address did on an H200: its rows went into the
# memory of the worker's reference, and every later check failed).
STRAY = """    import gc
    for o in gc.get_objects():
        if isinstance(o, torch.Tensor) and o.dtype == torch.float64 and o.shape == f.shape:
            o.add_(1)
"""


def test_a_kernel_that_writes_past_its_output_is_caught(worker, source):
    # Its own output is right; it also writes one output's worth past its end.
    bad = edited(source, STORE, STORE + STORE.replace("f_ptr + (", "f_ptr + x_size * f_stride0 + ("))
    reply = worker.ask(request("measure", bad, "past", check=True, times=TINY))
    assert reply["status"] == "wrong_result", reply
    n = SIZES["x"] * SIZES["y"]
    assert reply["check"]["outside"] == n and reply["check"]["mismatched"] == 0
    assert f"wrote {n} elements outside its output (0 before its start, {n} past its end)" \
        in reply["message"] and "times" not in reply
    before = edited(source, STORE, STORE + STORE.replace("f_ptr + (", "f_ptr - 3 + ("))
    reply = worker.ask(request("measure", before, "before", check=True, times=TINY))
    assert reply["status"] == "wrong_result" and "before its start" in reply["message"], reply
    # NaN written past the end changes the guard as well (its bytes are no NaN).
    nan = edited(source, STORE, STORE + STORE.replace("f_ptr + (", "f_ptr + x_size * f_stride0 + (")
                 .replace(", f, mask", ", f * float('nan'), mask"))
    reply = worker.ask(request("measure", nan, "nan-past", check=True, times=TINY))
    assert reply["status"] == "wrong_result" and reply["check"]["outside"] == n, reply


def test_a_kernel_that_overwrites_the_workers_reference_is_blamed_alone(worker, source):
    # The kernel that changed the reference fails; the next kernel, correct, is checked against
    # a reference made anew (before, it failed against the changed one, as did every kernel and
    # baseline after it).
    bad = edited(source, RETURN, STRAY + RETURN)
    reply = worker.ask(request("measure", bad, "stray", check=True, times=TINY))
    assert reply["status"] == "wrong_result", reply
    assert "changed the worker's copies of its inputs or reference" in reply["message"]
    good = worker.ask(request("measure", source, "after-stray", check=True, times=TINY))
    assert good["status"] == "ok" and good["check"]["max_abs"] == 0, good


def test_a_kernel_that_overwrites_the_reference_while_timed_is_blamed(worker, source):
    # Right at its check (its first call), stray on the calls that are timed.
    timed = STRAY.replace("    import gc\n", "    import gc\n    f_calls.append(1)\n") \
        .replace("    for o in", "    for o in () if len(f_calls) == 1 else")
    bad = edited(source, RETURN, timed + RETURN).replace("\ndef f(A, B,", "\nf_calls = []\n\n\ndef f(A, B,")
    reply = worker.ask(request("measure", bad, "stray-timed", check=True, times=TINY))
    assert reply["status"] == "wrong_result", reply
    assert reply["message"].startswith("while timed, it wrote outside its output"), reply
    good = worker.ask(request("measure", source, "after-stray-timed", check=True, times=TINY))
    assert good["status"] == "ok" and good["check"]["max_abs"] == 0, good


MATMUL = """\
Func f;
In A, B;
Var x, y;
RVar k;
f[x, y] = rdot(A[x, k], B[k, y], k);
f.block(x:16, y:16); f.tensorize(x:0, y:0, k:16);
"""


def matmul_source(tmp_path, precision):
    (tmp_path / f"mm_{precision}.dt").write_text(
        MATMUL + f"f.precision({precision});\nf.compile();\n")
    out = tmp_path / f"mm_{precision}.py"
    assert run_dtc(tmp_path / f"mm_{precision}.dt", "-o", out).returncode == 0
    source = out.read_text()
    assert f'DOT_PRECISION = "{precision}"' in source
    return source


MM_SIZES = {"x": 32, "y": 32, "k": 32}


def ask_baseline(worker, source, rid, path, function):
    return worker.ask(request("baseline", source, rid, sizes=MM_SIZES, check=True, times=TINY,
                              baseline={"file": str(path), "function": function}))


@pytest.mark.parametrize("precision", ["tf32", "ieee"])
def test_a_float32_baseline_multiplies_as_the_module_does(worker, tmp_path, precision):
    # A module whose float32 products are TF32 is timed against baselines whose products are
    # TF32 too (cuBLAS's are full float32 unless asked); the flag is set for the baseline's
    # calls alone. The baseline below answers wrongly unless the flag is as it should be.
    source = matmul_source(tmp_path, precision)
    baselines = tmp_path / "mm_baselines.py"
    baselines.write_text(
        "import torch\n\n"
        "def mm(A, B):\n"
        "    tf32 = torch.backends.cuda.matmul.allow_tf32\n"
        f"    return A @ B if tf32 == {precision == 'tf32'} else A @ B + 1\n")
    for rid in ("a", "b"):  # and again: the flag was restored in between
        reply = ask_baseline(worker, source, f"{precision}-{rid}", baselines, "mm")
        assert reply["status"] == "ok", reply["message"]
    reply = worker.ask(request("measure", source, f"{precision}-m", sizes=MM_SIZES, check=True))
    assert reply["status"] == "ok", reply["message"]


@pytest.mark.parametrize("setting", [
    # torch's per-backend API: reading its legacy flags raises once this is set (the ieee
    # module's baseline runs as the process set it).
    ('torch.backends.cuda.matmul.fp32_precision = "tf32"',
     'torch.backends.cuda.matmul.fp32_precision == "tf32"',
     'torch.backends.cuda.matmul.fp32_precision == "tf32"'),
    ('torch.backends.cuda.matmul.fp32_precision = "ieee"',
     'torch.backends.cuda.matmul.fp32_precision == "tf32"',
     'torch.backends.cuda.matmul.fp32_precision == "ieee"'),
    # bfloat16 products allowed already: left as it is, and torch stays readable.
    ('torch.set_float32_matmul_precision("medium")',
     'torch.get_float32_matmul_precision() == "medium"',
     'torch.get_float32_matmul_precision() == "medium"'),
])
def test_tf32_products_respect_the_api_the_process_uses(tmp_path, setting):
    setup, in_tf32, in_ieee = setting
    tf32, ieee = matmul_source(tmp_path, "tf32"), matmul_source(tmp_path, "ieee")
    baselines = tmp_path / "settings.py"
    baselines.write_text(
        f"import torch\n{setup}\n\n"
        f"def tf32(A, B):\n    return A @ B if {in_tf32} else A @ B + 1\n\n"
        f"def ieee(A, B):\n    return A @ B if {in_ieee} else A @ B + 1\n")
    w = Worker("--role", "timing")  # its own process: the setting is global to it
    try:
        for rid in ("a", "b"):
            reply = ask_baseline(w, tf32, f"t{rid}", baselines, "tf32")
            assert reply["status"] == "ok", reply["message"]
            reply = ask_baseline(w, ieee, f"i{rid}", baselines, "ieee")
            assert reply["status"] == "ok", reply["message"]
    finally:
        w.kill()


def test_each_func_is_checked_and_timed_at_its_own_precision(worker, tmp_path):
    # One module, two products: f in full float32, g in TF32. The module-wide DOT_PRECISION is
    # the loosest; f's baseline and tolerance follow f's own (DOT_PRECISIONS).
    (tmp_path / "two.dt").write_text("""\
Func f, g;
In A, B;
Var x, y;
RVar k;
f[x, y] = rdot(A[x, k], B[k, y], k);
g[x, y] = rdot(A[x, k], B[k, y], k) * 2;
f.block(x:16, y:16); f.tensorize(x:0, y:0, k:16); f.precision(ieee); f.compile();
g.block(x:16, y:16); g.tensorize(x:0, y:0, k:16); g.compile();
""")
    assert run_dtc(tmp_path / "two.dt", "-o", tmp_path / "two.py").returncode == 0
    source = (tmp_path / "two.py").read_text()
    assert 'DOT_PRECISION = "tf32"' in source
    assert 'DOT_PRECISIONS = {"f": "ieee", "g": "tf32"}' in source
    baselines = tmp_path / "two_baselines.py"
    baselines.write_text(
        "import torch\n\n"
        "def f(A, B):\n"
        "    return A @ B if not torch.backends.cuda.matmul.allow_tf32 else A @ B + 1\n\n"
        "def g(A, B):\n"
        "    return 2 * (A @ B) if torch.backends.cuda.matmul.allow_tf32 else A @ B\n")
    for func in ("f", "g"):
        reply = worker.ask(request("baseline", source, f"two-{func}", func=func, sizes=MM_SIZES,
                                   check=True, times=TINY,
                                   baseline={"file": str(baselines), "function": func}))
        assert reply["status"] == "ok", reply["message"]
        assert reply["check"]["rtol"] == (1e-4 if func == "f" else 1e-2)


def test_the_tf32_setting_is_undone_when_the_baseline_raises(worker, tmp_path):
    tf32, ieee = matmul_source(tmp_path, "tf32"), matmul_source(tmp_path, "ieee")
    baselines = tmp_path / "raising.py"
    baselines.write_text(
        "import torch\n\n"
        "def boom(A, B):\n    raise ValueError('boom')\n\n"
        "def plain(A, B):\n"
        "    return A @ B if not torch.backends.cuda.matmul.allow_tf32 else A @ B + 1\n")
    reply = ask_baseline(worker, tf32, "raise-tf32", baselines, "boom")
    assert reply["status"] == "runtime_error" and "boom" in reply["message"]
    reply = ask_baseline(worker, ieee, "after-raise-ieee", baselines, "plain")
    assert reply["status"] == "ok", reply["message"]
