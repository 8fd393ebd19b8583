"""The Ray backend's driver: measurement workers on a Ray cluster, behind one process that the
explorer's `RayBackend` (explorer/src/RayBackend.cpp) speaks to as it speaks to a worker.

    python explorer/ray/dtx_ray_pool.py --address HOST:PORT [--interpreter-workers N] ...

- Connects to the cluster (`ray.init(address=...)`), finds its alive nodes and their GPUs, and
  starts on each node one timing actor per GPU and compile actors on CPUs (actors.py), each
  hosting the worker of explorer/worker/dtx_worker.py, so a request is checked and timed by the
  same code, with the same protocol, as in the local pool.
- Standard input: worker-protocol requests (docs/worker-protocol.md), many in flight, each with
  the pool's fields `timeout_s`, `compile_first` and `device` (a GPU model; empty: any).
- Standard output: a `hello` once the cluster is known, then in any order: `worker` when a timing
  worker is ready (its hello with `node`, `host`, `gpu`), `worker_lost`, and one `result` per
  request with the `worker` that answered. The full protocol is in docs/ray.md.
- Exit status 2, before any hello, when the cluster cannot be reached or has nothing to time on;
  standard error says why.
"""
import argparse
import asyncio
import json
import os
import pathlib
import platform
import re
import socket
import sys
import threading
import time
import uuid

from .scheduler import Scheduler, Slot, SlotLost, SlotSpec

PROTOCOL = 1
# Beyond a request's own time limit (which the actor enforces on its worker): an actor that does
# not answer within this much more is treated as lost.
CALL_GRACE_S = 60.0


class UsageError(Exception):
    """The cluster cannot be used: the message says why and what to do."""


def log(*parts):
    print("dtx-ray:", *parts, file=sys.stderr, flush=True)


def check_reachable(address, timeout_s=5.0):
    """A clear error for an address nothing listens on (ray.init would retry for a long time)."""
    if address in ("", "auto", "local") or address.startswith(("ray://", "anyscale://")):
        return
    match = re.fullmatch(r"\[?([^\]]+?)\]?:(\d+)", address)
    if not match:
        raise UsageError(f"--ray-address {address!r} is not HOST:PORT (the head node's GCS "
                         "address, as `ray start --head` prints it), `auto` or ray://HOST:PORT")
    host, port = match.group(1), int(match.group(2))
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as e:
        raise UsageError(f"cannot reach the Ray cluster at {address}: {e.strerror or e}. Start "
                         "one with `ray start --head` on the head node, or check --ray-address "
                         "(the address `ray start --head` printed)") from None


class RayCluster:
    """The scheduler's cluster: actors placed on nodes, called with deadlines."""

    def __init__(self, ray, run, worker_source, triton_cache_dir, startup_timeout_s):
        from .actors import MeasureActor
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        self.ray = ray
        self.run = run
        self.worker_source = worker_source
        self.triton_cache_dir = triton_cache_dir
        self.startup_timeout_s = startup_timeout_s
        self.actor_class = ray.remote(MeasureActor)
        self.affinity = NodeAffinitySchedulingStrategy
        self.handles = []

    def _await(self, ref, timeout_s):
        return asyncio.wait_for(asyncio.wrap_future(ref.future()), timeout_s)

    async def start(self, spec):
        o = spec.options
        handle = self.actor_class.options(
            name=f"dtx-{self.run}-{spec.name}-{spec.restarts}", namespace="dtx",
            num_gpus=o.get("num_gpus", 0), num_cpus=o.get("num_cpus", 1),
            scheduling_strategy=self.affinity(node_id=spec.node, soft=False),
            max_restarts=0, max_task_retries=0,
        ).remote(spec.role, self.run, self.worker_source, o.get("visible_gpu"),
                 self.triton_cache_dir, self.startup_timeout_s)
        self.handles.append(handle)
        try:
            info = await self._await(handle.start.remote(), self.startup_timeout_s + 60)
        except asyncio.TimeoutError:
            self.ray.kill(handle, no_restart=True)
            raise RuntimeError(f"not placed or not started within {self.startup_timeout_s + 60:g}"
                               " s (is the node's GPU or CPU taken by another job?)") from None
        except Exception as e:
            self.ray.kill(handle, no_restart=True)
            raise RuntimeError(short_error(e)) from None
        return Slot(spec, info, handle)

    async def call(self, slot, message, timeout_s):
        try:
            return await self._await(slot.handle.run.remote(message, timeout_s),
                                     timeout_s + CALL_GRACE_S)
        except asyncio.TimeoutError:
            raise SlotLost(f"the actor did not answer within {timeout_s + CALL_GRACE_S:g} s") \
                from None
        except self.ray.exceptions.RayActorError as e:
            raise SlotLost(short_error(e)) from None
        except self.ray.exceptions.RayError as e:
            # The actor raised (a bug here, not the candidate's): the request is not lost.
            return {"status": "crashed", "message": f"the actor failed: {short_error(e)}"}

    async def kill(self, slot):
        try:
            self.ray.kill(slot.handle, no_restart=True)
        except Exception:  # noqa: BLE001  (already gone)
            pass

    async def node_alive(self, node_id):
        nodes = await asyncio.get_running_loop().run_in_executor(None, self.ray.nodes)
        return any(n.get("NodeID") == node_id and n.get("Alive") for n in nodes)


