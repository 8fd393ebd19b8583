"""examples/model.py end to end: a real dtxd explores RMSNorm, causal FlashAttention and SwiGLU
for the decoder block's shapes, and the block on their best modules, eager and under
torch.compile(fullgraph=True), matches torch's own (CPU, TRITON_INTERPRET=1)."""
import os
import subprocess
import sys

from conftest import ROOT
from dtxd import Daemon


def test_the_example_block_on_the_daemons_best_modules(tmp_path):
    d = Daemon(tmp_path / "data")
    try:
        # 32 tokens: the attention template's query blocks are 32 rows or more.
        args = [sys.executable, ROOT / "examples" / "model.py", "--url", d.base, "--tokens", "32",
                "--dim", "128", "--heads", "4", "--hidden", "256", "--repeat", "1"]
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        # Nothing explored yet: it says so, and how to go on.
        r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode != 0 and "--explore" in r.stderr, r.stderr
        r = subprocess.run([*args, "--explore", "--budget", "2"], capture_output=True,
                           text=True, env=env, timeout=1200)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "compiled, dtx kernels: matches torch" in r.stdout
        assert "eager, dtx kernels: matches torch" in r.stdout
        assert "compiled torch" in r.stdout
    finally:
        d.stop()
