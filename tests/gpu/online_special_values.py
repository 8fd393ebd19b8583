"""GPU check (not a test): special values through the online loop's Gluon form on Hopper. With
a query row of 1e20, an infinite and a NaN query element and a key row of -inf (the inputs of
tests/e2e/test_online.py's special-values test), the rows that come out NaN, and the distance
to attention in float64 on the CPU, for the Gluon kernel (DT_GLUON=1), the Triton kernel
(DT_GLUON=0) and the module's reference evaluated on the GPU. Row 3 (the query of 1e20) is
finite in float64: on an H200 both kernels gave it NaN while the scores' product was fused into a
multiply-add with the subtraction of the maximum; with the product rounded on its own (the
kernel pass round, kir/RoundBeforeShift.h) every row of both matches float64.

    python3 tests/gpu/online_special_values.py make [.gpu/nan]     (here: the modules)
    python3 tests/gpu/online_special_values.py run [.gpu/nan]      (on the GPU)
"""
import argparse
import importlib.util
import os
import pathlib
import subprocess
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROGRAM = """Func out, qk, mx, e, s, p;
In Q, K, V;
Var m, n;
RVar k, l;
qk[m, l] = rdot(Q[m, k], K[l, k], k) / sqrt(len(k));
mx[m] = rmax(qk[m, l], l);
e[m, l] = exp(qk[m, l] - mx[m]);
s[m] = rsum(e[m, l], l);
p[m, l] = e[m, l] / s[m];
out[m, n] = rdot(p[m, l], V[l, n], l);
out.compile();
"""
FUSED = ("p.fuse_at(out, m); e.fuse_at(out, m); s.fuse_at(out, m); qk.fuse_at(out, m); "
         "mx.fuse_at(out, m); out.online(l); out.tma(Q, K, V); out.warp_specialize(l); "
         "out.tensorize(m:0, n:0, k:0, l:64); out.num_stages(2); ")
MODULES = {"m64": "out.block(m:64); out.num_warps(4)", "m128": "out.block(m:128); out.num_warps(8)"}


def inputs():
    torch.manual_seed(11)
    Q, K, V = torch.randn(150, 64), torch.randn(140, 64), torch.randn(140, 64)
    Q[1, 3] = float("inf")
    K[7, 3] = 0.0
    Q[2, 5] = float("nan")
    Q[3] = 1e20
    Q[4] = 0.0
    K[9] = float("-inf")
    return [t.bfloat16() for t in (Q, K, V)]


def make(out):
    out.mkdir(parents=True, exist_ok=True)
    for name, schedule in MODULES.items():
        subprocess.run([str(ROOT / "build/compiler/dtc"), "-", "-o", str(out / f"{name}.py"),
                        "--schedule", FUSED + schedule], input=PROGRAM, text=True, check=True)


def one(path, result):
    """In a process of its own (DT_GLUON is read at a plan's first call)."""
    spec = importlib.util.spec_from_file_location(pathlib.Path(path).stem, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    Q, K, V = (t.cuda() for t in inputs())
    torch.save((m.out(Q, K, V).float().cpu(), m.reference_out(Q, K, V).float().cpu()), result)


def run(out):
    Q, K, V = inputs()
    oracle = torch.softmax(Q.double() @ K.double().t() / 8, -1) @ V.double()

    def nan_rows(t):
        return torch.isnan(t).any(-1).nonzero().flatten().tolist()

    print("float64 on the CPU: NaN rows", nan_rows(oracle))
    for name in MODULES:
        res = {}
        for gluon in ("1", "0"):
            f = f"/tmp/special_{name}_{gluon}.pt"
            subprocess.run([sys.executable, __file__, "one", str(out / f"{name}.py"), f],
                           env=dict(os.environ, DT_GLUON=gluon), check=True)
            res[gluon] = torch.load(f)
        for label, t in (("gluon", res["1"][0]), ("triton", res["0"][0]),
                         ("reference on the GPU", res["1"][1])):
            d = (torch.nan_to_num(t.double(), nan=1e9) - torch.nan_to_num(oracle, nan=1e9)).abs()
            print(f"{name} {label}: NaN rows {nan_rows(t)}, max |difference| (NaN as 1e9) "
                  f"{d.max().item():.3g}, row 3 {t[3, :3].tolist()}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "one":
        one(sys.argv[2], sys.argv[3])
        sys.exit()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=["make", "run"])
    parser.add_argument("dir", nargs="?", default=str(ROOT / ".gpu/nan"))
    a = parser.parse_args()
    (make if a.step == "make" else run)(pathlib.Path(a.dir))