def short_error(e):
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:500]


def plan(nodes, interpreter_workers, compile_per_node):
    """The slots to start: per alive node, one timing slot per GPU and compile slots; or, with
    `interpreter_workers`, that many timing slots on CPUs spread over the nodes."""
    specs = []
    alive = [n for n in nodes if n.get("Alive")]
    for n in alive:
        node, res = n["NodeID"], n.get("Resources", {})
        gpus, cpus = int(res.get("GPU", 0)), int(res.get("CPU", 0))
        timing = 0
        if not interpreter_workers:
            for i in range(gpus):
                specs.append(SlotSpec("timing", node, {"num_gpus": 1, "num_cpus": 0},
                                      f"timing-{node[:8]}-{i}"))
            timing = gpus
        if interpreter_workers:
            timing = sum(1 for k in range(interpreter_workers) if alive[k % len(alive)] is n)
            for i in range(timing):
                specs.append(SlotSpec("timing", node, {"num_cpus": 1, "visible_gpu": ""},
                                      f"timing-{node[:8]}-cpu{i}"))
        if not timing:
            continue
        compiles = compile_per_node if compile_per_node is not None else \
            max(1, min(timing, cpus - (timing if interpreter_workers else 0)))
        for i in range(compiles):
            visible = str(i % gpus) if gpus and not interpreter_workers else ""
            specs.append(SlotSpec("compile", node, {"num_cpus": 1, "visible_gpu": visible},
                                  f"compile-{node[:8]}-{i}"))
    return specs


class Output:
    def __init__(self, stream):
        self.stream = stream
        self.lock = threading.Lock()

    def __call__(self, message):
        line = json.dumps(message, allow_nan=False, default=str)
        with self.lock:
            self.stream.write(line + "\n")
            self.stream.flush()


def salvage_id(text):
    match = re.search(r'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)', text)
    try:
        return json.loads(match.group(1)) if match else None
    except ValueError:
        return None


class Baselines:
    """Baseline files travel with the request (a node has none of the caller's files)."""

    def __init__(self):
        self.sources = {}

    def attach(self, message):
        baseline = message.get("baseline")
        if not isinstance(baseline, dict) or not baseline.get("file"):
            return None
        path = baseline["file"]
        if path not in self.sources:
            try:
                self.sources[path] = pathlib.Path(path).read_text(encoding="utf-8")
            except OSError as e:
                return f"cannot read the baseline file {path}: {e.strerror or e}"
        message["baseline"] = dict(baseline, source=self.sources[path])
        return None


async def serve(scheduler, emit, lines):
    """Feeds the scheduler from `lines` (an asyncio.Queue of raw lines, None at the end)."""
    baselines = Baselines()
    while True:
        raw = await lines.get()
        if raw is None:
            break
        text = raw.decode("utf-8", "replace").strip()
        if not text:
            continue
        try:
            message = json.loads(text)
        except ValueError as e:
            emit({"type": "result", "id": salvage_id(text), "status": "runtime_error",
                  "message": f"malformed request: not JSON ({e})"})
            continue
        if not isinstance(message, dict):
            emit({"type": "result", "id": None, "status": "runtime_error",
                  "message": "malformed request: not a JSON object"})
            continue
        if message.get("type") == "shutdown":
            break
        timeout_s = message.pop("timeout_s", 300)
        compile_first = message.pop("compile_first", True)
        device = message.pop("device", "") or ""
        if message.get("type") not in ("measure", "baseline", "compile"):
            emit({"type": "result", "id": message.get("id"), "status": "runtime_error",
                  "message": f"unknown request type {message.get('type')!r}"})
            continue
        if not isinstance(timeout_s, (int, float)) or timeout_s <= 0:
            timeout_s = 300
        problem = baselines.attach(message)
        if problem:
            emit({"type": "result", "id": message.get("id"), "status": "runtime_error",
                  "message": problem})
            continue
        scheduler.submit(message, float(timeout_s), bool(compile_first), str(device))


def read_stdin(loop, lines):
    for raw in iter(sys.stdin.buffer.readline, b""):
        loop.call_soon_threadsafe(lines.put_nowait, raw)
    loop.call_soon_threadsafe(lines.put_nowait, None)


