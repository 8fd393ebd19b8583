"""On the GPU machine, from the repository root, after tests/gpu/prepare_dtxd.sh: the installed
dtxd (.gpu/dtx) started as a user starts it, one template of its own list posted over HTTP at a
shape of the template, watched to the end; prints the exploration, its best schedules and the
baselines. Exits 1 unless it ends `done` with every measured candidate correct.

    python3 tests/gpu/dtxd_explore.py [--template gemm_gelu] [--budget 48] [--shape m=4096,...]
                                      [--where 'out.num_warps == 8']

`--where` narrows the template's space by a constraint of its own, as a user narrows it in the
schedule they post.
"""
import argparse
import contextlib
import json
import os
import pathlib
import re
import subprocess
import sys
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
PREFIX = ROOT / ".gpu" / "dtx"


def call(base, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--template", default="gemm_gelu")
    parser.add_argument("--budget", type=int, default=48)
    parser.add_argument("--shape", help="LABEL=SIZE,... (default: the template's first shape)")
    parser.add_argument("--strategy", default=None, help="default: dtxd's (tpe)")
    parser.add_argument("--compile-workers", type=int, default=8)
    parser.add_argument("--data-dir", default="/tmp/dtxd-gpu")
    parser.add_argument("--where", action="append", default=[],
                        help="a constraint added to the template's schedule (repeatable)")
    args = parser.parse_args()

    with started_daemon(args.data_dir, args.compile_workers) as base:
        status, listed = call(base, "GET", "/v1/templates")
        t = next(t for t in listed["templates"] if t["name"] == args.template)
        shape = (dict((k, int(v)) for k, v in (i.split("=") for i in args.shape.split(",")))
                 if args.shape else t["shapes"][0])
        body = {k: t[k] for k in ("kernel", "algorithm", "schedule", "dtype", "compile",
                                  "baselines")}
        body["schedule"] += "".join(f"where {w};\n" for w in args.where)
        if args.strategy:  # else dtxd's default
            body["strategy"] = args.strategy
        body.update(shapes=[shape], budget=args.budget, top=5,
                    rounds=3, times=["bench", "gpu", "host"])
        start = time.time()
        status, created = call(base, "POST", "/v1/explorations", body)
        print(f"POST /v1/explorations: {status} {json.dumps(created)[:300]}", flush=True)
        if status != 202:
            return 1
        eid = created["id"]
        while True:
            status, x = call(base, "GET", f"/v1/explorations/{eid}")
            if x["state"] in ("done", "failed", "cancelled"):
                break
            p = x.get("progress") or {}
            print(f"  {time.time() - start:6.0f} s {p.get('phase')} {p.get('done')}/"
                  f"{p.get('budget')} failed {p.get('failed')}", flush=True)
            time.sleep(15)
        print(f"exploration {eid}: {x['kernel']} at {x['shape']} {x['dtype']}, {x['state']} in "
              f"{time.time() - start:.0f} s on {x.get('device')}; measured {x.get('measured')}, "
              f"failed {x.get('failed')}; message: {x.get('message') or '-'}")
        status, ranked = call(base, "GET", f"/v1/explorations/{eid}/schedules?limit=5")

        def times(m):
            m = m or {}
            gpu = (m.get("gpu") or {}).get("median_ms")
            return (f"{m.get('status')} do_bench {m.get('time_ms')} ms, CUDA graph {gpu} ms, "
                    f"host {m.get('host_us')} us")
        for s in ranked.get("schedules", []):
            print(f"  #{s.get('rank')} {times(s.get('full') or s.get('screen'))}: "
                  f"{s.get('canonical')}")
        for b in ranked.get("baselines", []):
            if b["measurement"].get("protocol") == "full":
                print(f"  baseline {b['name']}: {times(b['measurement'])}")
        best, peer = x.get("best_ms"), x.get("best_baseline_ms")
        if best and peer:
            print(f"best baseline / best schedule (full protocol, do_bench): {peer / best:.3f}x")
        ok = x["state"] == "done" and x.get("failed", 0) == 0 and x.get("measured", 0) > 0
        return 0 if ok else 1


@contextlib.contextmanager
def started_daemon(data_dir, compile_workers=8):
    """The installed dtxd on a free port, as a user starts it; yields its base URL; stops it and
    prints the errors it logged."""
    env = dict(os.environ, LD_LIBRARY_PATH=str(PREFIX / "lib"))
    daemon = subprocess.Popen(
        [str(PREFIX / "bin" / "dtxd"), "--port", "0", "--data-dir", data_dir, "--no-example",
         "--python", sys.executable, "--compile-workers", str(compile_workers)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd="/tmp")
    line = daemon.stdout.readline()
    m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    if not m:
        daemon.kill()
        raise RuntimeError(f"dtxd did not start: {line} {daemon.stderr.read()}")
    try:
        yield f"http://127.0.0.1:{m.group(1)}"
    finally:
        daemon.terminate()
        try:
            _, err = daemon.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            daemon.kill()
            _, err = daemon.communicate()
        tail = "\n".join(line for line in err.splitlines() if "error" in line.lower())[-3000:]
        print("dtxd errors:", tail or "none")
        # The whole log where the device tool brings files back: the timeline of every
        # exploration (when it started, each phase, each worker) for a run that took long.
        if os.environ.get("OUT"):
            pathlib.Path(os.environ["OUT"], "dtxd.log").write_text(err)

if __name__ == "__main__":
    sys.exit(main())
