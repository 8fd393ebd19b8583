"""Where each request of the Ray backend runs, and what happens when a worker is lost.

The rules are the local pool's (explorer/src/WorkerPool.cpp), per node:
- A `measure` request goes to a compile worker of the node chosen for it, then to a timing
  worker of the same node, which finds the kernels in the node's shared Triton cache. A
  `compile` request ends at the compile worker; a `baseline` goes straight to timing.
- A timing worker's request carries the next request compiled for its node as `prefetch`,
  reserved for it.
- The node is the least loaded (queued and running requests per timing worker) among those with
  a timing worker of the request's `device` model (any model when it names none).

Faults. A worker that crashes or hangs on a request costs that request, as locally (the actor
replaces its worker process). An actor that is lost (its process or node died, or it stopped
answering) costs nothing: its request in flight and any request prefetched for it go back to the
queue of a node that still has workers, up to `max_resends` times each; the actor is started
again if its node is alive. Requests wait while no worker can take them and some are starting;
when none is left and none can start they fail (`crashed`) with the reason.

Independent of Ray: the `Cluster` given to the scheduler starts slots and calls them (the Ray one
is in pool.py; the tests give one of their own to exercise the rules).
"""
import asyncio
import collections
import dataclasses
import itertools

MAX_RESENDS = 3
MAX_RESTARTS = 5


class SlotLost(Exception):
    """The actor behind a slot is gone (or stopped answering): its request is not its fault."""


@dataclasses.dataclass
class SlotSpec:
    role: str  # "timing" or "compile"
    node: str  # node id
    options: dict = dataclasses.field(default_factory=dict)  # for the cluster: how to make it
    name: str = ""
    restarts: int = 0


class Slot:
    def __init__(self, spec, info, handle):
        self.spec = spec
        self.info = info  # the worker's hello with node, host, gpu
        self.handle = handle
        self.alive = True
        self.busy = False

    @property
    def role(self):
        return self.spec.role

    @property
    def node(self):
        return self.spec.node

    @property
    def device_name(self):
        device = self.info.get("device") or {}
        return device.get("name", "")


class Job:
    _ids = itertools.count(1)

    def __init__(self, message, timeout_s, compile_first, device):
        self.message = message  # the worker request, with the caller's id
        self.id = message.get("id")
        self.kind = message.get("type")
        self.timeout_s = timeout_s
        self.compile_first = compile_first
        self.device = device
        self.resends = 0
        self.ahead_compile_s = None
        self.reserved_for = None
        self.node = None
        self.seq = next(Job._ids)
        self.lost = []  # what was lost under it, for the message if it gives up


class Node:
    def __init__(self, node_id):
        self.id = node_id
        self.timing = []
        self.compile = []
        self.compile_queue = collections.deque()
        self.timing_queue = collections.deque()
        # Compile slots of the first start not up yet: requests wait for them rather than have
        # the timing worker compile (its GPU would idle while it does).
        self.compile_starting = 0

    def compiles(self):
        return bool(self.compile) or self.compile_starting > 0


def matches(slot, device):
    return not device or slot.device_name == device


