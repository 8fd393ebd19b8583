"""On the GPU machine, after tests/gpu/prepare_dtxd.sh: examples/model.py against the installed
dtxd, as a user runs it (the daemon explores RMSNorm, causal FlashAttention and SwiGLU at the
decoder block's shapes first). Arguments after the script's name go to examples/model.py:

    python3 tests/gpu/example_block.py --explore --budget 24 --dtype bfloat16 \
        --tokens 4096 --dim 4096 --heads 32 --hidden 11008
"""
import os
import pathlib
import subprocess
import sys

from dtxd_explore import started_daemon

ROOT = pathlib.Path(__file__).resolve().parents[2]

if __name__ == "__main__":
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH"))
                                        if p)
    with started_daemon("/tmp/dtxd-example", compile_workers=12) as base:
        code = subprocess.call([sys.executable, str(ROOT / "examples" / "model.py"), "--url", base,
                                *sys.argv[1:]], env=env)
    sys.exit(code)
