"""GPU benchmark (not a test): the same programs and schedules compiled by two versions of the
compiler, timed side by side in one run, with torch beside them.

    python3 tests/gpu/gpu_ab.py DIR_A DIR_B NAME:SIZES:DTYPE [NAME:SIZES:DTYPE ...]

DIR_A and DIR_B hold a module NAME.py each (tests/gpu/prepare.sh with each compiler); SIZES is
`x=4096,y=4096` (labels not named take the first size given). For each case: both modules' first
compiled Func on the same CUDA inputs, each checked against the module's PyTorch reference, then
timed in alternation (5 rounds of triton.testing.do_bench, 25 ms warm-up and 100 ms of
repetitions, the median of the rounds' medians), and GPU-only (do_bench_cudagraph). Also times
torch: the module's reference, or for a matrix product torch.matmul (cuBLAS). Prints B/A.
"""
import argparse
import importlib.util
import pathlib
import statistics
import sys

import torch
import triton
import triton.testing


def load(path, tag):
    spec = importlib.util.spec_from_file_location(f"{tag}_{pathlib.Path(path).stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOLERANCE = {torch.float32: 2e-2, torch.float16: 2e-2, torch.bfloat16: 5e-2}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir_a")
    parser.add_argument("dir_b")
    parser.add_argument("cases", nargs="+")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"triton {triton.__version__}")
    print(f"{'case':44} {'A ms':>9} {'B ms':>9} {'B/A':>6} {'A graph':>9} {'B graph':>9} "
          f"{'B/A':>6} {'torch ms':>9} {'B/torch':>7}")
    failed = 0
    for case in args.cases:
        name, sizes_text, dtype_name = case.split(":")
        dtype = getattr(torch, dtype_name)
        a = load(pathlib.Path(args.dir_a) / f"{name}.py", "a")
        b = load(pathlib.Path(args.dir_b) / f"{name}.py", "b")
        given = dict(item.split("=") for item in sizes_text.split(","))
        first = int(next(iter(given.values())))
        sizes = {label: int(given.get(label, first)) for label in a.SIZE_KEYWORDS}
        kwargs = {a.SIZE_KEYWORDS[k]: v for k, v in sizes.items()}
        inputs = a.make_inputs(sizes, dtype=dtype, device="cuda", seed=1)
        fa = getattr(a, a.COMPILED[0])
        fb = getattr(b, b.COMPILED[0])
        want = a.reference(*inputs, **kwargs).float()
        scale = want.abs().max().item() or 1.0
        for tag, f in (("A", fa), ("B", fb)):
            err = (f(*inputs, **kwargs).float() - want).abs().max().item() / scale
            if not err <= TOLERANCE[dtype]:
                print(f"  {name} {tag}: max error {err:.2e} of the largest value: MISMATCH")
                failed += 1
        torch_fn = lambda: a.reference(*inputs, **kwargs)  # noqa: E731
        if name.startswith("matmul"):
            A, B = inputs
            torch_fn = lambda: torch.matmul(A, B)  # noqa: E731
        times = {"A": [], "B": [], "torch": []}
        for _ in range(args.rounds):
            for tag, f in (("A", fa), ("B", fb), ("torch", torch_fn)):
                call = (lambda f=f: f(*inputs, **kwargs)) if tag != "torch" else f
                times[tag].append(triton.testing.do_bench(call, warmup=25, rep=100))
        graph = {tag: triton.testing.do_bench_cudagraph(lambda f=f: f(*inputs, **kwargs), rep=100)
                 for tag, f in (("A", fa), ("B", fb))}
        ta, tb, tt = (statistics.median(times[t]) for t in ("A", "B", "torch"))
        label = f"{name} {sizes_text} {dtype_name}"
        print(f"{label:44} {ta:9.4f} {tb:9.4f} {tb / ta:6.3f} {graph['A']:9.4f} "
              f"{graph['B']:9.4f} {graph['B'] / graph['A']:6.3f} {tt:9.4f} {tb / tt:7.3f}",
              flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
