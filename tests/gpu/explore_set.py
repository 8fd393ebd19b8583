"""On the GPU machine, after tests/gpu/prepare_dtxd.sh: explorations of several templates at
several shapes through one installed dtxd, as a user posts them, all queued at once; prints, per
exploration, the best schedule and every baseline under the full protocol (do_bench median,
CUDA-graph GPU time, host time per call) and the ratio of the best schedule to the best peer.
Benchmarks, not tests: exits 1 only when an exploration does not end `done` with every measured
candidate correct.

    python3 tests/gpu/explore_set.py TEMPLATE[:SHAPE_INDEX,...] ... [--budget 24] [--dtype bfloat16]

`rmsnorm:0,2` explores the template's first and third shapes (default: the first);
`matmul@m=8192,n=8192,k=8192` a shape of one's own. `--baseline-for KERNEL=FILE.py:FUNCTION` adds
a peer of the templates directory to that kernel's explorations, `--schedule-for KERNEL=FILE` gives
them the schedule space in FILE instead of the template's. Failed schedules are printed with their
status and message; with $OUT set (the device tool), every schedule's times are written there, one
JSON file per exploration. For the FlashAttention templates the TFLOP/s of the best schedule and of every baseline are printed too:

    python3 tests/gpu/explore_set.py flash_attention:0,1,2,3,4,5 \
        flash_attention_causal:0,1,2,3,4,5 --dtype bfloat16
"""
import argparse
import json
import os
import pathlib
import sys
import time

from dtxd_explore import call, started_daemon


def full_times(m):
    m = m or {}
    return m.get("time_ms"), (m.get("gpu") or {}).get("median_ms"), m.get("host_us")


def attention_flop(name, shape):
    """Floating-point operations of attention's two products (4·b·h·m·l·d; half under a
    causal mask), or None for other kernels."""
    if not name.startswith("flash_attention"):
        return None
    flop = 4 * shape["b"] * shape["h"] * shape["m"] * shape["l"] * shape["k"]
    return flop / 2 if name.endswith("causal") else flop


def tflops(flop, ms):
    return None if flop is None or not ms else flop / (ms * 1e-3) / 1e12


