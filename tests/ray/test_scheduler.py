"""The Ray backend's scheduling rules (explorer/ray/dtx_ray/scheduler.py) on a cluster of
in-process slots: node-local compile then time, prefetch, device models kept apart, and what a
lost actor costs. No Ray here; tests/ray/test_ray_backend.py runs the real thing."""
import asyncio
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "explorer" / "ray"))
from dtx_ray.scheduler import Scheduler, Slot, SlotLost, SlotSpec  # noqa: E402


class FakeCluster:
    """Slots that answer `ok` after `delay` seconds, reporting who they are. `lose` names slots
    whose next call raises SlotLost (their actor is gone); `dead_nodes` are not restarted."""

    def __init__(self, models=None, delay=0.01):
        self.models = models or {}  # node -> device name
        self.delay = delay
        self.calls = []  # (slot name, message type, id, prefetch id)
        self.lose = set()
        self.lose_always = set()
        self.dead_nodes = set()
        self.started = []
        self.fail_start = set()

    async def start(self, spec):
        if (spec.restarts and spec.node in self.dead_nodes) or spec.name in self.fail_start:
            raise RuntimeError("node is gone")
        await asyncio.sleep(0)
        name = f"{spec.name}#{spec.restarts}"
        self.started.append(name)
        info = {"type": "hello", "role": spec.role, "pid": len(self.started), "host": spec.node,
                "node": spec.node, "actor_pid": len(self.started), "name": name,
                "device": {"kind": "cuda", "name": self.models.get(spec.node, "GPU-A")}}
        return Slot(spec, info, handle=name)

    async def call(self, slot, message, timeout_s):
        prefetch = (message.get("prefetch") or {}).get("id")
        self.calls.append((slot.handle, message["type"], message["id"], prefetch))
        await asyncio.sleep(self.delay)
        if slot.spec.name in self.lose or slot.handle in self.lose_always:
            self.lose.discard(slot.spec.name)
            raise SlotLost("actor died")
        return {"type": "result", "id": message["id"], "status": "ok", "compile_s": 0.25,
                "worker": slot.info}

    async def kill(self, slot):
        pass

    async def node_alive(self, node_id):
        return node_id not in self.dead_nodes


def specs(nodes, gpus=1, compiles=1):
    out = []
    for node in nodes:
        out += [SlotSpec("timing", node, {}, f"t-{node}-{i}") for i in range(gpus)]
        out += [SlotSpec("compile", node, {}, f"c-{node}-{i}") for i in range(compiles)]
    return out


def run(cluster, slot_specs, requests, during=None, settle=0.05, **kw):
    """Submits `requests` (id, type, device) once the slots are up; returns {id: result}."""
    results = {}

    async def main():
        done = asyncio.Event()

        def emit(message):
            if message["type"] == "result":
                results[message["id"]] = message
                if len(results) == len(requests):
                    done.set()

        s = Scheduler(cluster, emit, **kw)
        for spec in slot_specs:
            s.add(spec)
        await asyncio.sleep(settle)
        for rid, kind, device in requests:
            s.submit({"type": kind, "id": rid, "func": "f"}, 30.0, True, device)
        if during:
            await during(s)
        await asyncio.wait_for(done.wait(), 10)
        await s.shutdown()

    asyncio.run(main())
    return results


def test_measure_compiles_then_times_on_the_same_node():
    c = FakeCluster()
    results = run(c, specs(["n1", "n2"]), [(str(i), "measure", "") for i in range(8)])
    assert all(r["status"] == "ok" for r in results.values())
    for rid in map(str, range(8)):
        where = [(name.split("-")[1], kind) for name, kind, i, _ in c.calls if i == rid]
        assert [k for _, k in where] == ["compile", "measure"], where
        assert where[0][0] == where[1][0]  # one node: its Triton cache has the kernels
        assert results[rid]["ahead_compile_s"] == 0.25
    # Both nodes worked.
    assert {name.split("-")[1] for name, *_ in c.calls} == {"n1", "n2"}


def test_requests_wait_for_compile_slots_that_are_still_starting():
    """A timing slot up before the compile slots must not compile requests itself."""
    c = FakeCluster()
    orig = c.start

    async def slow_compile(spec):
        if spec.role == "compile":
            await asyncio.sleep(0.1)
        return await orig(spec)

    c.start = slow_compile
    results = run(c, specs(["n1"]), [(str(i), "measure", "") for i in range(4)], settle=0.01)
    assert all(r["status"] == "ok" and r["ahead_compile_s"] == 0.25 for r in results.values())


def test_a_node_whose_compile_slots_never_start_times_without_them():
    c = FakeCluster()
    c.fail_start.add("c-n1-0")
    results = run(c, specs(["n1"]), [(str(i), "measure", "") for i in range(3)], settle=0)
    assert all(r["status"] == "ok" for r in results.values())
    assert {k for _, k, _, _ in c.calls} == {"measure"}


def test_baselines_go_straight_to_timing_and_compile_requests_end_at_compile():
    c = FakeCluster()
    results = run(c, specs(["n1"]), [("b", "baseline", ""), ("c", "compile", "")])
    assert [k for _, k, i, _ in c.calls if i == "b"] == ["baseline"]
    assert [(n.split("-")[0], k) for n, k, i, _ in c.calls if i == "c"] == [("c", "compile")]
    assert results["c"]["worker"]["role"] == "compile"


