"""The Ray actors of the Ray backend: each hosts one measurement worker process (host.py), which
the scheduler of explorer/src/MeasurementScheduler.cpp drives through the driver (pool.py) as the
local pool drives a child process: start it, exchange a request for its result, kill it.

A timing actor holds one GPU (`num_gpus=1`: Ray sets its CUDA_VISIBLE_DEVICES, which the worker
inherits) or, for testing on machines without one, a CPU on which the worker runs the Triton
interpreter. A compile actor holds one CPU and compiles into the Triton cache that every actor of
its node shares, for one of the node's GPUs (Triton compiles for the device it sees) without
launching a kernel, as the local pool's compile workers do.

Nothing of the project needs to be installed on a node: the worker script and any baseline file
travel with the calls and are written under the node's temporary directory.
"""
import hashlib
import os
import shutil
import socket
import sys
import tempfile

from .host import WorkerProcess, WorkerStartError


def run_directory(run):
    return os.path.join(tempfile.gettempdir(), f"dtx-ray-{run}")


def _write_once(path, text):
    """Writes `text` to `path` unless it holds it already (actors of one node race here)."""
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    except OSError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def remove_run_directory(run):
    """Removes a run's directory on this node (worker script, baselines, and the Triton cache
    unless one was given)."""
    shutil.rmtree(run_directory(run), ignore_errors=True)
    return True


class MeasureActor:
    """role: "timing" or "compile". `visible_gpu`: the CUDA_VISIBLE_DEVICES value for the worker
    ("" for the interpreter; None keeps what Ray set, for a timing actor holding a GPU)."""

    def __init__(self, role, run, worker_source, visible_gpu=None, triton_cache_dir="",
                 stderr_tail_bytes=4096):
        import ray  # in the actor's process
        self.role = role
        self.run_dir = run_directory(run)
        script = os.path.join(self.run_dir, "dtx_worker.py")
        _write_once(script, worker_source)
        self.node = ray.get_runtime_context().get_node_id()
        self.host = socket.gethostname()
        env = dict(os.environ)
        if visible_gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible_gpu
        self.gpu = env.get("CUDA_VISIBLE_DEVICES") or None
        cache = triton_cache_dir or os.path.join(self.run_dir, "triton-cache")
        os.makedirs(cache, exist_ok=True)
        env["TRITON_CACHE_DIR"] = cache
        env["PYTHONUNBUFFERED"] = "1"
        env.pop("TRITON_INTERPRET", None)  # the worker decides from the device it sees
        self.worker = WorkerProcess([sys.executable, script, "--role", role], env=env,
                                    name=f"{role}@{self.host}",
                                    stderr_tail_bytes=stderr_tail_bytes,
                                    log=lambda line: print(f"[{role}] {line}", file=sys.stderr,
                                                           flush=True))

    def where(self):
        """Where the actor runs: `node` (Ray node id), `host`, `gpu` (the GPU's index on its
        node, null on the interpreter) and `actor_pid`."""
        return {"node": self.node, "host": self.host, "actor_pid": os.getpid(),
                "gpu": int(self.gpu.split(",")[0]) if self.gpu else None}

    def start(self, timeout_s):
        """Starts a worker: `hello` (with where()), or `error` and `tail`."""
        try:
            return {"hello": {**self.worker.start(timeout_s), **self.where()}}
        except WorkerStartError as e:
            return {"error": str(e), "tail": self.worker.stderr_tail()}

    def exchange(self, request, timeout_s):
        """One request (worker protocol); see WorkerProcess.exchange. A baseline's file comes as
        its `source` and is written here."""
        baseline = request.get("baseline")
        if isinstance(baseline, dict) and isinstance(baseline.get("source"), str):
            source = baseline.pop("source")
            name = os.path.basename(baseline.get("file") or "baseline.py")
            digest = hashlib.sha256(source.encode()).hexdigest()[:16]
            path = os.path.join(self.run_dir, "baselines", digest, name)
            _write_once(path, source)
            baseline["file"] = path
        return self.worker.exchange(request, timeout_s)

    def kill(self):
        self.worker.kill()
        return True

    def __del__(self):
        try:
            self.worker.kill()
        except Exception:  # noqa: BLE001  (interpreter shutdown)
            pass
