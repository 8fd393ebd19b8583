"""The Ray backend's driver: the explorer's `RayBackend` (explorer/src/RayBackend.cpp) reaches a
Ray cluster's actors through this one process, which it speaks to over JSON lines.

    python explorer/ray/dtx_ray_pool.py --address HOST:PORT --worker-script PATH [--triton-cache DIR]

It holds no rule of where a request runs or what a fault costs: RayBackend's scheduler
(explorer/src/MeasurementScheduler.cpp, the local pool's too) decides, and asks for this:

- `nodes`: the cluster's alive nodes (id, host, address, GPUs, CPUs);
- `open`: an actor (actors.py) for a slot on a node, with the slot's resources; its answer is
  where the actor runs, once it is placed;
- `call`: one of an actor's methods (`start`, `exchange`, `kill`) with its arguments;
- `node_alive`: whether a node is still in the cluster;
- `close` (no answer): kill a slot's actor; `shutdown`: kill every actor, remove this run's files
  on the nodes, and end.

Each command but `close` and `shutdown` carries a number `n`, and its answer is a `reply` with that
`n` and either `value`, or `lost` (the actor is gone: its process or node died), or `error`
(something raised). Commands are served concurrently, in any order.

It says `hello` once connected (the cluster's nodes, the Ray version, the run's id), and exits with
2 before any hello when the cluster cannot be reached; standard error says why.
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

PROTOCOL = 1
METHODS = ("start", "exchange", "kill")


class UsageError(Exception):
    """The cluster cannot be used: the message says why and what to do."""


def log(*parts):
    print("dtx-ray:", *parts, file=sys.stderr, flush=True)


def short_error(e):
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:500]


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


def describe_nodes(nodes):
    return [{"node": n["NodeID"], "host": n.get("NodeManagerHostname", ""),
             "address": n.get("NodeManagerAddress", ""),
             "gpus": int(n.get("Resources", {}).get("GPU", 0)),
             "cpus": int(n.get("Resources", {}).get("CPU", 0))}
            for n in nodes if n.get("Alive")]


class Output:
    def __init__(self, stream):
        self.stream = stream
        self.lock = threading.Lock()

    def __call__(self, message):
        line = json.dumps(message, allow_nan=False, default=str)
        with self.lock:
            self.stream.write(line + "\n")
            self.stream.flush()


class Driver:
    """The actors of one run, by slot."""

    def __init__(self, ray, run, worker_source, triton_cache_dir, emit):
        from .actors import MeasureActor
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        self.ray = ray
        self.run = run
        self.worker_source = worker_source
        self.triton_cache_dir = triton_cache_dir
        self.emit = emit
        self.actor_class = ray.remote(MeasureActor)
        self.affinity = NodeAffinitySchedulingStrategy
        self.actors = {}  # slot -> actor handle

    @staticmethod
    def _wait(ref):
        return asyncio.wrap_future(ref.future())

    async def nodes(self):
        loop = asyncio.get_running_loop()
        return describe_nodes(await loop.run_in_executor(None, self.ray.nodes))

    async def serve(self, message):
        """Answers one command."""
        kind, n = message.get("type"), message.get("n")
        if kind == "close":
            self.close(message.get("slot"))
            return
        try:
            if kind == "nodes":
                value = await self.nodes()
            elif kind == "node_alive":
                value = any(node["node"] == message.get("node") for node in await self.nodes())
            elif kind == "open":
                value = await self.open(message)
            elif kind == "call":
                actor = self.actors.get(message.get("slot"))
                if actor is None:
                    self.emit({"type": "reply", "n": n, "lost": "the actor was closed"})
                    return
                if message.get("method") not in METHODS:
                    raise ValueError(f"no method {message.get('method')!r}")
                method = getattr(actor, message["method"])
                value = await self._wait(method.remote(*message.get("args", [])))
            else:
                raise ValueError(f"unknown command {kind!r}")
            self.emit({"type": "reply", "n": n, "value": value})
        except self.ray.exceptions.RayActorError as e:
            self.emit({"type": "reply", "n": n, "lost": short_error(e)})
        except Exception as e:  # noqa: BLE001  (any failure is the caller's to judge)
            self.emit({"type": "reply", "n": n, "error": short_error(e)})

    async def open(self, m):
        slot = m["slot"]
        actor = self.actor_class.options(
            name=f"dtx-{self.run}-{slot}", namespace="dtx",
            num_gpus=m.get("num_gpus", 0), num_cpus=m.get("num_cpus", 1),
            scheduling_strategy=self.affinity(node_id=m["node"], soft=False),
            max_restarts=0, max_task_retries=0,
        ).remote(m.get("role", "timing"), self.run, self.worker_source, m.get("visible_gpu"),
                 self.triton_cache_dir, m.get("stderr_tail_bytes", 4096))
        self.actors[slot] = actor
        try:
            return await self._wait(actor.where.remote())
        except BaseException:
            self.close(slot)
            raise

    def close(self, slot):
        actor = self.actors.pop(slot, None)
        if actor is not None:
            try:
                self.ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001  (already gone)
                pass

    async def shutdown(self):
        """Kills every actor, then removes this run's directory on each node alive."""
        for slot in list(self.actors):
            self.close(slot)
        from .actors import remove_run_directory
        remove = self.ray.remote(num_cpus=0)(remove_run_directory)
        refs = [remove.options(scheduling_strategy=self.affinity(node_id=n["node"], soft=False))
                .remote(self.run) for n in await self.nodes()]
        if refs:
            await asyncio.wait([asyncio.ensure_future(self._wait(r)) for r in refs], timeout=30)