def test_a_timing_slot_is_told_to_ready_its_next_request():
    c = FakeCluster(delay=0.02)
    run(c, specs(["n1"], compiles=2), [(str(i), "measure", "") for i in range(6)])
    timed = [(i, p) for _, kind, i, p in c.calls if kind == "measure"]
    prefetched = [p for _, p in timed if p]
    assert prefetched, timed
    # A request readied by the slot is the one that slot times next.
    order = [i for i, _ in timed]
    for i, p in timed:
        if p:
            assert order[order.index(i) + 1] == p


def test_device_models_are_kept_apart():
    c = FakeCluster(models={"h100": "NVIDIA H100", "a100": "NVIDIA A100"})
    reqs = [(f"h{i}", "measure", "NVIDIA H100") for i in range(5)] + \
        [(f"a{i}", "measure", "NVIDIA A100") for i in range(5)]
    results = run(c, specs(["h100", "a100"]), reqs)
    for rid, r in results.items():
        assert r["status"] == "ok"
        want = "NVIDIA H100" if rid.startswith("h") else "NVIDIA A100"
        assert r["worker"]["device"]["name"] == want
        nodes = {name.split("-")[1] for name, _, i, _ in c.calls if i == rid}
        assert nodes == {"h100" if rid.startswith("h") else "a100"}


def test_a_model_the_cluster_lacks_is_a_clear_error():
    c = FakeCluster()
    results = run(c, specs(["n1"]), [("x", "measure", "NVIDIA B200")])
    assert results["x"]["status"] == "runtime_error"
    assert "no GPU of model 'NVIDIA B200'" in results["x"]["message"]
    assert "GPU-A" in results["x"]["message"]


def test_a_lost_timing_actor_costs_nothing_and_is_restarted():
    c = FakeCluster()
    c.lose.add("t-n1-0")  # its next call: the actor dies under the request
    results = run(c, specs(["n1", "n2"]), [(str(i), "measure", "") for i in range(10)])
    assert all(r["status"] == "ok" for r in results.values()), results
    resent = [r for r in results.values() if r.get("resent")]
    assert len(resent) == 1
    assert "t-n1-0#1" in c.started  # restarted on its node, which is alive


def test_a_lost_node_moves_its_requests_to_the_others():
    # n2 is up when the run starts, then its actors die and it is gone (not restarted).
    c2 = FakeCluster(delay=0.02)
    started = []

    async def start(spec, orig=c2.start):
        if spec.node == "n2" and spec.restarts:
            raise RuntimeError("node is gone")
        started.append(spec.name)
        return await orig(spec)

    c2.start = start

    async def kill_n2(s):
        await asyncio.sleep(0.03)
        c2.lose.update({"t-n2-0", "c-n2-0"})
        c2.dead_nodes.add("n2")

    results = run(c2, specs(["n1", "n2"]), [(str(i), "measure", "") for i in range(12)],
                  during=kill_n2)
    assert all(r["status"] == "ok" for r in results.values()), results
    late = [i for name, kind, i, _ in c2.calls if kind == "measure"][-4:]
    assert all(results[i]["worker"]["node"] == "n1" for i in late)


def test_when_every_timing_actor_is_gone_requests_fail_with_the_reason():
    c = FakeCluster()
    c.lose_always.add("t-n1-0#0")
    c.dead_nodes.add("n1")  # up at the start, gone once its actor dies: not restarted
    results = run(c, specs(["n1"]), [("1", "measure", "")])
    assert results["1"]["status"] == "crashed"
    assert "no timing worker is left" in results["1"]["message"]
    assert "actor died" in results["1"]["message"]


def test_a_request_that_keeps_losing_actors_gives_up():
    c = FakeCluster()
    c.lose_always.update({f"t-n1-0#{k}" for k in range(10)})
    results = run(c, specs(["n1"]), [("1", "measure", "")], max_resends=2, max_restarts=10)
    assert results["1"]["status"] == "crashed"
    assert "lost 3 workers" in results["1"]["message"]


def test_shutdown_fails_what_is_queued():
    c = FakeCluster(delay=0.2)
    out = []

    async def main():
        s = Scheduler(c, out.append)
        for spec in specs(["n1"]):
            s.add(spec)
        await asyncio.sleep(0.05)
        for i in range(4):
            s.submit({"type": "measure", "id": str(i), "func": "f"}, 30.0, True, "")
        await asyncio.sleep(0.05)
        await s.shutdown()

    asyncio.run(main())
    failed = [m for m in out if m["type"] == "result" and m["status"] == "crashed"]
    assert failed and all(m["message"] == "the pool shut down" for m in failed)


@pytest.mark.parametrize("n", [1, 3])
def test_requests_before_any_worker_is_ready_wait_for_one(n):
    c = FakeCluster()
    results = run(c, specs(["n1"]), [(str(i), "measure", "") for i in range(n)], settle=0)
    assert all(r["status"] == "ok" for r in results.values())
