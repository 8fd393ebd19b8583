"""dtc's warp-specialized GEMM + bias + GELU on Hopper (`warp_specialize(k)`, printed in Gluon)
beside cuBLAS, torch.compile and the same schedules' Triton kernels (DT_GLUON=0).

Steps:
  make DIR   prints each schedule of SCHEDULES with dtc into DIR (needs build/compiler/dtc)
  time DIR   on a Hopper GPU: checks each module against float32 torch at a ragged shape and
             at the timed shapes (each in a child process: a kernel that hangs or faults costs
             only itself), then times the ones that pass, do_bench median and CUDA graph.
"""
import argparse
import json
import os
import sys

from gpu_common import bench_two_ways, checked, dtc, load

BASE = "out.block(m:{bm}, n:{bn}); out.tensorize(m:0, n:0, k:64); out.map(m:mi/8, n, mi); " \
       "mm.fuse_at(out, n); out.tma(A, W); out.persistent(interleaved); " \
       "out.num_warps({warps}); out.num_stages({stages})"
WS = "; out.warp_specialize(k{rows})"
SCHEDULES = {
    "triton best": BASE.format(bm=128, bn=128, warps=8, stages=4),
    "ws 128x128 w8 s4": BASE.format(bm=128, bn=128, warps=8, stages=4) + WS.format(rows=""),
    "ws 128x128 w8 s4 m:16": BASE.format(bm=128, bn=128, warps=8, stages=4)
    + WS.format(rows=", m:16"),
    "ws 128x256 w8 s3 m:8": BASE.format(bm=128, bn=256, warps=8, stages=3)
    + WS.format(rows=", m:8"),
    "ws 128x256 w8 s3 m:16": BASE.format(bm=128, bn=256, warps=8, stages=3)
    + WS.format(rows=", m:16"),
    "ws 128x256 w8 s3 m:32": BASE.format(bm=128, bn=256, warps=8, stages=3)
    + WS.format(rows=", m:32"),
    "ws 128x256 w8 s3": BASE.format(bm=128, bn=256, warps=8, stages=3) + WS.format(rows=""),
}
SHAPES = [(8192, 4096, 4096), (8192, 16384, 4096)]


def make(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for i, schedule in enumerate(SCHEDULES.values()):
        dtc("gemm_epilogue", schedule, os.path.join(out_dir, f"m{i}.py"))


def inputs(m, n, k):
    import torch
    g = torch.Generator(device="cuda").manual_seed(0)
    A = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    W = torch.randn(k, n, device="cuda", dtype=torch.bfloat16, generator=g) / 64
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=g)
    return A, W, bias


def check_each(configs, report, out_dir):
    import torch
    for config in configs:
        with report(config):
            os.environ["DT_GLUON"] = config["gluon"]
            module = load(os.path.join(out_dir, f"m{config['i']}.py"), f"m{config['i']}")
            ran = set()
            hopper = getattr(module, "out__kernel_hopper", None)
            if hopper is not None:  # which kernel each launch chose
                cls = type(hopper)
                chosen = cls.chosen
                cls.chosen = lambda self, args: ran.add(chosen(self, args).__class__.__name__) \
                    or chosen(self, args)
            errors = []
            for shape in [(1000, 1000, 520)] + SHAPES:
                A, W, bias = inputs(*shape)
                want = torch.nn.functional.gelu(A.float() @ W.float() + bias.float())
                got = module.out(A, W, bias).float()
                torch.cuda.synchronize()
                errors.append(float((got - want).norm() / want.norm()))
            report.result = (errors, sorted(ran))


def time_all(out_dir):
    import torch
    import triton
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}",
          flush=True)
    names = list(SCHEDULES)
    configs = [{"i": i, "gluon": g} for i in range(len(names)) for g in ("1", "0")
               if g == "1" or names[i] == "ws 128x128 w8 s4"]
    ok = []
    for config, (status, detail) in checked(check_each, configs, out_dir, limit_s=120):
        good = status == "ok" and max(detail[0]) < 5e-3
        print(f"{names[config['i']]} gluon={config['gluon']}: {status} {detail}", flush=True)
        if good:
            ok.append(config)

    def ms(fn):
        return bench_two_ways(fn, calls=10, warmup=25, rep=200)

    compiled = torch.compile(lambda A, W, b: torch.nn.functional.gelu(A @ W + b))
    modules = {(c["i"], c["gluon"]): load(os.path.join(out_dir, f"m{c['i']}.py"),
                                          f"t{c['i']}_{c['gluon']}") for c in ok}
    for shape in SHAPES:
        A, W, bias = inputs(*shape)
        flop = 2 * shape[0] * shape[1] * shape[2]
        rows = [("cuBLAS A @ W", ms(lambda: A @ W)),
                ("addmm + gelu", ms(lambda: torch.nn.functional.gelu(torch.addmm(bias, A, W)))),
                ("torch.compile", ms(lambda: compiled(A, W, bias)))]
        for config in ok:
            os.environ["DT_GLUON"] = config["gluon"]
            module = modules[config["i"], config["gluon"]]
            label = names[config["i"]] + ("" if config["gluon"] == "1" else " (Triton kernel)")
            rows.append((label, ms(lambda: module.out(A, W, bias))))
        print(f"\n{shape}: do_bench ms, GPU-only ms, TFLOP/s, / cuBLAS's bare product")
        for label, (t, g) in rows:
            print(f"  {label:38s} {t:8.4f} {g:8.4f} {flop / t / 1e9:7.1f} {t / rows[0][1][0]:6.3f}",
                  flush=True)
        print(json.dumps({"shape": shape, "rows": rows}))


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=["make", "time"])
    parser.add_argument("dir")
    a = parser.parse_args()
    make(a.dir) if a.step == "make" else time_all(a.dir)
