"""On the GPU machine, with helion installed (and `tests/gpu/prepare_dtxd.sh` run here, for dtc):
tunes the `helion` baselines of templates (templates/helion_baselines.py) with Helion's full
search, ahead of an exploration, so that the worker's call finds the tuned configuration in
Helion's cache (`HELION_CACHE_DIR`, which the exploration must see too) instead of searching
within a baseline's time limit. Each kernel is tuned on the inputs the worker gives it: the
template's algorithm compiled there, its `make_inputs` at the shape, in the dtype. Helion prints
the best configuration it found; this prints the tuned kernel's do_bench median and its largest
difference from the module's reference. Benchmarks, not tests.

    HELION_CACHE_DIR=/tmp/helion python3 tests/gpu/helion_tune.py rmsnorm:3 layernorm:1 \\
        softmax:4 --dtype bfloat16 --budget-s 150

Helion's autotuner starts processes that import this file again: everything runs under
`if __name__ == "__main__":`.
"""
import argparse
import importlib.util
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "templates"
PREFIX = ROOT / ".gpu" / "dtx"


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def template_of(name):
    import yaml
    return yaml.safe_load((TEMPLATES / f"{name}.yaml").read_text())


def compiled(template, out_dir):
    """The template's algorithm with its default schedule, compiled by the installed dtc."""
    out = pathlib.Path(out_dir) / f"{template['kernel']}_module.py"
    env = dict(os.environ, LD_LIBRARY_PATH=str(PREFIX / "lib"))
    subprocess.run([str(PREFIX / "bin" / "dtc"), str(TEMPLATES / template["algorithm"]), "-o",
                    str(out)], check=True, env=env)
    return load(out, f"helion_tune_{template['kernel']}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kernels", nargs="+", help="TEMPLATE:SHAPE_INDEX")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--budget-s", type=int, default=150,
                        help="Helion's search time per kernel (HELION_AUTOTUNE_BUDGET_SECONDS)")
    args = parser.parse_args()
    os.environ.setdefault("HELION_AUTOTUNE_EFFORT", "full")
    os.environ["HELION_AUTOTUNE_BUDGET_SECONDS"] = str(args.budget_s)
    if "HELION_CACHE_DIR" not in os.environ:
        sys.exit("set HELION_CACHE_DIR, and give the exploration the same one")

    import torch
    from triton.testing import do_bench

    baselines = load(TEMPLATES / "helion_baselines.py", "helion_baselines")
    dtype = getattr(torch, args.dtype)
    with tempfile.TemporaryDirectory() as tmp:
        for item in args.kernels:
            name, _, index = item.partition(":")
            template = template_of(name)
            sizes = template["shapes"][int(index or 0)]
            module = compiled(template, tmp)
            python = module.PYTHON_NAMES[module.COMPILED[0]]
            make_inputs = getattr(module, f"make_inputs_{python}")
            reference = getattr(module, f"reference_{python}")
            keywords = getattr(module, f"SIZE_KEYWORDS_{python}")
            torch.manual_seed(0)
            inputs = make_inputs(sizes, dtype=dtype, device="cuda", seed=0)
            fn = getattr(baselines, name)
            start = time.perf_counter()
            got = fn(*inputs)  # tunes, or finds the tuned configuration in the cache
            torch.cuda.synchronize()
            tuned_s = time.perf_counter() - start
            want = reference(*inputs, **{keywords[k]: v for k, v in sizes.items()
                                         if k in keywords})
            err = (got.float() - want.float()).abs().max().item()
            ms = do_bench(lambda: fn(*inputs), warmup=25, rep=200, return_mode="median")
            print(f"{name} {sizes} {args.dtype}: tuned in {tuned_s:.0f} s, helion "
                  f"{ms:.4f} ms (do_bench median), max |helion - reference| {err:.3g}",
                  flush=True)


if __name__ == "__main__":
    main()
