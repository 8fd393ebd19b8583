"""The Gluon form of warp-specialized products (codegen/GluonPrinter.cpp) over a spread of
epilogues: each compiled for the H100 (sm_90) without a GPU, its epilogue on the whole tile and
in chunks of rows, and the same schedule's Triton kernel run under the interpreter against torch
written here. What only a Hopper GPU can run (the partitions themselves) was checked there
(docs/benchmarks.md, "dtc's warp-specialized GEMMs in Gluon"); this catches a printed kernel
that Gluon refuses, for epilogues the GPU runs did not cover."""
import re

import pytest
import torch

from conftest import compile_source, run_dtc
from hopper import compile_for_hopper

HEAD = """Func out, mm;
In A, W, V, R, T;
SIn s;
Var m, n;
RVar k;
mm[m, n] = rdot(A[m, k], W[k, n], k);
"""

# name: (the epilogue in DT, the same in torch of the float64 product `mm` and inputs; also read
# by tests/gpu/ws_forms_check.py, which runs these kernels on a Hopper GPU)
EPILOGUES = {
    "row bias and scale": ("mm[m, n] * s + R[m]", "mm * s + R[:, None]"),
    "a second matrix": ("maximum(mm[m, n], V[m, n]) - exp(V[m, n] * 0.5)",
                        "torch.maximum(mm, V) - torch.exp(V * 0.5)"),
    "a transposed read": ("mm[m, n] + T[n, m] * R[m]", "mm + T.t() * R[:, None]"),
    "a select": ("where(mm[m, n] > 0, mm[m, n], mm[m, n] * 0.01) + V[m, n]",
                 "torch.where(mm > 0, mm, mm * 0.01) + V"),
    "a row vector divides": ("mm[m, n] / (1.0 + abs(R[m]))", "mm / (1.0 + R.abs()[:, None])"),
}

SCHEDULE = ("out.block(m:128, n:64); out.tensorize(m:0, n:0, k:32); mm.fuse_at(out, n); "
            "out.tma(A, W); out.persistent(interleaved); out.num_warps({warps}); "
            "out.num_stages(3); out.warp_specialize(k{rows})")


def source(epilogue):
    return HEAD + f"out[m, n] = {epilogue};\nout.compile();\n"


@pytest.mark.parametrize("name", list(EPILOGUES))
@pytest.mark.parametrize("rows", ["", ", m:16"])
def test_the_gluon_kernel_of_each_epilogue_compiles_for_hopper(tmp_path, name, rows):
    warps = 8 if rows else 4
    out = tmp_path / "e.py"
    src = tmp_path / "e.dt"
    src.write_text(source(EPILOGUES[name][0]))
    r = run_dtc(src, "-o", out, "--schedule", SCHEDULE.format(warps=warps, rows=rows))
    assert r.returncode == 0, r.stderr
    assert "out__kernel_hopper = _DtHopper(" in out.read_text()
    ptx = compile_for_hopper(out, "out__kernel_gluon", "bf16", num_warps=warps, num_stages=3)["ptx"]
    assert "wgmma.mma_async" in ptx and "setmaxnreg" in ptx
    assert "ld.local" not in ptx and "st.local" not in ptx


@pytest.mark.parametrize("name", list(EPILOGUES))
def test_each_epilogue_runs_its_triton_kernel_under_the_interpreter(tmp_path, name):
    dt, want = EPILOGUES[name]
    module, _ = compile_source(tmp_path, source(dt), SCHEDULE.format(warps=8, rows=", m:16"))
    g = torch.Generator().manual_seed(0)
    m, n, k = 150, 70, 64
    A, W = torch.randn(m, k, generator=g).bfloat16(), torch.randn(k, n, generator=g).bfloat16()
    V, T = torch.randn(m, n, generator=g).bfloat16(), torch.randn(n, m, generator=g).bfloat16()
    R = torch.randn(m, generator=g).bfloat16()
    # The wrapper takes the inputs the program reads, in the order they are declared.
    given = {"A": A, "W": W, "V": V, "R": R, "T": T, "s": 0.75}
    used = [x for x in given if x in "AW" or re.search(rf"\b{x}\b", dt)]
    got = module.out(*[given[x] for x in used])
    expected = eval(want, {"torch": torch}, {"mm": A.double() @ W.double(), "V": V.double(),
                                              "R": R.double(), "T": T.double(), "s": 0.75})
    torch.testing.assert_close(got.double(), expected.bfloat16().double(), rtol=2e-2, atol=5e-2)