class Scheduler:
    """`cluster` has: `async start(spec) -> Slot` (raises on failure), `async call(slot, message,
    timeout_s) -> dict` (raises SlotLost), `async kill(slot)`, `async node_alive(node_id)`.
    `emit(message)` writes a line to the backend's caller."""

    def __init__(self, cluster, emit, max_resends=MAX_RESENDS, max_restarts=MAX_RESTARTS,
                 log=None):
        self.cluster = cluster
        self.emit = emit
        self.max_resends = max_resends
        self.max_restarts = max_restarts
        self.log = log or (lambda line: None)
        self.nodes = {}
        self.parked = collections.deque()  # jobs no live worker can take yet
        self.starting = 0  # slots being started
        self.start_errors = []
        self.changed = asyncio.Condition()
        self.stopping = False
        self.tasks = set()

    # --- slots

    def _node(self, node_id):
        if node_id not in self.nodes:
            self.nodes[node_id] = Node(node_id)
        return self.nodes[node_id]

    def _spawn(self, coroutine):
        task = asyncio.get_running_loop().create_task(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def add(self, spec):
        """Starts a slot in the background; once its worker said hello it takes requests."""
        self.starting += 1
        if spec.role == "compile":
            self._node(spec.node).compile_starting += 1
        self._spawn(self._start(spec, first=True))

    async def _start(self, spec, first=False):
        try:
            slot = await self.cluster.start(spec)
        except Exception as e:  # noqa: BLE001  (any failure to place or start an actor)
            self.starting -= 1
            if first and spec.role == "compile":
                node = self._node(spec.node)
                node.compile_starting -= 1
                if not node.compiles():  # none will come: the timing workers compile
                    while node.compile_queue:
                        node.timing_queue.append(node.compile_queue.popleft())
            message = f"{spec.name or spec.role} on node {spec.node[:12]}: {e}"
            self.start_errors.append(message)
            self.log(f"did not start: {message}")
            await self._notify()
            return
        self.starting -= 1
        if first and spec.role == "compile":
            self._node(spec.node).compile_starting -= 1
        if self.stopping:
            await self.cluster.kill(slot)
            return
        node = self._node(spec.node)
        (node.timing if spec.role == "timing" else node.compile).append(slot)
        if spec.role == "timing":
            self.emit({"type": "worker", "worker": slot.info})
        self.log(f"{spec.name or spec.role} ready: pid {slot.info.get('pid')} on "
                 f"{slot.info.get('host')} ({slot.device_name})")
        self._spawn(self._serve(slot))
        await self._notify()

    def _lose(self, slot, why):
        if not slot.alive:
            return
        slot.alive = False
        node = self.nodes.get(slot.node)
        if node is not None:
            for group in (node.timing, node.compile):
                if slot in group:
                    group.remove(slot)
        self.log(f"{slot.spec.name or slot.role} lost (pid {slot.info.get('actor_pid')} on "
                 f"{slot.info.get('host')}): {why}")
        if slot.role == "timing":
            self.emit({"type": "worker_lost", "worker": slot.info, "reason": str(why)})
        # Its queued requests move to nodes that still have workers.
        if node is not None and not any(s.alive for s in node.timing):
            pending = list(node.compile_queue) + list(node.timing_queue)
            node.compile_queue.clear()
            node.timing_queue.clear()
            for job in pending:
                job.reserved_for = None
                self._route(job)
        if node is not None and not node.compiles():
            # Compile-first requests go straight to timing there (the timing worker compiles).
            while node.compile_queue:
                node.timing_queue.append(node.compile_queue.popleft())
        self.starting += 1  # until the restart is given up: requests wait for it
        self._spawn(self._restart(slot))

    async def _restart(self, slot):
        spec = slot.spec
        try:
            await self.cluster.kill(slot)
        except Exception:  # noqa: BLE001
            pass
        alive = False
        if not self.stopping and spec.restarts < self.max_restarts:
            try:
                alive = await self.cluster.node_alive(spec.node)
            except Exception:  # noqa: BLE001
                pass
            if not alive:
                self.log(f"node {spec.node[:12]} is gone; {spec.name or spec.role} is not "
                         "restarted")
        if not alive:
            self.starting -= 1
            await self._notify()
            return
        await self._start(dataclasses.replace(spec, restarts=spec.restarts + 1))

    # --- requests

    def submit(self, message, timeout_s, compile_first=True, device=""):
        self._route(Job(message, timeout_s, compile_first, device))
        self._spawn(self._notify())

    def _load(self, node, device):
        workers = [s for s in node.timing if s.alive and matches(s, device)]
        queued = len(node.compile_queue) + len(node.timing_queue) + \
            sum(1 for s in node.timing if s.busy)
        return queued / len(workers)

    def _route(self, job):
        nodes = [n for n in self.nodes.values()
                 if any(s.alive and matches(s, job.device) for s in n.timing)]
        if not nodes:
            self.parked.append(job)
            return
        node = min(nodes, key=lambda n: self._load(n, job.device))
        job.node = node
        to_compile = node.compiles() and (job.kind == "compile" or
                                       (job.kind == "measure" and job.compile_first))
        (node.compile_queue if to_compile else node.timing_queue).append(job)

    async def _notify(self):
        async with self.changed:
            self._settle()
            self.changed.notify_all()

    def _settle(self):
        """Routes parked jobs that a worker can take now, and fails those none ever will."""
        if not self.parked:
            return
        parked, self.parked = list(self.parked), collections.deque()
        for job in parked:
            self._route(job)
        if self.starting or self.stopping:
            return
        models = sorted({s.device_name for n in self.nodes.values() for s in n.timing if s.alive})
        while self.parked:
            job = self.parked.popleft()
            if job.device and models:
                why = (f"no GPU of model {job.device!r} in the Ray cluster (its timing workers: "
                       f"{', '.join(models)})")
                self._finish(job, {"status": "runtime_error", "message": why})
                continue
            why = "no timing worker is left in the Ray cluster"
            if job.lost:
                why += f" (lost under this request: {'; '.join(job.lost)})"
            if self.start_errors:
                why += f"; last start failure: {self.start_errors[-1]}"
            self._finish(job, {"status": "crashed", "message": why})

    def _finish(self, job, result, slot=None):
        result = dict(result)
        result["type"] = "result"
        result["id"] = job.id
        if slot is not None:
            result.setdefault("worker", slot.info)
        if job.ahead_compile_s is not None:
            result["ahead_compile_s"] = job.ahead_compile_s
        if job.resends:
            result["resent"] = job.resends
        for key, value in (("message", ""), ("compile_s", 0.0), ("import_s", 0.0),
                           ("wall_s", 0.0)):
            result.setdefault(key, value)
        self.emit(result)

    def _take(self, slot):
        """The job `slot` takes next from its node's queue, or None. Under `changed`."""
        node = self.nodes.get(slot.node)
        if node is None:
            return None
        queue = node.timing_queue if slot.role == "timing" else node.compile_queue
        if slot.role == "timing":
            for job in queue:
                if job.reserved_for is slot:
                    queue.remove(job)
                    return job
        for job in queue:
            if job.reserved_for is None and (slot.role == "compile" or matches(slot, job.device)):
                queue.remove(job)
                return job
        return None

    def _next_measure(self, slot):
        """The compiled measure request this timing slot takes next, reserved for it."""
        node = self.nodes.get(slot.node)
        for job in node.timing_queue if node else ():
            if job.reserved_for is None and matches(slot, job.device):
                if job.kind != "measure" or job.ahead_compile_s is None:
                    return None
                job.reserved_for = slot
                return job
        return None

    async def _serve(self, slot):
        while slot.alive and not self.stopping:
            async with self.changed:
                job = None
                while slot.alive and not self.stopping:
                    job = self._take(slot)
                    if job is not None:
                        break
                    await self.changed.wait()
                if job is None:
                    return
                slot.busy = True
                ahead = self._next_measure(slot) if slot.role == "timing" else None
            await (self._time(slot, job, ahead) if slot.role == "timing"
                   else self._compile(slot, job))
            slot.busy = False
            await self._notify()

    async def _call(self, slot, job, message, timeout_s):
        """The slot's result, or None when the slot was lost (the job is re-sent or failed)."""
        try:
            return await self.cluster.call(slot, message, timeout_s)
        except SlotLost as e:
            job.lost.append(f"{slot.spec.name or slot.role} on {slot.info.get('host')}: {e}")
            self._lose(slot, e)
            job.resends += 1
            job.reserved_for = None
            if job.resends > self.max_resends:
                self._finish(job, {"status": "crashed", "message":
                                   f"lost {job.resends} workers while measuring this request "
                                   f"({'; '.join(job.lost)})"})
            else:
                job.ahead_compile_s = None
                self._route(job)
            return None

    async def _compile(self, slot, job):
        message = {k: v for k, v in job.message.items()
                   if k not in ("check", "times", "baseline", "prefetch")}
        message["type"] = "compile"
        result = await self._call(slot, job, message, job.timeout_s)
        if result is None:
            return
        if job.kind == "measure" and result.get("status") == "ok" and not self.stopping:
            job.ahead_compile_s = result.get("compile_s", 0.0)
            node = self.nodes.get(slot.node)
            if node is not None and any(s.alive for s in node.timing):
                node.timing_queue.append(job)
            else:
                self._route(job)
            return
        self._finish(job, result, slot)

    async def _time(self, slot, job, ahead):
        message = dict(job.message)
        limit = job.timeout_s
        if ahead is not None:
            message["prefetch"] = ahead.message
            limit += min(ahead.timeout_s, 2 * (ahead.ahead_compile_s or 0) + 1)
        result = await self._call(slot, job, message, limit)
        if result is None:
            if ahead is not None:
                ahead.reserved_for = None
            return
        self._finish(job, result, slot)

    # --- end

    async def shutdown(self):
        """Fails what is queued (`crashed`, "the pool shut down"); stops the slots."""
        self.stopping = True
        pending = list(self.parked)
        self.parked.clear()
        for node in self.nodes.values():
            pending += list(node.compile_queue) + list(node.timing_queue)
            node.compile_queue.clear()
            node.timing_queue.clear()
        for job in pending:
            self._finish(job, {"status": "crashed", "message": "the pool shut down"})
        async with self.changed:
            self.changed.notify_all()

    def slots(self):
        return [s for n in self.nodes.values() for s in n.timing + n.compile if s.alive]
