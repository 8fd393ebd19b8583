"""Helpers the GPU scripts beside this file share (they run as `python3 tests/gpu/NAME.py`, so
this directory is on their import path)."""
import contextlib
import importlib.util
import json
import multiprocessing
import pathlib
import queue as queues
import subprocess
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load(path, name=None):
    """Imports the Python file at `path` (a generated module, templates/baselines.py) under
    `name` (default: the file's stem; two files of one stem need two names)."""
    spec = importlib.util.spec_from_file_location(name or pathlib.Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dtc(template, schedule, path):
    """Prints templates/`template`.dt with `schedule` into the module `path` (the dtc built in
    build/, on the machine that prepares a probe's modules) and returns the module's text."""
    subprocess.run([str(ROOT / "build" / "compiler" / "dtc"),
                    str(ROOT / "templates" / f"{template}.dt"), "-o", str(path),
                    "--schedule", schedule], check=True)
    return pathlib.Path(path).read_text()


def dtc_source(source, schedule, path):
    """As `dtc`, for a program given as text (read from standard input)."""
    subprocess.run([str(ROOT / "build" / "compiler" / "dtc"), "-", "-o", str(path),
                    "--schedule", schedule], input=source, text=True, check=True)
    return pathlib.Path(path).read_text()


def pretend_hopper():
    """Makes Triton compile for an H100 (sm_90) on a machine without a GPU: its active driver
    then reports that target (nothing can be launched: compile through a kernel's `warmup`)."""
    from triton.backends.compiler import GPUTarget
    from triton.runtime import driver

    class Hopper:
        def get_current_target(self):
            return GPUTarget("cuda", 90, 32)

        def get_current_device(self):
            return 0

        def get_current_stream(self, device=None):
            return 0

        def get_active_torch_device(self):
            return torch.device("cpu")

    driver.set_active(Hopper())


def sm90_summary(compiled):
    """A kernel compiled for sm_90 in a line: its shared memory, and ptxas's registers and
    spills (the wheel's ptxas, run again on its PTX with -v)."""
    import tempfile
    from triton.backends.nvidia.compiler import get_ptxas
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
        f.write(compiled.asm["ptx"])
        f.flush()
        r = subprocess.run([get_ptxas(90).path, "-arch=sm_90a", "-v", f.name, "-o", "/dev/null"],
                           capture_output=True, text=True, check=True)
    info = [line.split(" : ")[-1].strip() for line in r.stderr.splitlines()
            if "registers" in line or "spill" in line]
    return f"shared {compiled.metadata.shared} B; {'; '.join(info)}"


def bench_two_ways(fn, calls=20, warmup=100, rep=500):
    """(do_bench's median ms, ms a call on the GPU alone): `fn` timed by triton's do_bench, then
    `calls` calls of it captured in a CUDA graph and the graph's replays timed (no host work)."""
    import triton.testing
    fn()
    torch.cuda.synchronize()
    ms = triton.testing.do_bench(fn, warmup=warmup, rep=rep)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    torch.cuda.synchronize()
    return ms, triton.testing.do_bench(graph.replay, warmup=warmup // 2, rep=rep // 2) / calls


def per_call_us(fn, calls):
    """µs per call of `fn` over `calls` calls back to back (queued without synchronizing, as a
    model makes them), the GPU's work included by one synchronization at the end."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


class _Report:
    """What a child of `checked` tells its parent: `with report(config):` around one
    configuration's run, which sets `report.result` (something that pickles); an exception
    inside is reported as the configuration's error and ends the child (a CUDA error leaves its
    context unusable), and the parent starts another for the configurations left."""

    def __init__(self, queue):
        self.queue, self.result = queue, None

    @contextlib.contextmanager
    def __call__(self, config):
        self.queue.put(("start", config))
        self.result = None
        try:
            yield self
        except Exception as e:  # noqa: BLE001 - reported; the configuration is left out
            self.queue.put(("error", f"{type(e).__name__}: {str(e)[:300]}"))
            raise SystemExit(0)
        self.queue.put(("ok", self.result))


def _child(run, configs, queue, args):
    run(configs, _Report(queue), *args)


def checked(run, configs, *args, limit_s=60):
    """[(configuration, (status, detail))]: `run(configs, report, *args)` (a function of a
    module, which a spawned process can import) runs each configuration once in a child
    process, which is killed and started again after the configuration it was running when it
    gives no answer in `limit_s` seconds (a deadlocked kernel: status "hung"). Status "ok" with
    the result the run reported, or "error" with the exception's text. Configurations are
    JSON-serializable (dicts of numbers and strings)."""
    ctx = multiprocessing.get_context("spawn")
    results, todo, key = {}, list(configs), json.dumps
    while todo:
        q = ctx.Queue()
        p = ctx.Process(target=_child, args=(run, todo, q, args))
        p.start()
        current = None
        while len(results) < len(configs):
            try:  # the first answer waits for the child's imports and compilation too
                kind, detail = q.get(timeout=limit_s + (120 if current is None else 0))
            except queues.Empty:
                results[key(current or todo[0])] = ("hung", f"no answer within {limit_s} s")
                break
            if kind == "start":
                current = detail
                continue
            results[key(current)] = (kind, detail)
            if kind == "error":
                break
        p.kill()
        p.join()
        todo = [c for c in configs if key(c) not in results]
    return [(c, results[key(c)]) for c in configs]
