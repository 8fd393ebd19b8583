"""Fused add + RMSNorm, whole rows, timed against torch.compile and Liger-Kernel: dtc's kernel at
fixed schedules as it prints it, and the same kernel with its statements reordered by hand, to
see what the last percent is made of: every load at the top (the weight's load, which dtc prints
after the row's reduction, moved up beside the row's), the sum `s` stored before the reduction
rather than after it, and both. Also writes the Triton code torch.compile generates for the same
function to $OUT (or the directory given) for reading. Benchmarks, not tests.

    python3 tests/gpu/add_rmsnorm_ab.py make .gpu/add_rmsnorm_ab     # here: needs build/compiler/dtc
    python3 tests/gpu/add_rmsnorm_ab.py time .gpu/add_rmsnorm_ab     # there
"""
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from gpu_common import ROOT, dtc, load  # noqa: E402

SCHEDULE = ("add_rmsnorm.block(x:{b}); add_rmsnorm.tensorize(x:0, y:0, k:0); s.fuse_at(add_rmsnorm, x); "
            "s.store_in(add_rmsnorm); add_rmsnorm.num_warps({w})")
POINTS = [(1, 4), (1, 8), (1, 16), (2, 4), (2, 8), (2, 16), (4, 8), (4, 16)]
SHAPES = [{"x": 16384, "y": 4096}, {"x": 4096, "y": 4096}]


def move_after(text, line_start, anchor_start):
    """`text` with its (first) line beginning `line_start` moved to just after the line
    beginning `anchor_start`."""
    lines = text.split("\n")
    i = next(n for n, s in enumerate(lines) if s.startswith(line_start))
    moved = lines.pop(i)
    j = next(n for n, s in enumerate(lines) if s.startswith(anchor_start))
    lines.insert(j + 1, moved)
    return "\n".join(lines)


VARIANTS = {
    "loads_first": lambda t: move_after(t, "    W = tl.load(", "    R = tl.load("),
    "store_first": lambda t: move_after(t, "    tl.store(s_ptr", "    cse = X + R"),
}
VARIANTS["both"] = lambda t: VARIANTS["store_first"](VARIANTS["loads_first"](t))


def make(out):
    out.mkdir(parents=True, exist_ok=True)
    for b, w in POINTS:
        path = out / f"ar__{b}_{w}.py"
        text = dtc("add_rmsnorm", SCHEDULE.format(b=b, w=w), path)
        for name, edit in VARIANTS.items():
            edited = edit(text)
            assert edited != text, name
            path.with_name(f"{path.stem}__{name}.py").write_text(edited)


def time(out):
    import torch
    from torch._inductor.utils import run_and_get_code
    from triton.testing import do_bench
    baselines = load(ROOT / "templates" / "baselines.py")
    try:
        liger = load(ROOT / "templates" / "liger_baselines.py")
    except Exception as e:  # noqa: BLE001 - an optional peer
        liger, why = None, e
    dump = pathlib.Path(os.environ.get("OUT", out))

    def ms(f):
        return min(do_bench(f, warmup=25, rep=200, return_mode="median") for _ in range(2))

    compiled = torch.compile(baselines.add_rmsnorm)
    for shape in SHAPES:
        x, y = shape["x"], shape["y"]
        g = torch.Generator(device="cuda").manual_seed(0)
        X, R = (torch.randn(x, y, device="cuda", generator=g).bfloat16() for _ in range(2))
        W = torch.randn(y, device="cuda", generator=g).bfloat16()
        eps = 1e-6
        want = baselines.add_rmsnorm(X, R, W, eps)
        _, code = run_and_get_code(compiled, X, R, W, eps)
        (dump / f"inductor_{x}x{y}.py").write_text("\n\n# ----\n\n".join(code))
        peers = {"torch.compile": ms(lambda: compiled(X, R, W, eps)),
                 "torch": ms(lambda: baselines.add_rmsnorm(X, R, W, eps))}
        if liger is not None:
            try:
                peers["liger"] = ms(lambda: liger.add_rmsnorm(X, R, W, eps))
            except Exception as e:  # noqa: BLE001
                print("liger:", e)
        else:
            print("liger:", why)
        print(shape, "  ".join(f"{k} {v:.4f}" for k, v in peers.items()), flush=True)
        for path in sorted(out.glob("ar__*_*.py")):
            if path.stem.count("__") != 1:
                continue
            row = []
            for name in ["", *VARIANTS]:
                module = load(path.with_name(f"{path.stem}__{name}.py") if name else path)
                got = module.add_rmsnorm(X, R, W, eps)
                for a, b in zip(got, want):
                    torch.testing.assert_close(a.float(), b.float(), rtol=2e-2, atol=2e-2)
                row.append(f"{name or 'as printed'} {ms(lambda: module.add_rmsnorm(X, R, W, eps)):.4f}")
            print(f"{path.stem:10s}", "  ".join(row), flush=True)
        del X, R, W, want
        torch.cuda.empty_cache()


if __name__ == "__main__":
    {"make": make, "time": time}[sys.argv[1]](pathlib.Path(sys.argv[2]))
