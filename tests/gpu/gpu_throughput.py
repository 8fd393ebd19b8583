#!/usr/bin/env python3
"""Measurement throughput on a GPU, through the built `dtx measure` (issue 8's targets).

    python3 tests/gpu/gpu_throughput.py [--dtx build/explorer/dtx] [--python python3]

Runs, each as one `dtx measure` process:
  * 64 distinct element-wise schedules (GeGLU 4096x4096 float16) with the full protocol
    (do_bench 25/100 ms) and 1, then 8 compile workers, and with screening settings (5/20);
  * 32 distinct tl.dot schedules (matmul 4096^3 float16) with 1 and 8 compile workers;
  * the element-wise conformance kernels at 4096x4096 with their baselines (the module's
    reference, torch eager and torch.compile from tests/gpu/baselines.py).
and prints schedules per minute after the first result, and the share of that time the timing
worker spent taking times. Writes each report's JSON beside it under $OUT (or /tmp)."""
import argparse
import itertools
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = pathlib.Path(os.environ.get("OUT", "/tmp")) / "throughput"


def elementwise_schedules():
    out = []
    for x, y, warps in itertools.product((1, 2, 4, 8), (128, 256, 512, 1024), (2, 4, 8, 16)):
        out.append(f"geglu.block(x:{x}, y:{y}); geglu.tensorize(x:0, y:0); "
                   f"geglu.num_warps({warps})")
    return out


def wide_elementwise_schedules():
    """120 distinct GeGLU schedules, for comparing one timing GPU with two."""
    out = []
    for x, y, warps in itertools.product((1, 2, 4, 8), (128, 256, 512, 1024, 2048),
                                         (1, 2, 4, 8, 16, 32)):
        out.append(f"geglu.block(x:{x}, y:{y}); geglu.tensorize(x:0, y:0); "
                   f"geglu.num_warps({warps})")
    return out


def dot_schedules():
    out = []
    for (bm, bn), bk, warps, stages in itertools.product(
            ((64, 64), (64, 128), (128, 64), (128, 128)), (32, 64), (4, 8), (3, 4)):
        out.append(f"C.block(m:{bm}, n:{bn}); C.tensorize(m:0, n:0, k:{bk}); "
                   f"C.num_warps({warps}); C.num_stages({stages})")
    return out


