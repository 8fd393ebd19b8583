"""A stand-in for explorer/ray/dtx_ray_pool.py that speaks the driver's protocol (docs/ray.md)
without Ray: one node with FAKE_RAY_GPUS GPUs (default 1), actors that answer at once. A request's
`func` says what happens: ok; lose (its actor dies, the first time only); die (the driver exits
with 7, saying why); baseline (the answer's message is the baseline's source, as it arrived)."""
import json
import os
import sys

out = sys.stdout
sys.stdout = sys.stderr
NODE = "f" * 56
nodes = [{"node": NODE, "host": "fake-host", "address": "127.0.0.1",
          "gpus": int(os.environ.get("FAKE_RAY_GPUS", "1")), "cpus": 4}]


def send(obj):
    out.write(json.dumps(obj) + "\n")
    out.flush()


send({"type": "hello", "protocol": 1, "role": "ray-pool", "pid": os.getpid(), "ray": "fake",
      "nodes": nodes, "device": {"kind": "ray", "name": "Ray cluster"}, "comparable": False})
actors = {}
lost_once = set()
for line in sys.stdin:
    m = json.loads(line)
    kind, n = m.get("type"), m.get("n")
    if kind == "shutdown":
        break
    if kind == "close":
        actors.pop(m["slot"], None)
        continue
    if kind == "nodes":
        send({"type": "reply", "n": n, "value": nodes})
    elif kind == "node_alive":
        send({"type": "reply", "n": n, "value": m["node"] == NODE})
    elif kind == "open":
        actors[m["slot"]] = m
        send({"type": "reply", "n": n, "value": {"node": m["node"], "host": "fake-host",
                                                  "actor_pid": os.getpid(), "gpu": 0}})
    elif kind == "call":
        actor = actors.get(m["slot"])
        method, args = m["method"], m.get("args", [])
        if actor is None:
            send({"type": "reply", "n": n, "lost": "the actor was closed"})
        elif method == "start":
            send({"type": "reply", "n": n, "value": {"hello": {
                "type": "hello", "protocol": 1, "role": actor["role"], "pid": 1000 + n,
                "python": "3", "torch": "none", "triton": "none",
                "device": {"kind": "cuda", "name": "FAKE GPU"}, "comparable": True,
                "node": actor["node"], "host": "fake-host", "gpu": 0, "slot": m["slot"]}}})
        elif method == "kill":
            send({"type": "reply", "n": n, "value": True})
        elif method == "exchange":
            request = args[0]
            func = request.get("func")
            if func == "die":
                print("dtx-ray: dying on purpose", file=sys.stderr, flush=True)
                os._exit(7)
            if func == "lose" and request["id"] not in lost_once:
                lost_once.add(request["id"])
                actors.pop(m["slot"])
                send({"type": "reply", "n": n, "lost": "actor died"})
                continue
            message = f"{actor['role']} {m['slot']} {request['type']}"
            if func == "baseline":
                message = request["baseline"]["source"]
            send({"type": "reply", "n": n, "value": {"io": "done", "reply": {
                "type": "result", "id": request["id"], "status": "ok", "message": message,
                "compile_s": 0.5}}})