def fmt(v, digits=4):
    return "-" if v is None else f"{v:.{digits}f}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("templates", nargs="+")
    parser.add_argument("--budget", type=int, default=24)
    parser.add_argument("--dtype", default=None, help="override the templates' dtype")
    parser.add_argument("--strategy", default=None, help="default: dtxd's (tpe)")
    parser.add_argument("--deadline-s", type=float, default=540)
    parser.add_argument("--data-dir", default="/tmp/dtxd-set")
    parser.add_argument("--compile-workers", type=int, default=8)
    parser.add_argument("--timeout-s", type=float, default=None,
                        help="seconds a measurement may take (max-autotune baselines need more)")
    parser.add_argument("--schedule-for", action="append", default=[],
                        help="KERNEL=FILE: that kernel's schedule space from FILE, not the template's")
    parser.add_argument("--baseline-for", action="append", default=[],
                        help="KERNEL=FILE.py:FUNCTION: one more baseline for that kernel")
    args = parser.parse_args()

    extra = {}
    for item in args.baseline_for:
        kernel, _, entry = item.partition("=")
        extra.setdefault(kernel, []).append(entry)
    spaces = {k: open(f).read() for k, _, f in (i.partition("=") for i in args.schedule_for)}
    with started_daemon(args.data_dir, args.compile_workers) as base:
        status, listed = call(base, "GET", "/v1/templates")
        by_name = {t["name"]: t for t in listed["templates"]}
        posted = []
        for item in args.templates:
            if "@" in item:
                name, _, given = item.partition("@")
                shapes = [{k: int(v) for k, v in (p.split("=") for p in given.split(","))}]
            else:
                name, _, which = item.partition(":")
                shapes = [by_name[name]["shapes"][int(i)] for i in which.split(",")] if which \
                    else [by_name[name]["shapes"][0]]
            t = by_name[name]
            for shape in shapes:
                body = {k: t[k] for k in ("kernel", "algorithm", "schedule", "dtype", "compile",
                                          "baselines") if k in t}
                if t["kernel"] in spaces:
                    body["schedule"] = spaces[t["kernel"]]
                body["baselines"] = list(body.get("baselines", [])) + extra.get(t["kernel"], [])
                if args.dtype:
                    body["dtype"] = args.dtype
                if args.timeout_s:
                    body["timeout_s"] = args.timeout_s
                if args.strategy:  # else dtxd's default
                    body["strategy"] = args.strategy
                body.update(shapes=[shape], budget=args.budget,
                            top=3, rounds=3, times=["bench", "gpu", "host"], seed=1)
                status, created = call(base, "POST", "/v1/explorations", body)
                if status != 202:
                    print(f"{name} {shape}: POST {status} {json.dumps(created)[:400]}")
                    continue
                posted.append((name, shape, created["id"]))
        start, bad = time.time(), 0
        pending = list(posted)
        results = {}
        while pending and time.time() - start < args.deadline_s:
            for entry in list(pending):
                status, x = call(base, "GET", f"/v1/explorations/{entry[2]}")
                if x["state"] in ("done", "failed", "cancelled"):
                    results[entry[2]] = x
                    pending.remove(entry)
                    print(f"{time.time() - start:6.0f} s: {entry[0]} {entry[1]} {x['state']}, "
                          f"measured {x.get('measured')}, failed {x.get('failed')}", flush=True)
            time.sleep(5)
        print(f"{'kernel':16} {'shape':28} {'dtype':9} {'best dt ms':>10} {'gpu':>8} {'host us':>8}"
              f"  {'peer':14} {'peer ms':>9} {'gpu':>8} {'host us':>8} {'dt/peer':>8}")
        for entry in posted:
            name, shape, eid = entry
            x = results.get(eid)
            if x is None:
                call(base, "POST", f"/v1/explorations/{eid}/cancel", {})
                print(f"{name:16} {str(shape):28} not finished in the deadline")
                bad += 1
                continue
            status, ranked = call(base, "GET", f"/v1/explorations/{eid}/schedules?limit=1")
            best = (ranked.get("schedules") or [{}])[0]
            b_ms, b_gpu, b_host = full_times(best.get("full") or best.get("screen"))
            peers = [(b["name"], full_times(b["measurement"])) for b in ranked.get("baselines", [])
                     if b["measurement"].get("protocol") == "full"
                     and b["measurement"].get("status") == "ok"]
            failed_peers = [f"{b['name']}: {b['measurement'].get('message', '')[:80]}"
                            for b in ranked.get("baselines", [])
                            if b["measurement"].get("status") not in (None, "ok")]
            peer = min(peers, key=lambda p: p[1][0] or 1e30) if peers else ("-", (None,) * 3)
            ratio = b_ms / peer[1][0] if b_ms and peer[1][0] else None
            shape_text = ",".join(f"{k}={v}" for k, v in shape.items())
            print(f"{name:16} {shape_text:28} {x['dtype']:9} {fmt(b_ms):>10} {fmt(b_gpu):>8} "
                  f"{fmt(b_host, 1):>8}  {peer[0]:14} {fmt(peer[1][0]):>9} {fmt(peer[1][1]):>8} "
                  f"{fmt(peer[1][2], 1):>8} {fmt(ratio, 3):>8}  [{x['state']}, measured "
                  f"{x.get('measured')}, failed {x.get('failed')}]")
            flop = attention_flop(name, shape)
            if flop is not None:
                print(f"{'':46} TFLOP/s: best {fmt(tflops(flop, b_ms), 1)}; " + "; ".join(
                    f"{pname} {fmt(tflops(flop, ms), 1)}" for pname, (ms, _, _) in peers))
            for pname, (ms, gpu, host) in peers:
                print(f"{'':46} baseline {pname:14} {fmt(ms):>9} {fmt(gpu):>8} {fmt(host, 1):>8}")
            for text in failed_peers:
                print(f"{'':46} baseline {text}")
            print(f"{'':46} best: {best.get('canonical')}")
            # Every schedule's times, where the device tool brings files back: what a later
            # look at the space (which choices won, what failed and why) reads.
            if os.environ.get("OUT"):
                status, columns = call(base, "GET", f"/v1/explorations/{eid}/columns")
                pathlib.Path(os.environ["OUT"], f"{name}_{eid}.json").write_text(
                    json.dumps({"shape": shape, "dtype": x["dtype"], "columns": columns,
                                "baselines": ranked.get("baselines", [])}))
            if x.get("failed"):
                failed = []
                for bad_status in ("compile_error", "out_of_resources", "runtime_error",
                                   "wrong_result", "timeout", "crashed"):
                    status, some = call(base, "GET", f"/v1/explorations/{eid}/schedules"
                                        f"?status={bad_status}&limit=3")
                    failed += some.get("schedules", [])
                for s in failed:
                    m = s.get("screen") or s.get("full") or {}
                    print(f"{'':46} failed: {s.get('canonical')}: {m.get('status')} "
                          f"{(m.get('message') or '')[:300]}")
            if x["state"] != "done" or x.get("failed", 0) or not x.get("measured"):
                bad += 1
                print(f"{'':46} message: {x.get('message')}")
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
