"""GPU benchmark (not a test): a matrix product written as rdot against torch.mm at equal
precision, measured side by side in one run.

    python3 tests/gpu/gpu_matmul.py TF32_MODULE.py IEEE_MODULE.py [--sizes 4096,8192]

TF32_MODULE is tests/gpu/matmul.dt compiled as is; IEEE_MODULE the same with
`--schedule "...; C.precision(ieee)"`. Prints, per size, each kernel's median time, torch.mm's
with TF32 on and off, the ratios, and each result's relative error against a float64 product.
"""
import argparse

import torch
import triton

from gpu_common import load


def rel_err(got, want):
    return ((got.double() - want).norm() / want.norm()).item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("tf32_module")
    parser.add_argument("ieee_module")
    parser.add_argument("--sizes", default="4096,8192")
    args = parser.parse_args()
    tf32, ieee = load(args.tf32_module), load(args.ieee_module)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    print(f"schedule: {tf32.SCHEDULE}")
    print(f"{'size':>6} {'precision':>9} {'dtc ms':>9} {'torch.mm ms':>12} {'dtc/torch':>10} "
          f"{'dtc TFLOP/s':>12} {'dtc rel err':>12} {'torch rel err':>14}")
    for n in (int(s) for s in args.sizes.split(",")):
        gen = torch.Generator(device="cuda").manual_seed(n)
        a = torch.randn((n, n), device="cuda", generator=gen)
        b = torch.randn((n, n), device="cuda", generator=gen)
        exact = a.double() @ b.double()
        for name, module, allow_tf32 in (("tf32", tf32, True), ("ieee", ieee, False)):
            torch.backends.cuda.matmul.allow_tf32 = allow_tf32
            ours = module.C(a, b)
            theirs = torch.mm(a, b)
            ours_ms = triton.testing.do_bench(lambda: module.C(a, b), return_mode="median")
            torch_ms = triton.testing.do_bench(lambda: torch.mm(a, b), return_mode="median")
            tflops = 2 * n ** 3 / ours_ms / 1e9
            print(f"{n:6d} {name:>9} {ours_ms:9.3f} {torch_ms:12.3f} {ours_ms / torch_ms:10.2f} "
                  f"{tflops:12.1f} {rel_err(ours, exact):12.2e} {rel_err(theirs, exact):14.2e}", flush=True)
        del exact


if __name__ == "__main__":
    main()
