#!/usr/bin/env python3
"""The worker's `bench_cuda` against `triton.testing.do_bench` on a CUDA GPU, side by side.

    python3 tests/gpu/gpu_bench_procedure.py

`bench_cuda` (src/dtx/worker.py) is do_bench's procedure written out so that the
timing worker can ready its next request once the last repetition is enqueued. For kernels
from host-bound to long, with the thesis' settings (25/100) and screening settings (5/20), it
takes each time with do_bench, with bench_cuda, and with bench_cuda busy for 15 ms of Python
and a module import in `while_waiting`, alternating, and prints the median ratios to do_bench.
Exits 1 when a median ratio of a GPU-bound kernel is off by more than 3%."""
import importlib.util
import pathlib
import statistics
import sys
import time

import torch
import triton
import triton.testing

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("dtx_worker", ROOT / "src" / "dtx" / "worker.py")
worker = importlib.util.module_from_spec(spec)
spec.loader.exec_module(worker)


def busy():
    """Host work like readying a request: pure Python for 15 ms, and an import."""
    end = time.perf_counter() + 0.015
    while time.perf_counter() < end:
        sum(range(1000))
    importlib.import_module("json")  # cached, but goes through the import machinery


def main():
    dev = torch.device("cuda")
    small = torch.randn(256, 256, device=dev)
    mid = torch.randn(4096, 4096, device=dev, dtype=torch.float16)
    a = torch.randn(4096, 4096, device=dev, dtype=torch.float16)
    cases = {
        "x + 1 at 256x256 (host-bound)": lambda: small + 1,
        "x * 2 at 4096x4096 float16": lambda: mid * 2,
        "softmax 4096x4096 float16": lambda: torch.softmax(mid, dim=1),
        "matmul 4096^3 float16": lambda: a @ a,
    }
    bad = False
    print(f"{'kernel':34s} {'settings':8s} {'do_bench ms':>12s} {'bench_cuda':>11s} "
          f"{'busy wait':>10s}")
    for name, fn in cases.items():
        for warmup, rep in ((25, 100), (5, 20)):
            ref, plain, waited = [], [], []
            for _ in range(5):
                ref.append(statistics.median(
                    triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="all")))
                samples, _ = worker.bench_cuda(fn, warmup, rep)
                plain.append(statistics.median(samples))
                samples, _ = worker.bench_cuda(fn, warmup, rep, busy)
                waited.append(statistics.median(samples))
            r = statistics.median(ref)
            p, w = statistics.median(plain) / r, statistics.median(waited) / r
            print(f"{name:34s} {warmup}/{rep:<5d} {r:12.5f} {p:10.3f}x {w:9.3f}x")
            if "host-bound" not in name:  # a host-bound time moves with the host's jitter
                bad |= abs(p - 1) > 0.03 or abs(w - 1) > 0.03
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
