"""ReLU² at the copy roofline: dtc's best 2-D kernels against torch.compile's and against a 1-D
kernel over the flattened tensor written by hand the way Inductor writes one (contiguous blocks
of 1024 to 4096 elements), to see whether the space's 2-D blocks cost the last percent.
do_bench medians (the better of two rounds) and GPU-only times (CUDA graphs); torch.compile's
generated code is written to $OUT (or the directory given). Benchmarks, not tests.

    python3 tests/gpu/eltwise_ab.py make .gpu/eltwise_ab     # here: needs build/compiler/dtc
    python3 tests/gpu/eltwise_ab.py time .gpu/eltwise_ab     # there
"""
import os
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from gpu_common import ROOT, load  # noqa: E402

SCHEDULES = {
    "4x512_w8": "relu_squared.block(x:4, y:512); relu_squared.tensorize(x:0, y:0); relu_squared.map(x, y); relu_squared.num_warps(8)",
    "1x1024_w8": "relu_squared.block(x:1, y:1024); relu_squared.tensorize(x:0, y:0); relu_squared.map(x, y); relu_squared.num_warps(8)",
    "1x1024_w4": "relu_squared.block(x:1, y:1024); relu_squared.tensorize(x:0, y:0); relu_squared.map(x, y); relu_squared.num_warps(4)",
    "2x1024_w8": "relu_squared.block(x:2, y:1024); relu_squared.tensorize(x:0, y:0); relu_squared.map(x, y); relu_squared.num_warps(8)",
}
SHAPES = [(16384, 4096), (4096, 14336)]


def make(out):
    out.mkdir(parents=True, exist_ok=True)
    for name, schedule in SCHEDULES.items():
        subprocess.run([str(ROOT / "build" / "compiler" / "dtc"), str(ROOT / "templates" / "relu_squared.dt"),
                        "-o", str(out / f"rs__{name}.py"), "--schedule", schedule], check=True)


def time(out):
    import torch
    import triton
    import triton.language as tl
    from torch._inductor.utils import run_and_get_code
    from triton.testing import do_bench, do_bench_cudagraph

    @triton.jit
    def flat(a_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        a = tl.load(a_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        r = tl.maximum(a, 0.0)
        tl.store(out_ptr + offs, (r * r).to(out_ptr.dtype.element_ty), mask=mask)

    def flat_call(block, warps):
        def run(A):
            out = torch.empty_like(A)
            flat[(triton.cdiv(A.numel(), block),)](A, out, A.numel(), BLOCK=block, num_warps=warps)
            return out
        return run

    def eager(A):
        return torch.square(torch.relu(A.float())).to(A.dtype)

    dump = pathlib.Path(os.environ.get("OUT", out))
    compiled = torch.compile(eager)
    modules = {name: load(out / f"rs__{name}.py") for name in SCHEDULES}
    for x, y in SHAPES:
        A = torch.randn(x, y, device="cuda").bfloat16()
        want = eager(A)
        _, code = run_and_get_code(compiled, A)
        (dump / f"inductor_relu_squared_{x}x{y}.py").write_text("\n\n# ----\n\n".join(code))
        calls = {"torch.compile": lambda: compiled(A), "clone": lambda: A.clone()}
        for name, m in modules.items():
            calls[f"dt {name}"] = (lambda m: lambda: m.relu_squared(A))(m)
        for block in (1024, 2048, 4096):
            for warps in (4, 8):
                calls[f"flat {block} w{warps}"] = (lambda f: lambda: f(A))(flat_call(block, warps))
        print(f"relu_squared {x}x{y}", flush=True)
        for name, fn in calls.items():
            if name != "clone":
                torch.testing.assert_close(fn().float(), want.float(), rtol=0, atol=0)
            bench = min(do_bench(fn, warmup=25, rep=500, return_mode="median") for _ in range(2))
            gpu = min(do_bench_cudagraph(fn, rep=200, return_mode="median") for _ in range(2))
            print(f"  {name:18s} do_bench {bench:.4f}  gpu {gpu:.4f}", flush=True)
        del A, want
        torch.cuda.empty_cache()


if __name__ == "__main__":
    {"make": make, "time": time}[sys.argv[1]](pathlib.Path(sys.argv[2]))
