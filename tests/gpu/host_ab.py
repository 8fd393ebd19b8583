"""Two compilers' wrappers, host µs per call back to back, side by side (not a pytest test: run on
a machine with a CUDA GPU).

    python3 tests/gpu/host_ab.py OLD_DIR NEW_DIR NAME.py:SIZES [NAME.py:SIZES ...]

For each module NAME.py in both directories (the same program and schedule compiled by two
versions of dtc, e.g. with tests/gpu/prepare_ab.sh's A and B), in float32: both wrappers are
checked against the module's reference (first call and a later, lean one), then the lean calls
of both and torch's `x + 1` on a tensor of the output's size are timed in rounds, in a new random
order each round; the medians of the rounds are printed with new/old and each against `x + 1`.
The machine's host speed drifts by tens of percent between minutes, so only what is measured in
the same rounds is compared.
"""
import argparse
import pathlib
import random
import statistics
import sys

import torch
import triton

from gpu_common import load, per_call_us


def close(got, want):
    got, want = got.float(), want.float()
    return (got - want).norm().item() <= 5e-3 * (want.norm().item() or 1.0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("old", type=pathlib.Path)
    parser.add_argument("new", type=pathlib.Path)
    parser.add_argument("modules", nargs="+")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"triton {triton.__version__}")
    print("| module | sizes | kernels | old µs | new µs | new/old | x + 1 µs | old/(x+1) | new/(x+1) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    wrong = 0
    rng = random.Random(1)
    for spec in args.modules:
        name, _, sizes_text = spec.partition(":")
        sizes = {k: int(v) for k, v in (item.split("=") for item in sizes_text.split(",") if item)}
        runs = {}
        kernels = 0
        for side in ("old", "new"):
            path = getattr(args, side) / name
            module = load(path, f"{side}_{path.stem}")
            fn = getattr(module, module.COMPILED[0])
            inputs = module.make_inputs(sizes, dtype=torch.float32, device="cuda", seed=1)
            want = module.reference(*inputs)
            plans = getattr(module, "_dt_plans_" + fn.__name__)
            plans.clear()
            for call in ("first", "lean", "lean again"):
                if not close(fn(*inputs), want):
                    print(f"WRONG: {side} {name} {call} call")
                    wrong += 1
            kernels = len(next(iter(plans.values())).launches)
            runs[side] = (lambda f, i: lambda: f(*i))(fn, inputs)
            shape = want.shape
        x = torch.randn(shape, device="cuda")
        runs["x + 1"] = lambda: x + 1
        times = {side: [] for side in runs}
        for fn in runs.values():
            per_call_us(fn, 100)
        for _ in range(args.rounds):
            order = list(runs)
            rng.shuffle(order)
            for side in order:
                times[side].append(per_call_us(runs[side], args.calls))
        old, new, base = (statistics.median(times[s]) for s in ("old", "new", "x + 1"))
        print(f"| {name.removesuffix('.py')} | {sizes_text} | {kernels} | {old:.1f} | {new:.1f} | "
              f"{new / old:.2f} | {base:.1f} | {old / base:.2f} | {new / base:.2f} |", flush=True)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
