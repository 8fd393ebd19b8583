"""Where a wrapper's host microseconds go (not a pytest test: run on a machine with a CUDA GPU).

    python3 tests/gpu/host_costs.py MODULE.py:SIZES [--calls N] [--rounds R]

For the module's first compiled Func at SIZES (float32): times, µs per call back to back, the
lean call and each piece of it on its own: the plan key, the plan lookup, the output's
allocation, the stream lookup, the launch-hook check, and the last kernel's launch: prepared
(dt_launch.c, passed what changes per call) and through Triton's launcher entry with every
argument, tensors or their addresses; beside them torch's `x + 1`. The
pieces are timed in rounds, in a new random order each round, and the median of the rounds is
printed, so that the machine's drift touches all alike.
"""
import argparse
import pathlib
import random
import statistics

import torch
import triton

from gpu_common import load, per_call_us


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("module")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    path, _, sizes_text = args.module.partition(":")
    module = load(path)
    fn = getattr(module, module.COMPILED[0])
    sizes = {k: int(v) for k, v in (item.split("=") for item in sizes_text.split(",") if item)}
    inputs = module.make_inputs(sizes, dtype=torch.float32, device="cuda", seed=1)
    tensors = tuple(t for t in inputs if isinstance(t, torch.Tensor))
    out = fn(*inputs)
    plans = getattr(module, "_dt_plans_" + fn.__name__)
    seen = {}
    original = module._DtPlan.launch

    def spy(self, slot, kernel, grid, launch_args, num_warps, num_stages, varying):
        seen[slot] = (kernel, grid, launch_args, num_warps, num_stages, varying)
        return original(self, slot, kernel, grid, launch_args, num_warps, num_stages, varying)

    module._DtPlan.launch = spy
    plans.clear()  # the full path launches through the plan, with the arguments it passes
    try:
        fn(*inputs)
    finally:
        module._DtPlan.launch = original
    fn(*inputs)
    key = next(iter(plans))
    plan = plans[key]
    slot = max(plan.launches)
    prepared = plan.launches[slot]
    stream, device = plan.stream, plan.device_index
    kernel, grid, launch_args, num_warps, num_stages, varying = seen[slot]
    addresses = tuple(a.data_ptr() if isinstance(a, torch.Tensor) else a for a in launch_args)
    changing = tuple(addresses[i] for i in varying)
    # Triton's launcher entry, called as it was before the prepared launch (every argument).
    compiled = kernel[grid](*launch_args, num_warps=num_warps, num_stages=num_stages)
    launcher = compiled.run
    entry, (g0, g1, g2) = launcher.launch, tuple(grid) + (1,) * (3 - len(grid))
    rest = (compiled.function, launcher.launch_cooperative_grid, launcher.launch_pdl, None, None,
            compiled.packed_metadata, None, None, None)
    sizes_none = (None,) * len(module.SIZE_KEYWORDS)
    x = torch.randn(out.shape, device="cuda")
    a0 = tensors[0]
    shape, dtype, device_ = tuple(out.shape), out.dtype, out.device
    pieces = {
        "lean call": lambda: fn(*inputs),
        "x + 1": lambda: x + 1,
        "_dt_key": lambda: module._dt_key(tensors, sizes_none, None),
        "key of one tensor, inline": lambda: (a0.shape, a0.stride(), a0.dtype, a0.device,
                                              a0.data_ptr() % 16, a0.is_neg()),
        "plans.get(key)": lambda: plans.get(key),
        "torch.empty(*shape, dtype=, device=)": lambda: torch.empty(*shape, dtype=dtype,
                                                                     device=device_),
        "input.new_empty(*shape)": lambda: a0.new_empty(*shape),
        "torch.empty_like(input)": lambda: torch.empty_like(a0),
        "stream lookup": lambda: stream(device),
        "_dt_hooked()": module._dt_hooked,
        "plan.direct()": plan.direct,
        f"prepared launch ({type(prepared).__name__})": lambda: prepared(stream(device),
                                                                         *changing),
        "Triton's entry, tensors": lambda: entry(g0, g1, g2, stream(device), *rest, *launch_args),
        "Triton's entry, addresses": lambda: entry(g0, g1, g2, stream(device), *rest, *addresses),
    }
    results = {name: [] for name in pieces}
    rng = random.Random(1)
    for name in pieces:
        pieces[name]()
    torch.cuda.synchronize()
    for _ in range(args.rounds):
        order = list(pieces)
        rng.shuffle(order)
        for name in order:
            results[name].append(per_call_us(pieces[name], args.calls))
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"triton {triton.__version__}; {pathlib.Path(path).stem} {sizes_text}")
    print("| piece | µs per call (median of rounds) | min | max |")
    print("| --- | ---: | ---: | ---: |")
    for name, runs in results.items():
        print(f"| {name} | {statistics.median(runs):.2f} | {min(runs):.2f} | {max(runs):.2f} |")


if __name__ == "__main__":
    main()
