"""Times many compiled schedules of one kernel at one shape on a GPU, against eager PyTorch (not a
pytest test: run on a machine with a CUDA GPU). For searching wider than an exploration's
budget, with modules compiled elsewhere (the GPU machine needs no dtc):

    dtx expand templates/2mm.yaml --shape m=1024,k=64,l=64,n=1024 --list | shuf -n 300 \
        --random-source=<(yes) | while read -r s; do dtc templates/2mm.dt --schedule "$s" -o ...; done
    python3 tests/gpu/sweep_schedules.py DIR --shape m=1024,k=64,l=64,n=1024 \
        --baseline 2mm --dtype bfloat16 [--top 5]

Each module of DIR is compiled and checked against its reference in a pool of processes (one per
CPU core, sharing Triton's cache), then screened one at a time in random order (do_bench 5/20
ms, as the explorer screens) for at most --first-pass-s seconds; the best `top`,
and the eager baseline of templates/baselines.py, are then timed again side by side, 5 rounds in
random order, with all three times: do_bench median (25/100), GPU-only, and host µs per call
back to back; with --compile, torch.compile of the baseline too. Prints the ranking and the
ratios to eager (GPU-only) and to torch.compile (do_bench).
"""
import argparse
import concurrent.futures
import multiprocessing
import os
import pathlib
import random
import statistics
import sys
import time

import torch
import triton
import triton.testing

from gpu_common import load, per_call_us

ROOT = pathlib.Path(__file__).resolve().parents[2]


def close(got, want, dtype):
    got, want = got.float(), want.float()
    scale = want.norm().item() or 1.0
    return (got - want).norm().item() / scale < (5e-3 if dtype == torch.float32 else 2e-2)


def compile_and_check(path, sizes, dtype_name):
    """In a pool process: compile (by calling once) and check. Returns (path, what went wrong)."""
    try:
        dtype = getattr(torch, dtype_name)
        module = load(path)
        fn = getattr(module, module.COMPILED[0])
        inputs = module.make_inputs(sizes, dtype=dtype, device="cuda", seed=1)
        got = fn(*inputs)
        return path, "" if close(got, module.reference(*inputs), dtype) else "wrong"
    except Exception as e:  # out of shared memory, a compile error: reported, the sweep goes on
        return path, f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"


def host_us(fn, calls=2000):
    """The median of three runs of µs per call back to back."""
    fn()
    torch.cuda.synchronize()
    return sorted(per_call_us(fn, calls) for _ in range(3))[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--shape", required=True)
    parser.add_argument("--baseline", required=True, help="a function of templates/baselines.py")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--top", type=int, default=5)
    parser.add_argument("--compile", action="store_true",
                        help="time torch.compile of the baseline too (default mode)")
    parser.add_argument("--workers", type=int, default=os.cpu_count(),
                        help="processes compiling and checking; each holds a set of inputs and "
                             "the reference's on the GPU (at 16384² float32, 4 fit an H100)")
    parser.add_argument("--first-pass-s", type=float, default=180,
                        help="stop the first pass's timing after this many seconds and rank "
                             "what was timed (the modules are in random order)")
    args = parser.parse_args()
    sizes = {k: int(v) for k, v in (item.split("=") for item in args.shape.split(","))}
    dtype = getattr(torch, args.dtype)
    paths = sorted(str(p) for p in pathlib.Path(args.dir).glob("*.py"))
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"triton {triton.__version__}; {len(paths)} modules, {args.dtype}, {args.shape}")
    start = time.time()
    context = multiprocessing.get_context("spawn")
    ok, failures = [], {}
    with concurrent.futures.ProcessPoolExecutor(args.workers, mp_context=context) as pool:
        for path, why in pool.map(compile_and_check, paths, [sizes] * len(paths),
                                  [args.dtype] * len(paths)):
            if why:
                failures[why.split(":")[0]] = failures.get(why.split(":")[0], 0) + 1
                if why == "wrong":
                    print("WRONG:", path)
            else:
                ok.append(path)
    print(f"compiled and checked: {len(ok)} correct, failures {failures}, "
          f"{time.time() - start:.0f} s")
    # The first pass screens as the explorer does (do_bench 5/20 ms), in random order, within
    # its time limit: a slow schedule costs tens of milliseconds a call.
    # The modules are schedules of one program: one set of inputs serves them all (made on the
    # CPU, 1 GiB takes seconds).
    results, inputs = [], None
    random.Random(1).shuffle(ok)
    timing_start = time.time()
    for path in ok:
        if time.time() - timing_start > args.first_pass_s:
            break
        module = load(path)
        fn = getattr(module, module.COMPILED[0])
        if inputs is None:
            inputs = module.make_inputs(sizes, dtype=dtype, device="cuda", seed=1)
        results.append((triton.testing.do_bench(lambda: fn(*inputs), warmup=5, rep=20), path))
    results.sort()
    print(f"first pass timed {len(results)} of {len(ok)}: {time.time() - start:.0f} s")
    baselines = load(ROOT / "templates" / "baselines.py")
    eager = getattr(baselines, args.baseline)
    best = [(pathlib.Path(p).stem, load(p)) for _, p in results[:args.top]]
    inputs = best[0][1].make_inputs(sizes, dtype=dtype, device="cuda", seed=1)
    want = eager(*inputs)
    runs = {"eager": lambda: eager(*inputs)}
    if args.compile:
        compiled = torch.compile(eager)
        if not close(compiled(*inputs), want, dtype):
            print("WRONG: torch.compile")
            return 1
        runs["torch.compile"] = lambda: compiled(*inputs)
    for name, module in best:
        fn = getattr(module, module.COMPILED[0])
        if not close(fn(*inputs), want, dtype):
            print("WRONG against eager:", name)
            return 1
        runs[name] = (lambda f: lambda: f(*inputs))(fn)
    times = {name: {"bench": [], "gpu": [], "host": []} for name in runs}
    rng = random.Random(1)
    for _ in range(5):
        order = list(runs)
        rng.shuffle(order)
        for name in order:
            fn = runs[name]
            times[name]["bench"].append(triton.testing.do_bench(fn, warmup=25, rep=100))
            times[name]["gpu"].append(triton.testing.do_bench_cudagraph(fn, rep=100))
            # About 0.2 s of calls back to back: 2000 calls of a millisecond kernel, 3 times a
            # round, would take the rounds past a device call's time.
            calls = max(20, min(2000, int(200 / times[name]["bench"][-1])))
            times[name]["host"].append(host_us(fn, calls))
    med = {n: {k: statistics.median(v) for k, v in t.items()} for n, t in times.items()}
    e = med["eager"]
    c = med.get("torch.compile")
    print("| schedule | first-pass bench µs | bench µs | GPU-only µs | host µs | GPU-only vs eager |"
          + (" bench vs torch.compile |" if c else ""))
    print("| --- | ---: | ---: | ---: | ---: | ---: |" + (" ---: |" if c else ""))
    first = {pathlib.Path(p).stem: ms for ms, p in results}
    for name in runs:
        m = med[name]
        print(f"| {name} | {first.get(name, float('nan')) * 1e3:.2f} | {m['bench'] * 1e3:.2f} | "
              f"{m['gpu'] * 1e3:.2f} | {m['host']:.1f} | {e['gpu'] / m['gpu']:.2f}x |"
              + (f" {m['bench'] / c['bench']:.3f}x |" if c else ""))
    for name, module in best:
        print(name, module.SCHEDULE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
