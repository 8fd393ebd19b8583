"""The wrappers' host cost on a GPU (not a pytest test: run on a machine with a CUDA GPU).

    python3 tests/gpu/gpu_host_path.py [--calls N] MODULE.py:SIZES [MODULE.py:SIZES ...]

SIZES is label=size,... (e.g. .gpu/softmax_rows.py:x=4096,y=512). For each module's first
compiled Func, in float32 and float16:

- checks the lean host path: the second call (launched from the plan, each kernel through its
  prepared launch, dt_launch.c) against the reference, on new values, with `out=`, on a
  transposed input (other metadata: the full path again) and from `CudaGraph`; and that the plan
  holds a prepared launch for every kernel (Triton's entry under DT_LAUNCHER=triton);
- times, side by side, µs per call back to back (calls queued without synchronizing, as a model
  makes them): the full path (the plan cache emptied before each call), the lean path, the lean
  path with `out=` given, a `CudaGraph` replay, and for scale torch's `x + 1` and `softmax` on a
  tensor of the same size, Triton's own `kernel[grid](...)` launch of the module's last kernel
  and that kernel's `CompiledKernel.run`;
- and the GPU time: do_bench median (25/100) and do_bench_cudagraph.

Prints one table; exits non-zero if a result is wrong.
"""
import argparse
import os
import pathlib
import sys

import torch
import triton
import triton.testing

from gpu_common import load
from gpu_common import per_call_us as one_run


def per_call_us(fn, calls):
    """µs per call of `fn` back to back: the median of 5 runs of `calls` calls, each run ended by a
    synchronization (so the GPU work is included where it is longer than the host's)."""
    fn()
    torch.cuda.synchronize()
    return sorted(one_run(fn, calls) for _ in range(5))[2]


def close(got, want, dtype, module):
    got, want = got.float(), want.float()
    if getattr(module, "DOT_PRECISION", None) in ("tf32", "tf32x3") or dtype != torch.float32:
        scale = want.norm().item() or 1.0
        return (got - want).norm().item() / scale < (5e-3 if dtype == torch.float32 else 1e-2)
    # Relative to the whole result: atomic sums change order between runs, so an element near
    # zero may differ from the reference by more than an element-wise tolerance allows.
    return (got - want).norm().item() <= 1e-5 * (want.norm().item() or 1.0)