def measure(args, name, dt, shape, schedules=None, extra=()):
    OUT.mkdir(parents=True, exist_ok=True)
    cmd = [args.dtx, "measure", str(dt), "--shape", shape, "--json", "--python", args.python]
    if schedules is not None:
        path = OUT / f"{name}.schedules"
        path.write_text("\n".join(schedules) + "\n")
        cmd += ["--schedules", str(path)]
    cmd += list(extra)
    if args.worker:
        cmd += ["--worker", args.worker]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - start
    (OUT / f"{name}.stderr").write_text(proc.stderr)
    if proc.returncode not in (0, 1) or not proc.stdout.strip():
        print(f"{name}: dtx exited {proc.returncode}\n{proc.stderr[-3000:]}")
        return None
    report = json.loads(proc.stdout)
    (OUT / f"{name}.json").write_text(json.dumps(report, indent=1))
    results = [r for e in report["entries"] for r in e.get("results", [])]
    ok = [r for r in results if r["status"] == "ok"]
    statuses = {}
    for e in report["entries"]:
        statuses[e.get("status") or "?"] = statuses.get(e.get("status") or "?", 0) + 1
    steady = report["last_result_s"] - report["first_result_s"]
    timed = sum(r.get("timed_s", 0) for r in ok)
    first_timed = report.get("first_timed_s", 0)
    per_minute = (len(ok) - 1) * 60 / steady if steady > 0 and len(ok) > 1 else float("nan")
    workers = max(1, len(report.get("devices", [])))
    busy = (timed - first_timed) / steady / workers if steady > 0 else float("nan")
    ahead = sum(r.get("ahead_compile_s") or 0 for r in results)
    in_timing = sum(r.get("compile_s") or 0 for r in ok)
    readied = [r["prefetch_s"] for r in ok if r.get("prefetch_s") is not None]
    print(f"{name:34s} {len(ok):3d} ok of {len(results):3d}  wall {wall:6.1f} s  first result "
          f"{report['first_result_s']:5.1f} s  {per_minute:7.0f}/min  busy {100 * min(busy, 1):4.0f}%"
          f"  compile {ahead:6.1f} s ahead, {in_timing:5.2f} s in timing  {statuses}")
    arrived = sorted(r["arrived_s"] for r in ok if r.get("arrived_s") is not None)
    if len(arrived) > 2 and arrived[-2] > arrived[0]:
        # A batch ends with its slowest compile; an exploration of thousands hides it.
        print(f"{'':34s} without the last result: "
              f"{(len(arrived) - 2) * 60 / (arrived[-2] - arrived[0]):7.0f}/min")
    hosts = {}
    for r in ok:
        key = (r.get("worker_host"), r.get("worker_gpu"))
        hosts[key] = hosts.get(key, 0) + 1
    if any(k != (None, None) for k in hosts):
        print(f"{'':34s} results by (host, GPU): {sorted(hosts.items(), key=str)}")
    if readied:
        readied.sort()
        print(f"{'':34s} {len(readied)} readied ahead while the one before was timed "
              f"(median {readied[len(readied) // 2]:.4f} s each)")
    by_worker = {}
    for r in ok:
        if r.get("arrived_s") is not None:
            by_worker.setdefault(r.get("worker_pid"), []).append(r)
    for pid, rs in sorted(by_worker.items(), key=lambda kv: str(kv[0])):
        rs.sort(key=lambda r: r["arrived_s"])
        gaps = [b["arrived_s"] - a["arrived_s"] for a, b in zip(rs, rs[1:])]
        if gaps:
            gaps.sort()
            print(f"{'':34s} worker {pid}: {len(rs)} results, gap between results median "
                  f"{gaps[len(gaps) // 2]:.3f} s (worker wall median "
                  f"{sorted(r['wall_s'] for r in rs)[len(rs) // 2]:.3f} s), first "
                  f"{rs[0]['arrived_s']:.1f} s, last {rs[-1]['arrived_s']:.1f} s")
    if ok:
        per = sorted(r.get("timed_s", 0) for r in ok)
        walls = sorted(r.get("wall_s", 0) for r in ok)
        print(f"{'':34s} per result: timed {per[len(per) // 2]:.3f} s median, worker wall "
              f"{walls[len(walls) // 2]:.3f} s median")
    return report


