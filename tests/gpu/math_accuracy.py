"""On a GPU machine, after tests/gpu/prepare_dtxd.sh: the accuracy of the element-wise helpers dtc
writes, measured as tests/e2e/test_math_accuracy.py measures it under the interpreter (the same
sweep, float64 oracles and ulp bound), and each helper's time over 2^26 float32 elements.

    python3 tests/gpu/math_accuracy.py [--dtc .gpu/dtx/bin/dtc]

Exits non-zero if a helper is off by more than MAX_ULPS anywhere."""
import argparse
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

import torch  # noqa: E402
import triton  # noqa: E402

from gpu_common import load  # noqa: E402
from math_ulps import FRACTIONS, MAX_ULPS, ORACLES, accuracy_program, sweep, ulp_errors  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtc", default=str(ROOT / ".gpu" / "dtx" / "bin" / "dtc"))
    parser.add_argument("--elements", type=int, default=1 << 26)
    args = parser.parse_args()
    os.environ.pop("TRITON_INTERPRET", None)
    work = pathlib.Path(tempfile.mkdtemp(prefix="dt-math-"))
    (work / "accuracy.dt").write_text(accuracy_program())
    env = dict(os.environ, LD_LIBRARY_PATH=str(pathlib.Path(args.dtc).parents[1] / "lib"))
    subprocess.run([args.dtc, str(work / "accuracy.dt"), "-o", str(work / "accuracy.py")],
                   check=True, env=env)
    module = load(work / "accuracy.py")
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"triton {triton.__version__}")
    print(f"{'helper':16} {'max ulps':>9} {'at x':>16} {'ms':>8} {'Gelem/s':>8}")
    x = sweep().cuda()
    big = torch.randn(args.elements, device="cuda") * 4
    failures = 0
    for name in list(ORACLES) + list(FRACTIONS):
        f = getattr(module, f"f_{name}")
        got = f(x).cpu()
        xd = x.cpu().double()
        want = (ORACLES[name](xd) if name in ORACLES
                else torch.pow(xd, torch.tensor(FRACTIONS[name], dtype=torch.float64)))
        err = ulp_errors(got, want)
        i = int(err.argmax())
        ms = triton.testing.do_bench(lambda: f(big))
        bad = err[i].item() > MAX_ULPS
        failures += bad
        print(f"{name:16} {err[i].item():9.3f} {x[i].item():16.8g} {ms:8.4f} "
              f"{args.elements / ms / 1e6:8.1f}{'  FAILED' if bad else ''}", flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