def bare_launches(module, fn, inputs):
    """Triton's own launch, and CompiledKernel.run, of the module's last kernel, replayed with the
    arguments the wrapper passed it on the full path (where every pointer is a tensor, as
    Triton's launch needs; later calls pass temporaries as addresses)."""
    plans = getattr(module, "_dt_plans_" + fn.__name__)
    plans.clear()
    seen = {}
    plan_class = module._DtPlan
    original = plan_class.launch

    def spy(self, slot_, kernel, grid, args, num_warps, num_stages, varying):
        seen[slot_] = (kernel, grid, args, num_warps, num_stages)
        return original(self, slot_, kernel, grid, args, num_warps, num_stages, varying)

    plan_class.launch = spy
    try:
        fn(*inputs)
    finally:
        plan_class.launch = original
    plan = next(iter(plans.values()))
    kernel, grid, args, num_warps, num_stages = seen[max(plan.launches)]
    compiled = kernel[grid](*args, num_warps=num_warps, num_stages=num_stages)
    stream = triton.runtime.driver.active.get_current_stream
    device = torch.cuda.current_device()
    grid = tuple(grid) + (1,) * (3 - len(grid))

    def triton_launch():
        kernel[grid](*args, num_warps=num_warps, num_stages=num_stages)

    def compiled_run():
        compiled.run(*grid, stream(device), compiled.function, compiled.packed_metadata, None, None,
                     None, *args)

    return triton_launch, compiled_run


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("modules", nargs="+", help="MODULE.py:label=size,...")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--dtypes", default="float32,float16")
    args = parser.parse_args()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    head = ("module", "dtype", "kernels", "full", "lean", "lean out=", "graph", "x+1", "softmax",
            "k[grid]", "k.run", "bench ms", "gpu ms", "graph bench ms")
    print(" | ".join(head))
    print(" | ".join("---" for _ in head))
    failures = 0
    for spec in args.modules:
        path, _, sizes_text = spec.partition(":")
        module = load(path)
        fn = getattr(module, module.COMPILED[0])
        plans = getattr(module, "_dt_plans_" + fn.__name__)
        sizes = {k: int(v) for k, v in (item.split("=") for item in sizes_text.split(",") if item)}
        for dtype_name in args.dtypes.split(","):
            dtype = getattr(torch, dtype_name)
            inputs = module.make_inputs(sizes, dtype=dtype, device="cuda", seed=1)
            plans.clear()
            problems = []
            first = fn(*inputs)
            want = module.reference(*inputs)
            if not close(first, want, dtype, module):
                problems.append("first call")
            plan = next(iter(plans.values()))
            lean = fn(*inputs)
            if len(plans) != 1 or not close(lean, want, dtype, module):
                problems.append("second call")
            kernels = len(plan.launches)
            for tensor in inputs:
                if isinstance(tensor, torch.Tensor):
                    tensor.copy_(torch.randn_like(tensor))
            want2 = module.reference(*inputs)
            out = torch.full_like(first, float("nan"))
            if fn(*inputs, out=out) is not out or not close(out, want2, dtype, module):
                problems.append("out=")
            if not close(fn(*inputs), want2, dtype, module):
                problems.append("new values")
            moved = [t.t().contiguous().t() if isinstance(t, torch.Tensor) and t.dim() == 2 else t
                     for t in inputs]
            if not close(fn(*moved), want2, dtype, module):
                problems.append("transposed input")
            graph = module.CudaGraph(fn, *inputs)
            if not close(graph.replay(), want2, dtype, module):
                problems.append("CudaGraph")
            for tensor in inputs:
                if isinstance(tensor, torch.Tensor):
                    tensor.copy_(torch.randn_like(tensor))
            torch.cuda.synchronize()
            if not close(graph.replay(), module.reference(*inputs), dtype, module):
                problems.append("CudaGraph on new values")

            def full():
                plans.clear()
                fn(*inputs)

            x = torch.randn(first.shape, dtype=dtype, device="cuda")
            x2 = x.reshape(-1, first.shape[-1]) if first.dim() else x
            triton_launch, compiled_run = bare_launches(module, fn, inputs)
            row = [pathlib.Path(path).stem, dtype_name, str(kernels)]
            for timed in (full, lambda: fn(*inputs), lambda: fn(*inputs, out=out), graph.replay,
                          lambda: x + 1, lambda: torch.softmax(x2, -1), triton_launch, compiled_run):
                row.append(f"{per_call_us(timed, args.calls):.1f}")
            bench = triton.testing.do_bench(lambda: fn(*inputs), warmup=25, rep=100)
            gpu = triton.testing.do_bench_cudagraph(lambda: fn(*inputs), rep=100)
            graph_bench = triton.testing.do_bench(graph.replay, warmup=25, rep=100)
            row += [f"{bench:.4f}", f"{gpu:.4f}", f"{graph_bench:.4f}"]
            if kernels == 0:
                problems.append("no direct launch in the plan")
            launchers = sorted({type(launch).__name__ for launch in plan.launches.values()})
            if launchers != ["Launch"] and os.environ.get("DT_LAUNCHER") != "triton":
                problems.append(f"launched through {launchers}, not the prepared launcher")
            if problems:
                failures += 1
                row.append("WRONG: " + ", ".join(problems))
            print(" | ".join(row), flush=True)
    print("times: µs per call back to back (full: checks and Triton's launch; lean: from the plan)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
