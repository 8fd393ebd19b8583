"""GPU benchmark (not a test): dtc's FlashAttention kernels with the running maximum taken of
the products before their scale (the kernel pass `maxfirst`, kir/MaxBeforeScale.h) against the
same kernels with the maximum of the scaled products (the form before the pass, rewritten from
the printed module: `_dt_max(where(.., k_dot, -inf)) * s` back to `_dt_max(where(.., k_dot *
s, -inf))`), side by side, with SDPA's default backend in the same run (bf16, do_bench ms,
TFLOP/s).

    python3 tests/gpu/maxfirst_ab.py make [.gpu/ab]     (here: the modules)
    python3 tests/gpu/maxfirst_ab.py run [.gpu/ab] [B,H,S,D ...]   (on the GPU)
"""
import argparse
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEDULES = [(128, 64, 8, 2), (128, 64, 8, 3), (128, 128, 8, 2), (64, 64, 4, 2), (64, 64, 4, 3),
             (128, 64, 4, 3)]  # query block, key step, warps, stages


def make(out):
    out.mkdir(parents=True, exist_ok=True)
    for variant in ("flash_attention", "flash_attention_causal"):
        for bm, bl, w, st in SCHEDULES:
            path = out / f"{variant}_m{bm}_l{bl}_w{w}_s{st}.py"
            subprocess.run([str(ROOT / "build/compiler/dtc"), str(ROOT / f"templates/{variant}.dt"),
                            "-o", str(path), "--schedule",
                            "p.fuse_at(out, m); e.fuse_at(out, m); s.fuse_at(out, m); "
                            "qk.fuse_at(out, m); mx.fuse_at(out, m); "
                            f"out.block(b:1, h:1, m:{bm}); out.tensorize(m:0, n:0, k:0, l:{bl}); "
                            f"out.map(b, h, m); out.online(l); out.num_warps({w}); "
                            f"out.num_stages({st})"], check=True)
            text, n = re.subn(r"_dt_max\((tl\.where\(.*?\)), axis=(\d)\) \* (\w+)", unscaled,
                              path.read_text())
            assert n, f"{path}: no maximum taken before the scale"
            path.with_name(path.name.replace("flash_attention", "old_attention")).write_text(text)


def unscaled(m):
    inner, n = re.subn(r"\b(k_dot\w*)\b", r"\1 * " + m.group(3), m.group(1), count=1)
    assert n == 1, m.group(0)
    return f"_dt_max({inner}, axis={m.group(2)})"


def run(out, only):
    sys.path.insert(0, str(ROOT / "tests/gpu"))
    import torch
    import torch.nn.functional as F
    import triton.testing
    from flash_probe import SHAPES, close, inputs
    from gpu_common import load

    def ms(fn):
        return triton.testing.do_bench(fn, warmup=10, rep=50)

    for causal in (False, True):
        news = sorted(out.glob("flash_attention_causal_*.py" if causal else
                               "flash_attention_m*.py"))
        for shape in [s for s in SHAPES if not only or s in only]:
            b, h, s, d = shape
            flop = 4 * b * h * s * s * d / (2 if causal else 1)
            q, k, v = inputs(shape)
            want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            sdpa = ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
            print(f"{'causal' if causal else 'plain'} {shape}: SDPA default {sdpa:.4f} ms",
                  flush=True)
            for new in news:
                t = {}
                for tag in ("new", "old"):
                    m = load(new.with_name(new.name.replace("flash_attention", "old_attention"))
                             if tag == "old" else new)
                    fn = getattr(m, m.COMPILED[0])
                    if close(fn(q, k, v), want):
                        t[tag] = ms(lambda: fn(q, k, v))
                    else:
                        print(f"  WRONG {tag} {new.stem}", flush=True)
                if len(t) == 2:
                    print(f"  {new.stem.split('_m', 1)[1]:14s} maxfirst {t['new']:.4f} "
                          f"({flop / t['new'] / 1e9:.0f}) before {t['old']:.4f} "
                          f"before/maxfirst {t['old'] / t['new']:.3f} "
                          f"SDPA/maxfirst {sdpa / t['new']:.3f}", flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=["make", "run"])
    parser.add_argument("dir", nargs="?", default=str(ROOT / ".gpu/ab"))
    parser.add_argument("shapes", nargs="*", help="B,H,S,D: these of flash_probe's shapes")
    a = parser.parse_args()
    if a.step == "make":
        make(pathlib.Path(a.dir))
    else:
        run(pathlib.Path(a.dir), [tuple(map(int, s.split(","))) for s in a.shapes])
