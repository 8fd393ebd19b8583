#!/usr/bin/env python3
"""Drives the measurement worker (src/dtx/worker.py) on a CUDA GPU, over its
protocol, through every status it can report there, and prints each reply.

    python3 tests/gpu/gpu_worker.py .gpu        # after tests/gpu/prepare.sh filled .gpu/

Uses .gpu/geglu.py (examples/geglu.dt), .gpu/matmul_tf32.py and .gpu/matmul_huge.py. Exits 1 when a reply is not
what the worker must say."""
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORKER = ROOT / "src" / "dtx" / "worker.py"
FAILURES = []


class Worker:
    def __init__(self, role, env):
        self.proc = subprocess.Popen([sys.executable, str(WORKER), "--role", role],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.hello = self.read()
        print("hello:", json.dumps(self.hello))

    def read(self):
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker exited with {self.proc.wait()}")
        return json.loads(line)

    def ask(self, request):
        start = time.perf_counter()
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        reply = self.read()
        shown = {k: v for k, v in reply.items() if k != "type"}
        print(f"{request['id']} ({time.perf_counter() - start:.2f} s): {json.dumps(shown)}")
        return reply

    def close(self):
        self.proc.stdin.close()
        return self.proc.wait(timeout=120)


def expect(what, condition):
    print(("  ok: " if condition else "  FAILED: ") + what)
    if not condition:
        FAILURES.append(what)


def module(source):
    return {"source": source, "sha256": hashlib.sha256(source.encode()).hexdigest()}


def edit(source, old, new):
    assert source.count(old) == 1, old
    return source.replace(old, new)


def main():
    gpu = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".gpu")
    geglu = (gpu / "geglu.py").read_text()
    matmul = (gpu / "matmul_tf32.py").read_text()
    huge = (gpu / "matmul_huge.py").read_text()
    env = dict(os.environ, TRITON_CACHE_DIR=tempfile.mkdtemp(prefix="dtx_triton_cache_"))
    sizes = {"x": 4096, "y": 4096}
    full = {"bench": {"warmup_ms": 25, "rep_ms": 100}, "gpu": {"rep_ms": 100},
            "host": {"calls": 1000}}
    geglu_func = geglu.split("COMPILED = (")[1].split('"')[1]

    def req(rid, kind, source, **fields):
        r = {"type": kind, "id": rid, "module": module(source), "func": geglu_func,
             "sizes": sizes, "dtype": "float16", "seed": 0, "check": True}
        r.update(fields)
        return r

    # A compile worker fills the shared cache; the timing worker then only loads.
    compiler = Worker("compile", env)
    reply = compiler.ask(req("compile-geglu", "compile", geglu))
    expect("compile ok", reply["status"] == "ok")
    expect("compile worker exits 0 at end of input", compiler.close() == 0)

    timing = Worker("timing", env)
    expect("hello on cuda, comparable", timing.hello["device"]["kind"] == "cuda"
           and timing.hello["comparable"] is True and timing.hello["device"]["sm_count"] > 0)
    reply = timing.ask(req("geglu", "measure", geglu, times=full))
    expect("geglu ok with three times", reply["status"] == "ok"
           and set(reply["times"]) == {"bench", "gpu", "host"})
    expect("geglu loaded from the compile worker's cache, nothing compiled",
           reply["compiled"] == 0 and reply["cache_hits"] >= 1)
    reply = timing.ask(req("geglu-screen", "measure", geglu,
                           times={"bench": {"warmup_ms": 5, "rep_ms": 20}}))
    expect("geglu screening ok", reply["status"] == "ok")
    reply = timing.ask(req("geglu-ref", "baseline", geglu, baseline={"reference": True},
                           times=full))
    expect("reference baseline ok", reply["status"] == "ok")
    base = pathlib.Path(tempfile.mkdtemp()) / "baselines.py"
    base.write_text("import torch\n\ndef torch_geglu(A, B):\n"
                    "    return torch.nn.functional.gelu(A, approximate='tanh') * B\n")
    for compiled in (False, True):
        reply = timing.ask(req(f"geglu-torch-compile={compiled}", "baseline", geglu, times=full,
                               baseline={"file": str(base), "function": "torch_geglu",
                                         "torch_compile": compiled}))
        expect(f"torch baseline (torch_compile {compiled}) ok", reply["status"] == "ok")

    wrong = edit(geglu, "* B\n", "* B * 1.01\n") if "* B\n" in geglu else None
    if wrong is not None:
        reply = timing.ask(req("wrong", "measure", wrong, times=full))
        # 1% off everywhere: every element is within float16's per-element tolerance; the
        # relative L2 error (1e-2 against 1e-3) is what catches it.
        expect("wrong values: wrong_result, not timed", reply["status"] == "wrong_result"
               and reply["check"]["rel_l2"] > reply["check"]["rel_l2_tol"]
               and "times" not in reply)
    launch = f"{geglu_func}_kernel, ("
    unwritten = edit(geglu, launch, f"{geglu_func}_kernel, (1,) if True else (")
    reply = timing.ask(req("unwritten", "measure", unwritten, times=full))
    expect("unwritten: wrong_result", reply["status"] == "wrong_result"
           and reply["check"]["unwritten"] > 0)

    mm = {"m": 1024, "n": 1024, "k": 1024}
    reply = timing.ask(req("matmul", "measure", matmul, func="C", sizes=mm, dtype="float32",
                           times=full))
    expect("matmul tf32 ok with tf32 tolerances", reply["status"] == "ok"
           and reply["check"]["rtol"] == 1e-2)
    reply = timing.ask(req("huge", "measure", huge, func="C", sizes=mm, dtype="float32",
                           times=full))
    expect("too much shared memory: out_of_resources", reply["status"] == "out_of_resources")

    store = f"tl.store({geglu_func}_ptr + "
    illegal = edit(geglu, store, f"tl.store({geglu_func}_ptr + (1 << 40) + ")
    reply = timing.ask(req("illegal", "measure", illegal, times=full))
    expect("illegal address: runtime_error", reply["status"] == "runtime_error")
    code = timing.proc.wait(timeout=120)
    expect(f"worker exits with 3 after a CUDA error (got {code})", code == 3)
    print("FAILURES:", FAILURES if FAILURES else "none")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
