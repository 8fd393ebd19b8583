"""A stand-in for dtx_worker.py that speaks protocol 1 without torch or triton, so that the
pool's queueing, timeouts, crashes and restarts are tested in milliseconds. The request's
`func` says what to do: ok, sleep (hang), exit (os._exit), kill (SIGKILL itself), cuda (a
CUDA-style runtime_error, then exit as the real worker does), raise (runtime_error)."""
import json
import os
import signal
import sys
import time

role = sys.argv[sys.argv.index("--role") + 1] if "--role" in sys.argv else "timing"
out = sys.stdout
sys.stdout = sys.stderr
if os.environ.get("FAKE_WORKER_HELLO_DELAY"):
    time.sleep(float(os.environ["FAKE_WORKER_HELLO_DELAY"]))
if os.environ.get("FAKE_WORKER_NO_HELLO"):
    time.sleep(3600)
print(f"fake worker {role} pid {os.getpid()} starting", file=sys.stderr, flush=True)


def send(obj):
    out.write(json.dumps(obj) + "\n")
    out.flush()


send({"type": "hello", "protocol": 1, "role": role, "pid": os.getpid(), "python": "3",
      "torch": "none", "triton": "none",
      "device": {"kind": "cpu-interpreter", "name": "cpu-interpreter"}, "comparable": False,
      "cache": os.environ.get("TRITON_CACHE_DIR", ""),
      "cuda_visible": os.environ.get("CUDA_VISIBLE_DEVICES", "")})
for line in sys.stdin:
    req = json.loads(line)
    if req["type"] == "shutdown":
        break
    func = req.get("func", "ok")
    rid = req["id"]
    print(f"request {rid} {req['type']} {func}", file=sys.stderr, flush=True)
    base = {"type": "result", "id": rid, "compile_s": 0.5 if req["type"] == "compile" else 0.0,
            "import_s": 0.0, "wall_s": 0.0}
    if func == "sleep":
        time.sleep(3600)
    elif func == "exit":
        os._exit(3)
    elif func == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif func == "cuda":
        send({**base, "status": "runtime_error",
              "message": "RuntimeError: CUDA error: an illegal memory access was encountered"})
        sys.exit(1)
    elif func == "raise":
        send({**base, "status": "runtime_error", "message": "ValueError: boom"})
    else:
        sizes = req.get("sizes", {})
        delay = float(sizes.get("delay_ms", 0)) / 1000
        if req["type"] != "compile":  # a time of its own for the timing stage
            delay += float(sizes.get("timing_delay_ms", 0)) / 1000
        time.sleep(delay)
        res = {**base, "status": "ok", "message": f"{role} {os.getpid()} {req['type']}"}
        if isinstance(req.get("prefetch"), dict):  # the pool named the request queued next
            res["message"] += f" prefetch {req['prefetch'].get('id')}"
        if req["type"] != "compile":
            res["times"] = {"bench": {"median_ms": 1.5, "q20_ms": 1.4, "q80_ms": 1.6,
                                      "min_ms": 1.0, "max_ms": 2.0, "samples": 10}}
        send(res)
