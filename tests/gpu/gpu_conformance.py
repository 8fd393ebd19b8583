"""GPU check of generated modules (not a pytest test: run on a machine with a CUDA GPU).

    python3 tests/gpu/gpu_conformance.py --size 4096 MODULE.py [MODULE.py ...]

For each module: runs its first compiled Func on random CUDA inputs with every dimension at
--size (or --sizes x=...,y=...), compares with the module's PyTorch reference on the same GPU,
and times kernel and reference side by side with triton.testing.do_bench (median). Prints one
line per module and dtype and exits non-zero if any result mismatches.
"""
import argparse
import pathlib
import sys
import time

import torch
import triton

from gpu_common import load


NORM_TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}
TOLERANCE = {torch.float32: (1e-4, 1e-5), torch.float16: (1e-2, 1e-2), torch.bfloat16: (5e-2, 5e-2)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("modules", nargs="+")
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--sizes", default="", help="per-label sizes, e.g. x=4096,k=65536")
    parser.add_argument("--dtypes", default="float32,float16")
    parser.add_argument("--no-timing", action="store_true")
    args = parser.parse_args()
    overrides = dict(item.split("=") for item in args.sizes.split(",") if item)
    failures = 0
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    print(f"{'module':34} {'dtype':9} {'sizes':22} {'max|err|':>10} {'kernel ms':>10} {'torch ms':>10} {'ratio':>6}")
    for path in args.modules:
        module = load(path)
        name = module.COMPILED[0]
        wrapper = getattr(module, name)
        sizes = {label: int(overrides.get(label, args.size)) for label in module.SIZE_KEYWORDS}
        kwargs = {module.SIZE_KEYWORDS[k]: v for k, v in sizes.items()}
        for dtype_name in args.dtypes.split(","):
            dtype = getattr(torch, dtype_name)
            inputs = module.make_inputs(sizes, dtype=dtype, device="cuda", seed=1)
            start = time.perf_counter()
            got = wrapper(*inputs, **kwargs)
            torch.cuda.synchronize()
            first_ms = (time.perf_counter() - start) * 1e3
            want = module.reference(*inputs, **kwargs)
            rtol, atol = TOLERANCE[dtype]
            err = (got.float() - want.float()).abs().nan_to_num(0.0).max().item()
            status = ""
            if getattr(module, "DOT_PRECISION", None) in ("tf32", "tf32x3"):
                # TF32 products round operands to 10-bit mantissas: compare in norm.
                rel = ((got.double() - want.double()).norm() / want.double().norm()).item()
                if not rel < 5e-3:
                    failures += 1
                    status = f"  MISMATCH relative error {rel:.2e} (TF32)"
            else:
                try:
                    torch.testing.assert_close(got.float(), want.float(), rtol=rtol, atol=atol, equal_nan=True)
                except AssertionError as e:
                    # Long reductions sum in another order than torch: judge them in norm.
                    rel = ((got.double() - want.double()).norm() / want.double().norm()).item()
                    if not rel < NORM_TOLERANCE[dtype]:
                        failures += 1
                        status = "  MISMATCH " + str(e).splitlines()[0]
                    else:
                        status = f"  (relative error {rel:.1e} in norm)"
            # Schedules that run the whole tensor in one program instance take seconds: time once.
            if args.no_timing:
                timing = f"{'-':>10} {'-':>10} {'-':>6}"
            elif first_ms < 2000:
                kernel_ms = triton.testing.do_bench(lambda: wrapper(*inputs, **kwargs), return_mode="median")
                torch_ms = triton.testing.do_bench(lambda: module.reference(*inputs, **kwargs), return_mode="median")
                timing = f"{kernel_ms:10.4f} {torch_ms:10.4f} {kernel_ms / torch_ms:6.2f}"
            else:
                timing = f"{'~' + format(first_ms, '.0f'):>10} {'':>10} {'':>6}  (one run; compile included)"
            size_text = ",".join(f"{k}={v}" for k, v in sizes.items())
            print(f"{pathlib.Path(path).stem:34} {dtype_name:9} {size_text:22} {err:10.2e} {timing}{status}", flush=True)
    print(f"{failures} failed" if failures else "all matched")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
