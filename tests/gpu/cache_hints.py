"""The `evict` kernel pass, timed: fixed looped schedules of RMSNorm, LayerNorm and softmax (rows
read in steps, so the row is read twice), each compiled here as dtc prints it (the first pass's
loads `evict_last`) and with the hint taken out, then timed side by side on the GPU (do_bench
median, the better of two rounds; bfloat16, 16384x4096). Benchmarks, not tests.

    python3 tests/gpu/cache_hints.py make .gpu/hints        # here: needs build/compiler/dtc
    python3 tests/gpu/cache_hints.py time .gpu/hints        # there
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from gpu_common import dtc, load  # noqa: E402

HINT = ', eviction_policy="evict_last"'
SCHEDULES = {
    "rmsnorm": ("rms_norm_out.block(x:{bx}); rms_norm_out.tensorize(x:0, y:{t}, k:{t}); "
                "rms_norm_out.num_warps({w})"),
    "layernorm": ("layernorm.block(x:{bx}); layernorm.tensorize(x:0, y:{t}, k:{t}); "
                  "mean.fuse_at(layernorm, x); rstd.fuse_at(layernorm, x); "
                  "layernorm.num_warps({w})"),
    "softmax": ("_softmax.block(x:{bx}); _softmax.tensorize(x:0, y:{t}); "
                "_sum.fuse_at(_softmax, x); _softmax.num_warps({w})"),
}
POINTS = [(1, 1024, 4), (1, 1024, 8), (1, 2048, 4), (1, 2048, 8), (2, 1024, 8), (1, 512, 4)]


def make(out):
    out.mkdir(parents=True, exist_ok=True)
    for name, schedule in SCHEDULES.items():
        for bx, t, w in POINTS:
            path = out / f"{name}__{bx}_{t}_{w}.py"
            text = dtc(name, schedule.format(bx=bx, t=t, w=w), path)
            assert HINT in text, path
            path.with_name(path.stem + "__plain.py").write_text(text.replace(HINT, ""))


def time(out):
    import torch
    from triton.testing import do_bench
    for name in SCHEDULES:
        inputs = None
        for path in sorted(out.glob(f"{name}__*.py")):
            if path.stem.endswith("__plain"):
                continue
            hinted, plain = load(path), load(path.with_name(path.stem + "__plain.py"))
            python = hinted.PYTHON_NAMES[hinted.COMPILED[0]]
            if inputs is None:
                inputs = getattr(hinted, f"make_inputs_{python}")(
                    {"x": 16384, "y": 4096}, dtype=torch.bfloat16, device="cuda", seed=0)
            fns = {"plain": getattr(plain, python), "evict_last": getattr(hinted, python)}
            assert torch.equal(fns["plain"](*inputs), fns["evict_last"](*inputs)), path
            ms = {k: min(do_bench(lambda: f(*inputs), warmup=25, rep=200, return_mode="median")
                         for _ in range(2)) for k, f in fns.items()}
            print(f"{path.stem:26s} plain {ms['plain']:.4f}  evict_last {ms['evict_last']:.4f} "
                  f"({ms['evict_last'] / ms['plain']:.3f})", flush=True)
        del inputs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    {"make": make, "time": time}[sys.argv[1]](pathlib.Path(sys.argv[2]))
