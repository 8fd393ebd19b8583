"""Ahead-of-time compilation of a generated kernel for the H100 (sm_90), without a GPU: Triton's
wheel ships ptxas, and `triton.compile` with a GPUTarget compiles for a device it does not have.
The kernels of a module imported under the interpreter cannot be compiled, so each compilation
runs in a process of its own (with TRITON_INTERPRET unset).

The kernel is specialized as the wrapper's common launch specializes it: pointers, sizes and
strides 16-divisible but each tensor's last stride 1, the index type int32, every `_EVEN` flag true (sizes multiples of the
tiles: the masks fold away), every `_TMA` flag true (inputs read through tensor descriptors), each
`_HALF` flag true for a 16-bit `elem`, each tile parameter the width given, and the
`WARP_SPECIALIZE` flag false, as the wrapper passes it on Hopper (`_dt_warp_specialize`): true
compiles the warp-specialized loop that GPUs after Hopper run."""
import json
import os
import subprocess
import sys

SCRIPT = r"""
import importlib.util, inspect, json, sys
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
path, kernel_name, elem, tiles, options = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), json.loads(sys.argv[5])
warp_specialize = options.pop("warp_specialize")
spec = importlib.util.spec_from_file_location("hopper_module", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
kernel = getattr(module, kernel_name)
signature, constexprs, attrs = {}, {}, {}
params = list(inspect.signature(kernel.fn).parameters)
# Each tensor's last stride is 1 (contiguous), which the launch passes as a constant.
last_stride = {}
for p in params:
    if "_stride" in p:
        base, axis = p.rsplit("_stride", 1)
        last_stride[base] = max(last_stride.get(base, -1), int(axis))
for i, p in enumerate(params):
    if "_stride" in p and int(p.rsplit("_stride", 1)[1]) == last_stride[p.rsplit("_stride", 1)[0]]:
        signature[p] = "constexpr"
        constexprs[(i,)] = 1
        continue
    if p.endswith("_ptr"):
        signature[p] = "*" + elem
        attrs[(i,)] = [["tt.divisibility", 16]]
    elif p.endswith(("_EVEN", "_TMA")):
        signature[p] = "constexpr"
        constexprs[(i,)] = True
    elif p.startswith("WARP_SPECIALIZE"):
        signature[p] = "constexpr"
        constexprs[(i,)] = warp_specialize
    elif p.endswith("_HALF"):
        signature[p] = "constexpr"
        constexprs[(i,)] = elem in ("fp16", "bf16")
    elif p == "_dt_index":
        signature[p] = "constexpr"
        constexprs[(i,)] = tl.int32
    elif p.endswith("_TILE"):
        signature[p] = "constexpr"
        constexprs[(i,)] = tiles if isinstance(tiles, int) else tiles[p]
    else:
        signature[p] = "i32"
        attrs[(i,)] = [["tt.divisibility", 16]]
source = ASTSource
if type(kernel).__name__ == "GluonJITFunction":  # a kernel written in Gluon (`<name>_gluon`)
    from triton.experimental.gluon._runtime import GluonASTSource as source
compiled = triton.compile(source(fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs),
                          target=GPUTarget("cuda", 90, 32), options=options)
json.dump({"ptx": compiled.asm["ptx"], "shared": compiled.metadata.shared}, sys.stdout)
"""


def compile_for_hopper(module_path, kernel, elem="fp16", tiles=None, num_warps=4, num_stages=3,
                       warp_specialize=False):
    """The PTX and shared memory of `kernel` (a name in the generated module at `module_path`)
    compiled for sm_90 with pointers to `elem` (fp16, bf16, fp32) and tile parameters of the
    widths `tiles` gives (by name, or one width for all); raises AssertionError with Triton's
    error when it does not compile. `warp_specialize`: the value of the kernel's
    `WARP_SPECIALIZE` flag."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(module_path), kernel, elem,
                        json.dumps(tiles or {}),
                        json.dumps({"num_warps": num_warps, "num_stages": num_stages,
                                   "warp_specialize": warp_specialize})],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)
