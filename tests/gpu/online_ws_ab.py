"""GPU benchmark (not a test): dtc's FlashAttention with its online loop warp-specialized
(`out.warp_specialize(l)`; modules `*_wsp` with persistent programs as well, `*_wspo` storing
the output through the query buffer and a descriptor, `tma(Q, K, V, out)`), which runs on
Hopper as the Gluon kernel dtc prints for it (kir/OnlinePartitions.h: a TMA producer warp, a
consumer warpgroup per 64 query rows), against
the same schedules without it (Triton's kernel) and SDPA's default backend, bf16, in one run,
causal (`templates/flash_attention_causal.dt`, modules named `c_*`) and not.
Each module's output is first checked against SDPA (written into a NaN-filled tensor: every row
written, relative L2 error below 2e-2); the launched kernel is reported.

    python3 tests/gpu/online_ws_ab.py make [.gpu/ows]     (here: the modules)
    python3 tests/gpu/online_ws_ab.py run [.gpu/ows] [B,H,S,D ...] [--modules GLOB]  (on the GPU)
"""
import argparse
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEDULES = [(128, 64, 8, 2), (128, 64, 8, 3), (128, 128, 8, 2), (128, 128, 8, 3),
             (64, 64, 4, 3), (64, 128, 4, 2)]  # rows, key step, warps, stages
SHAPES = [(4, 16, 4096, 128), (16, 16, 1024, 128), (1, 16, 16384, 128), (4, 32, 4096, 64),
          (16, 32, 1024, 64)]


def make(out):
    out.mkdir(parents=True, exist_ok=True)
    for template, prefix in (("flash_attention", ""), ("flash_attention_causal", "c_")):
        for bm, bl, w, st in SCHEDULES:
            for ws in ("ws", "wsp", "wspo", "") if w == 8 else ("",):
                name = f"{prefix}m{bm}_l{bl}_w{w}_s{st}{'_' + ws if ws else ''}"
                subprocess.run([str(ROOT / "build/compiler/dtc"),
                                str(ROOT / f"templates/{template}.dt"), "-o",
                                str(out / f"{name}.py"), "--schedule",
                                "p.fuse_at(out, m); e.fuse_at(out, m); s.fuse_at(out, m); "
                                "qk.fuse_at(out, m); mx.fuse_at(out, m); "
                                f"out.block(b:1, h:1, m:{bm}); "
                                f"out.tensorize(m:0, n:0, k:0, l:{bl}); out.map(b, h, m); "
                                f"out.online(l); "
                                f"out.tma(Q, K, V{', out' if ws == 'wspo' else ''}); "
                                f"{'out.warp_specialize(l); ' if ws else ''}"
                                f"{'out.persistent(interleaved); ' if ws.startswith('wsp') else ''}"
                                f"out.num_warps({w}); out.num_stages({st})"], check=True)


def run(out, only=(), pattern="*"):
    sys.path.insert(0, str(ROOT / "tests/gpu"))
    import torch
    import torch.nn.functional as F
    import triton.testing
    from flash_probe import inputs
    from gpu_common import load

    def ms(fn):
        return triton.testing.do_bench(fn, warmup=10, rep=60)

    mods = {p.stem: load(p) for p in sorted(out.glob(pattern + ".py"))}
    for shape in [x for x in SHAPES if not only or x in only]:
        for causal in (False, True):
            b, h, s, d = shape
            flop = 4 * b * h * s * s * d / (2 if causal else 1)
            q, k, v = inputs(shape)
            want = F.scaled_dot_product_attention(q, k, v, is_causal=causal).float()
            sdpa = ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
            print(f"{shape}{' causal' if causal else ''}: SDPA default {sdpa:.4f} ms "
                  f"({flop / sdpa / 1e9:.0f} TFLOP/s)", flush=True)
            for name, m in mods.items():
                if name.startswith("c_") != causal:
                    continue
                o = torch.full_like(q, float("nan"))
                try:
                    m.out(q, k, v, out=o)
                    torch.cuda.synchronize()
                except Exception as e:  # noqa: BLE001 - reported, the others go on
                    print(f"  {name:20s} failed: {type(e).__name__}: {str(e)[:150]}", flush=True)
                    continue
                got = o.float()
                rows = int(torch.isnan(got).any(dim=-1).sum())
                err = float((torch.nan_to_num(got) - want).norm() / want.norm())
                ran = "gluon" if hasattr(m, "out__kernel_gluon") else "triton"
                if rows or err > 2e-2:
                    print(f"  {name:20s} WRONG ({rows} rows unwritten, error {err:.2e})",
                          flush=True)
                    continue
                t = ms(lambda: m.out(q, k, v, out=o))
                print(f"  {name:20s} {ran:6s} {t:.4f} ms ({flop / t / 1e9:.0f}) error {err:.1e} "
                      f"SDPA/dt {sdpa / t:.3f}", flush=True)
            torch.cuda.empty_cache()

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=["make", "run"])
    parser.add_argument("dir", nargs="?", default=str(ROOT / ".gpu/ows"))
    parser.add_argument("shapes", nargs="*", help="B,H,S,D: these of SHAPES only")
    parser.add_argument("--modules", default="*", help="these modules only (a glob)")
    a = parser.parse_args()
    if a.step == "make":
        make(pathlib.Path(a.dir))
    else:
        run(pathlib.Path(a.dir), [tuple(map(int, x.split(","))) for x in a.shapes], a.modules)
