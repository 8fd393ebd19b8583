"""The Gluon kernels of warp-specialized products that CI only compiles for sm_90, run on a
Hopper GPU against torch: the epilogues of tests/e2e/test_gluon_epilogues.py (whole and in
chunks of rows) and products whose operands the tensors hold transposed (A[k, m], B[n, k]).

Steps:
  make DIR   prints the modules with dtc into DIR, with a manifest (needs build/compiler/dtc)
  run DIR    on the GPU: each module at ragged shapes in a child process (gpu_common.checked),
             its relative error against float64 torch and the kernel its launch chose: the
             Gluon kernel where the operands' rows are 16-byte aligned (as TMA needs), else Triton's
"""
import argparse
import json
import os
import re
import sys

from gpu_common import ROOT, checked, dtc_source, load

PRODUCT = "Func c;\nIn A, B;\nVar m, n;\nRVar k;\nc[m, n] = rdot({a}, {b}, k);\nc.compile();\n"
PRODUCT_SCHEDULE = ("c.block(m:128, n:128); c.tensorize(m:0, n:0, k:64); c.tma(A, B); "
                    "c.warp_specialize(k); c.num_warps(8); c.persistent(interleaved)")


def make(out_dir):
    sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "e2e")]  # its conftest, hopper
    from test_gluon_epilogues import EPILOGUES, SCHEDULE, source
    os.makedirs(out_dir, exist_ok=True)
    manifest = []
    for i, (name, (dt, torch_expr)) in enumerate(EPILOGUES.items()):
        for rows, warps in (("", 4), (", m:16", 8)):
            path = os.path.join(out_dir, f"e{i}{'s' if rows else ''}.py")
            dtc_source(source(dt), SCHEDULE.format(warps=warps, rows=rows), path)
            manifest.append({"name": f"{name}{rows}", "path": path, "kind": "epilogue",
                             "dt": dt, "torch": torch_expr})
    for a, b, torch_expr in (("A[k, m]", "B[k, n]", "A.t() @ B"), ("A[m, k]", "B[n, k]", "A @ B.t()")):
        path = os.path.join(out_dir, f"p_{a[2]}{b[2]}.py")
        dtc_source(PRODUCT.format(a=a, b=b), PRODUCT_SCHEDULE, path)
        manifest.append({"name": f"rdot({a}, {b})", "path": path, "kind": "product",
                         "a": a, "b": b, "torch": torch_expr})
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


def check_each(configs, report):
    import torch
    for config in configs:
        with report(config):
            module = load(config["path"], "m" + re.sub(r"\W", "_", config["name"]))
            ran = set()
            cls = type(next(v for k, v in vars(module).items() if k.endswith("_hopper")))
            chosen = cls.chosen
            cls.chosen = lambda self, args: ran.add(type(chosen(self, args)).__name__) \
                or chosen(self, args)
            errors, kernels = [], []
            for m, n, k in [(300, 200, 136), (1024, 1000, 512)]:
                g = torch.Generator(device="cuda").manual_seed(0)

                def rand(*shape):
                    return torch.randn(*shape, device="cuda", generator=g).bfloat16()
                if config["kind"] == "product":
                    A = rand(k, m) if config["a"] == "A[k, m]" else rand(m, k)
                    B = rand(n, k) if config["b"] == "B[n, k]" else rand(k, n)
                    want = eval(config["torch"], {}, {"A": A.double(), "B": B.double()})
                    got = module.c(A, B)
                else:
                    A, W = rand(m, k), rand(k, n) / 16
                    V, R, T = rand(m, n), rand(m), rand(n, m)
                    given = {"A": A, "W": W, "V": V, "R": R, "T": T, "s": 0.75}
                    used = [x for x in given
                            if x in "AW" or re.search(rf"\b{x}\b", config["dt"])]
                    got = module.out(*[given[x] for x in used])
                    values = {x: (v.double() if torch.is_tensor(v) else v)
                              for x, v in given.items()}
                    values["mm"] = values["A"] @ values["W"]
                    want = eval(config["torch"], {"torch": torch}, values)
                torch.cuda.synchronize()
                errors.append(float((got.double() - want).norm() / want.norm()))
                # The Gluon kernel where the descriptors' operands qualify: rows 16-byte aligned.
                operands = (A, B) if config["kind"] == "product" else (A, W)
                gluon = all(x.stride(0) * x.element_size() % 16 == 0 for x in operands)
                kernels.append((sorted(ran), ["GluonJITFunction" if gluon else "JITFunction"]))
                ran.clear()
            report.result = (errors, kernels)


def run(out_dir):
    import torch
    print(torch.cuda.get_device_name(), flush=True)
    with open(os.path.join(out_dir, "manifest.json")) as f:
        manifest = json.load(f)
    bad = 0
    for config, (status, detail) in checked(check_each, manifest, limit_s=120):
        good = status == "ok" and max(detail[0]) < 1e-2 and all(r == e for r, e in detail[1])
        bad += not good
        print(f"{config['name']}: {status} {detail}{'' if good else '  <- FAILED'}", flush=True)
    print(f"{len(manifest) - bad} of {len(manifest)} correct, on the Gluon kernel where the "
          "operands' rows are 16-byte aligned and on Triton's otherwise")
    return 1 if bad else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=["make", "run"])
    parser.add_argument("dir")
    a = parser.parse_args()
    sys.exit(make(a.dir) if a.step == "make" else run(a.dir))