def main(argv=None):
    parser = argparse.ArgumentParser(description="dtx Ray backend driver (docs/ray.md)")
    parser.add_argument("--address", required=True,
                        help="the Ray cluster: HOST:PORT of its head, `auto`, or ray://HOST:PORT")
    parser.add_argument("--worker-script", required=True, help="explorer/worker/dtx_worker.py")
    parser.add_argument("--interpreter-workers", type=int, default=0,
                        help="time on this many CPU actors with the Triton interpreter instead "
                             "of GPUs (testing without GPUs)")
    parser.add_argument("--compile-per-node", type=int, default=None,
                        help="compile actors per node (default: one per timing actor, at most "
                             "the node's CPUs)")
    parser.add_argument("--triton-cache", default="",
                        help="the Triton cache directory on every node (default: a directory "
                             "for this run, removed at the end)")
    parser.add_argument("--startup-timeout", type=float, default=300.0)
    args = parser.parse_args(argv)

    # Standard output carries the protocol alone: whatever else writes to fd 1 (Ray, libraries)
    # goes to standard error.
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    emit = Output(out)

    try:
        worker_source = pathlib.Path(args.worker_script).read_text(encoding="utf-8")
        check_reachable(args.address)
        if "RAY_AUTH_MODE" not in os.environ and args.address not in ("local",) and (
                os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH") or
                (pathlib.Path.home() / ".ray" / "auth_token").exists()):
            # A cluster started by `ray start` uses token authentication by default, with the
            # token in ~/.ray/auth_token; a client uses it only when told to.
            os.environ["RAY_AUTH_MODE"] = "token"
        import ray
        package = str(pathlib.Path(__file__).resolve().parent)
        try:
            ray.init(address=None if args.address == "local" else args.address,
                     namespace="dtx", log_to_driver=False, logging_level="WARNING",
                     include_dashboard=False if args.address == "local" else None,
                     runtime_env={"py_modules": [package]})
        except (ConnectionError, RuntimeError, ValueError) as e:
            hint = ""
            if os.environ.get("RAY_AUTH_MODE") == "token":
                hint = (" (token authentication was used: the token in RAY_AUTH_TOKEN or "
                        "~/.ray/auth_token must be the cluster's; RAY_AUTH_MODE=disabled for a "
                        "cluster without one)")
            raise UsageError(f"cannot connect to the Ray cluster at {args.address}: "
                             f"{short_error(e)}{hint}") from None
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        gpus = sum(int(n.get("Resources", {}).get("GPU", 0)) for n in nodes)
        cpus = sum(int(n.get("Resources", {}).get("CPU", 0)) for n in nodes)
        if not gpus and not args.interpreter_workers:
            raise UsageError(
                f"the Ray cluster at {args.address} has no GPU ({len(nodes)} node(s), {cpus} "
                "CPU(s)). Add GPU nodes (`ray start --address HEAD:PORT` on each; Ray finds "
                "their GPUs), or time on the Triton interpreter with --ray-interpreter-workers "
                "N for testing")
    except UsageError as e:
        log(str(e))
        return 2
    except OSError as e:
        log(f"{e}")
        return 2

    run = uuid.uuid4().hex[:10]
    specs = plan(nodes, args.interpreter_workers, args.compile_per_node)
    emit({"type": "hello", "protocol": PROTOCOL, "role": "ray-pool", "pid": os.getpid(),
          "python": platform.python_version(), "ray": ray.__version__, "address": args.address,
          "run": run,
          "nodes": [{"node": n["NodeID"], "host": n.get("NodeManagerHostname", ""),
                     "address": n.get("NodeManagerAddress", ""),
                     "gpus": int(n.get("Resources", {}).get("GPU", 0)),
                     "cpus": int(n.get("Resources", {}).get("CPU", 0))} for n in nodes],
          "timing_workers": sum(1 for s in specs if s.role == "timing"),
          "compile_workers": sum(1 for s in specs if s.role == "compile"),
          "device": {"kind": "ray", "name": "Ray cluster"}, "comparable": False})
    log(f"connected to {args.address}: {len(nodes)} node(s), {gpus} GPU(s); starting "
        f"{sum(1 for s in specs if s.role == 'timing')} timing and "
        f"{sum(1 for s in specs if s.role == 'compile')} compile actor(s) (run {run})")

    async def run_all():
        loop = asyncio.get_running_loop()
        cluster = RayCluster(ray, run, worker_source, args.triton_cache, args.startup_timeout)
        scheduler = Scheduler(cluster, emit, log=log)
        for spec in specs:
            scheduler.add(spec)
        lines = asyncio.Queue()
        threading.Thread(target=read_stdin, args=(loop, lines), daemon=True).start()
        await serve(scheduler, emit, lines)
        await scheduler.shutdown()
        # One actor per node removes this run's directory there (worker script, cache).
        done = set()
        cleanups = []
        for slot in scheduler.slots():
            if slot.node not in done:
                done.add(slot.node)
                cleanups.append(cluster._await(slot.handle.cleanup.remote(), 30))
        await asyncio.gather(*cleanups, return_exceptions=True)
        for handle in cluster.handles:
            try:
                ray.kill(handle, no_restart=True)
            except Exception:  # noqa: BLE001
                pass

    start = time.monotonic()
    try:
        asyncio.run(run_all())
    finally:
        log(f"shutting down after {time.monotonic() - start:.1f} s")
        ray.shutdown()
    return 0