def compare_times(name, reports):
    """Each schedule's bench median with prefetching against without (medians over the runs):
    readying the next request must not change the times taken."""
    def medians(rs):
        by = {}
        for report in rs:
            for e in (report or {}).get("entries", []):
                if e.get("status") == "ok":
                    by.setdefault(e["label"], []).append(e["times"]["bench"]["mean"])
        return {k: sorted(v)[len(v) // 2] for k, v in by.items()}
    on, off = medians(reports[True]), medians(reports[False])
    ratios = sorted(on[k] / off[k] for k in on if k in off and off[k] > 0)
    if ratios:
        print(f"{name}: bench time with / without prefetch over {len(ratios)} schedules: "
              f"median {ratios[len(ratios) // 2]:.4f}, min {ratios[0]:.4f}, max {ratios[-1]:.4f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtx", default=str(ROOT / "build" / "explorer" / "dtx"))
    parser.add_argument("--python", default="python3")
    parser.add_argument("--only", default="")
    parser.add_argument("--compile-workers", default="24")
    parser.add_argument("--worker", default="", help="another worker script (an A/B run)")
    parser.add_argument("--two-gpus", action="store_true",
                        help="only compare one timing GPU with two (on a two-GPU machine)")
    parser.add_argument("--ray-address", default="",
                        help="with --two-gpus: measure once through this Ray cluster (as many "
                             "timing GPUs as it has) instead of the local pool")
    parser.add_argument("--label", default="", help="names the --ray-address run")
    parser.add_argument("--prefetch-ab", type=int, default=0, metavar="N",
                        help="run each selected run N times with the timing worker readying "
                             "its next request and N times without (--no-prefetch), "
                             "alternating, and compare the schedules' times")
    args = parser.parse_args()
    if args.two_gpus:
        wide = wide_elementwise_schedules()
        assert len(set(wide)) == 120
        print(f"{'run':34s} results, wall, time to the first result, steady throughput, busy")
        if args.ray_address:
            measure(args, f"elementwise_120_full_ray_{args.label}", ROOT / "examples" / "geglu.dt",
                    "x=4096,y=4096", wide,
                    ["--warmup", "25", "--rep", "100", "--backend", "ray", "--ray-address",
                     args.ray_address, "--ray-compile-per-node", args.compile_workers,
                     "--dtype", "float16"])
            return 0
        for gpus in ("0", "0,1"):
            measure(args, f"elementwise_120_full_gpus_{gpus.replace(',', '_')}",
                    ROOT / "examples" / "geglu.dt", "x=4096,y=4096", wide,
                    ["--warmup", "25", "--rep", "100", "--compile-workers", args.compile_workers, "--gpus", gpus,
                     "--dtype", "float16"])
        return 0
    geglu = ROOT / "examples" / "geglu.dt"
    matmul = ROOT / "tests" / "gpu" / "matmul.dt"
    e, d = elementwise_schedules(), dot_schedules()
    assert len(set(e)) == 64 and len(set(d)) == 32
    full = ["--warmup", "25", "--rep", "100"]
    screen = ["--warmup", "5", "--rep", "20"]
    runs = [
        ("elementwise full, 1 compile", geglu, "x=4096,y=4096", e, full + ["--compile-workers", "1"]),
        ("elementwise full, 8 compile", geglu, "x=4096,y=4096", e, full + ["--compile-workers", "8"]),
        ("elementwise screen, 8 compile", geglu, "x=4096,y=4096", e, screen + ["--compile-workers", "8"]),
        ("dot full, 1 compile", matmul, "m=4096,n=4096,k=4096", d, full + ["--compile-workers", "1"]),
        ("dot full, 8 compile", matmul, "m=4096,n=4096,k=4096", d, full + ["--compile-workers", "8"]),
    ]
    print(f"{'run':34s} results, wall, time to the first result, steady throughput, GPU busy")
    for name, dt, shape, schedules, extra in runs:
        if args.only and args.only not in name:
            continue
        tag = name.replace(" ", "_").replace(",", "")
        if not args.prefetch_ab:
            measure(args, tag, dt, shape, schedules, extra + ["--dtype", "float16"])
            continue
        reports = {True: [], False: []}
        for i in range(args.prefetch_ab):
            for prefetch in (True, False):
                flag = [] if prefetch else ["--no-prefetch"]
                print(f"  {'prefetch' if prefetch else 'no prefetch'}, run {i + 1}:")
                reports[prefetch].append(measure(
                    args, f"{tag}_{'prefetch' if prefetch else 'noprefetch'}_{i}", dt, shape,
                    schedules, extra + ["--dtype", "float16"] + flag))
        compare_times(name, reports)
    if not args.only or "conformance" in args.only:
        baselines = ROOT / "tests" / "gpu" / "baselines.py"
        # The files' own schedules where they are parallel; the thesis prints sequential ones
        # (no block) for swish and fma, which a GPU runs in one program instance.
        for stem, func, schedule in (
                ("l4_01_geglu", "geglu", None), ("l3_01_add_out", "add_out", None),
                ("l3_10_relu_block_tensorize", "relu", None),
                ("l3_12_swish", "swish", "swish_out.block(x:1, y:1024); "
                 "swish_out.tensorize(x:0, y:0); tmp.fuse_at(swish_out, x)"),
                ("fma", "fma", "f.block(x:1, y:1024); f.tensorize(x:0, y:0)")):
            dt = ROOT / "tests" / "conformance" / f"{stem}.dt"
            shape = "x=4096,y=4096"
            report = measure(args, f"conformance_{stem}", dt, shape,
                             None if schedule is None else [schedule],
                             ["--dtype", "float16", "--timeout", "60", "--baseline", "reference",
                              "--baseline", f"{baselines}:torch_{func}",
                              "--baseline", f"{baselines}:torch_{func}:compile",
                              "--protocol", "thesis", "--rounds", "3", "--times", "bench,gpu,host"])
            if report:
                for entry in report["entries"]:
                    t = entry.get("times", {})
                    cells = "  ".join(f"{k} {t[k]['mean']:.4g}" for k in ("bench", "gpu", "host")
                                      if k in t)
                    print(f"    {entry.get('label') or entry.get('schedule'):40.40s} "
                          f"{entry.get('status')}  {cells}")


if __name__ == "__main__":
    sys.exit(main())
