"""The `peel` kernel pass, timed: fixed schedules of KL divergence (a vocabulary that is not a
multiple of the step), each compiled here as dtc prints it (the whole tiles in a loop without
the mask, the partial tile in a loop of its own) and with the whole tiles' loop taken out (the
partial tile's loop then starts at 0: the loop as it was before the pass), then timed side by
side with Liger-Kernel's kernel on the GPU (do_bench median, the better of two rounds;
bfloat16, 4096x128256 and 4096x32000). Benchmarks, not tests.

    python3 tests/gpu/peel_ab.py make .gpu/peel_ab        # here: needs build/compiler/dtc
    python3 tests/gpu/peel_ab.py time .gpu/peel_ab        # there, with liger-kernel installed
"""
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from gpu_common import ROOT, dtc, load  # noqa: E402

SCHEDULE = "kl_div.block(x:1); kl_div.tensorize(x:0, y:{t}); kl_div.num_warps({w})"
POINTS = [(16384, 16), (16384, 32), (8192, 16), (8192, 32), (4096, 16), (4096, 8)]
SHAPES = [{"x": 4096, "y": 128256}, {"x": 4096, "y": 32000}]
WHOLE_TILES = re.compile(r"( +)for (\w+) in range\([^,]+, (\w+_full\w*), [^)]*\):\n(?:\1 .*\n)+")


def unpeeled(text):
    """The module with each loop over whole tiles removed and its twin started where it did."""
    out, n = WHOLE_TILES.subn("", text)
    assert n, "no peeled loop"
    for end in set(re.findall(r"range\((\w+_full\w*), ", out)):
        out = re.sub(rf"\n +{end} = [^\n]*", "", out)
    return re.sub(r"range\((\w+_full\w*), ", "range(0, ", out)


def make(out):
    out.mkdir(parents=True, exist_ok=True)
    for t, w in POINTS:
        path = out / f"kl_div__{t}_{w}.py"
        text = dtc("kl_div", SCHEDULE.format(t=t, w=w), path)
        path.with_name(path.stem + "__unpeeled.py").write_text(unpeeled(text))


def time(out):
    import torch
    from triton.testing import do_bench
    liger = load(ROOT / "templates" / "liger_baselines.py")

    def ms(f):
        return min(do_bench(f, warmup=25, rep=200, return_mode="median") for _ in range(2))

    for shape in SHAPES:
        inputs = None
        for path in sorted(out.glob("kl_div__*.py")):
            if path.stem.endswith("__unpeeled"):
                continue
            peeled, before = load(path), load(path.with_name(path.stem + "__unpeeled.py"))
            if inputs is None:
                inputs = peeled.make_inputs_kl_div(shape, dtype=torch.bfloat16, device="cuda", seed=0)
                print(shape, f"liger {ms(lambda: liger.kl_div(*inputs)):.4f}", flush=True)
            a, b = peeled.kl_div(*inputs).float(), before.kl_div(*inputs).float()
            assert torch.allclose(a, b, rtol=1e-3, atol=1e-3), path
            t_before, t_peeled = ms(lambda: before.kl_div(*inputs)), ms(lambda: peeled.kl_div(*inputs))
            print(f"{path.stem:20s} unpeeled {t_before:.4f}  peeled {t_peeled:.4f} "
                  f"({t_peeled / t_before:.3f})", flush=True)
        del inputs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    {"make": make, "time": time}[sys.argv[1]](pathlib.Path(sys.argv[2]))