async def serve(driver, fd):
    """Serves the commands read from `fd` (standard input) until `shutdown` or its end. It is read
    in the event loop itself, so that a command waits for no other thread."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    tasks = set()
    buffer = b""
    os.set_blocking(fd, False)

    def readable():
        nonlocal buffer
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for raw in lines:
            text = raw.decode("utf-8", "replace").strip()
            if not text:
                continue
            try:
                message = json.loads(text)
            except ValueError:
                message = None
            if not isinstance(message, dict):
                log(f"ignored a line that is not a JSON object: {text[:200]}")
            elif message.get("type") == "shutdown":
                chunk = b""
                break
            else:
                task = loop.create_task(driver.serve(message))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        if not chunk and not done.done():
            loop.remove_reader(fd)
            done.set_result(None)

    loop.add_reader(fd, readable)
    await done


def main(argv=None):
    parser = argparse.ArgumentParser(description="dtx Ray backend driver (docs/ray.md)")
    parser.add_argument("--address", required=True,
                        help="the Ray cluster: HOST:PORT of its head, `auto`, or ray://HOST:PORT")
    parser.add_argument("--worker-script", required=True, help="src/dtx/worker.py")
    parser.add_argument("--triton-cache", default="",
                        help="the Triton cache directory on every node (default: a directory "
                             "for this run, removed at the end)")
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
    except UsageError as e:
        log(str(e))
        return 2
    except OSError as e:
        log(f"{e}")
        return 2

    run = uuid.uuid4().hex[:10]
    nodes = describe_nodes(ray.nodes())
    emit({"type": "hello", "protocol": PROTOCOL, "role": "ray-pool", "pid": os.getpid(),
          "python": platform.python_version(), "ray": ray.__version__, "address": args.address,
          "run": run, "nodes": nodes,
          "device": {"kind": "ray", "name": "Ray cluster"}, "comparable": False})
    log(f"connected to {args.address}: {len(nodes)} node(s), "
        f"{sum(n['gpus'] for n in nodes)} GPU(s) (run {run})")

    async def run_all():
        driver = Driver(ray, run, worker_source, args.triton_cache, emit)
        await serve(driver, sys.stdin.fileno())
        await driver.shutdown()

    start = time.monotonic()
    try:
        asyncio.run(run_all())
    finally:
        log(f"shutting down after {time.monotonic() - start:.1f} s")
        ray.shutdown()
    return 0
