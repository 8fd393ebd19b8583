"""warp_specialize(k) (docs/language.md, Warp specialization): the loop of a product over k runs
as `tl.range(..., warp_specialize=...)` under the wrapper's flags (both operands through tensor
descriptors, 16-bit floats, a GPU after Hopper: `_dt_warp_specialize`). Under the interpreter the loop is a plain one, so the results are
checked against torch written here in every dtype and with tensors that do and do not qualify;
compiled for sm_90 a 16-bit product is warp-specialized (the consumers' `setmaxnreg`), a float32
one compiles without. Also the layout it rests on: a product of input tiles keeps k off the
values' axes (its loop tile), so the product and its epilogue are 2-D."""
import re

import pytest
import torch

from conftest import MATMUL, ROOT, compile_source, run_dtc
from hopper import compile_for_hopper

EPILOGUE = (ROOT / "templates" / "gemm_epilogue.dt").read_text()
PRODUCT = "c.block(m:64, n:32); c.tensorize(m:0, n:0, k:16); c.tma(A, B); c.warp_specialize(k)"
FUSED = ("out.block(m:64, n:32); out.tensorize(m:0, n:0, k:16); mm.fuse_at(out, n); "
         "out.tma(A, W); out.warp_specialize(k)")


def gelu_product(A, W, bias):
    return torch.nn.functional.gelu(A.double() @ W.double() + bias.double())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("persistent", ["none", "interleaved"])
def test_products(tmp_path, dtype, persistent):
    module, text = compile_source(tmp_path, MATMUL, f"{PRODUCT}; c.persistent({persistent})")
    assert re.search(r"for k_iter in tl\.range\(0, k_size, 16, "
                     r"warp_specialize=A_TMA & A_HALF & B_TMA & B_HALF & WARP_SPECIALIZE\):", text), text
    # Partial tiles on every side, and sizes that are multiples of the tiles.
    for m, n, k in [(70, 100, 48), (64, 128, 64), (1, 1, 16)]:
        A, B = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
        got = module.c(A, B)
        torch.testing.assert_close(got.double(), (A.double() @ B.double()).to(dtype).double(),
                                   rtol=2e-2, atol=2e-2)


def test_tensors_that_do_not_qualify_run_the_plain_loop(tmp_path):
    module, _ = compile_source(tmp_path, MATMUL, PRODUCT)
    A = torch.randn(33, 7, dtype=torch.float16)       # rows of 14 bytes: no descriptor
    Bt = torch.randn(40, 7, dtype=torch.float16).t()  # last stride 7: no descriptor
    got = module.c(A, Bt)
    torch.testing.assert_close(got.double(), (A.double() @ Bt.double()).half().double(),
                               rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("persistent", ["none", "interleaved"])
def test_a_fused_epilogue(tmp_path, persistent):
    module, text = compile_source(tmp_path, EPILOGUE, f"{FUSED}; out.persistent({persistent})")
    assert "warp_specialize=A_TMA & A_HALF & W_TMA & W_HALF & WARP_SPECIALIZE" in text
    A, W, bias = torch.randn(90, 64).bfloat16(), torch.randn(64, 72).bfloat16(), torch.randn(72).bfloat16()
    torch.testing.assert_close(module.out(A, W, bias).double(), gelu_product(A, W, bias).bfloat16().double(),
                               rtol=2e-2, atol=5e-2)


def kernel_of(text, name):
    return text[text.index(f"def {name}("):text.index("\n\n\n", text.index(f"def {name}("))]


def test_a_product_of_input_tiles_is_two_dimensional(tmp_path):
    """k is a loop tile: no value of the kernel has a k axis, no reshape to [.., .., 1]."""
    _, text = compile_source(tmp_path, EPILOGUE, FUSED)
    kernel = kernel_of(text, "out__kernel")
    assert "# tensor axes: m:64, n:32; product loops over k:16" in kernel
    assert "tl.reshape" not in kernel and "[:, None, None]" not in kernel
    assert "k_range = tl.arange(0, 16)" in kernel
    # A computed operand is made in the layout: k keeps its axis there.
    computed = MATMUL.replace("rdot(A[m, k]", "rdot(sigmoid(A[m, k])")
    _, text = compile_source(tmp_path, computed, "c.block(m:32, n:64); c.tensorize(m:0, n:0, k:16)",
                             name="computed")
    kernel = kernel_of(text, "c_kernel")
    assert "# tensor axes: m:32, n:64, k:16\n" in kernel and "tl.reshape" in kernel


def test_canonical_text(tmp_path):
    src = tmp_path / "c.dt"
    src.write_text(MATMUL)
    r = run_dtc(src, "--canonical", "--schedule", f"c.warp_specialize(k); {PRODUCT}; c.num_warps(4)")
    assert r.returncode == 0, r.stderr
    # In canonical order, num_warps(4) the default.
    assert r.stdout == ("c.block(m:64,n:32);c.tensorize(m:0,n:0,k:16);c.tma(A,B);"
                        "c.warp_specialize(k)\n"), r.stdout


@pytest.mark.parametrize("elem,specialized", [("bf16", True), ("fp16", True), ("fp32", False)])
@pytest.mark.parametrize("persistent", ["none", "interleaved"])
def test_compiles_warp_specialized_for_hopper(tmp_path, elem, specialized, persistent):
    """16-bit: the producer and consumer warps get their registers (setmaxnreg) and the loads are
    TMA copies; float32 (where Triton cannot specialize a TF32 product) the plain loop. The
    wrapper specializes only after Hopper (`_dt_warp_specialize`): compiled with the flag it
    passes on sm_90, the loop is the plain one."""
    out = tmp_path / "e.py"
    src = tmp_path / "e.dt"
    src.write_text(EPILOGUE)
    r = run_dtc(src, "-o", out, "--schedule",
                "out.block(m:128, n:128); out.tensorize(m:0, n:0, k:64); mm.fuse_at(out, n); "
                "out.map(n:ni/8, m, ni); out.tma(A, W); out.warp_specialize(k); "
                f"out.persistent({persistent}); out.num_warps(4)")
    assert r.returncode == 0, r.stderr
    ptx = compile_for_hopper(out, "out__kernel", elem, num_warps=4, num_stages=3,
                             warp_specialize=True)["ptx"]
    assert ("setmaxnreg" in ptx) == specialized
    # As the wrapper launches it on Hopper: the plain loop.
    plain = compile_for_hopper(out, "out__kernel", elem, num_warps=4, num_stages=3)["ptx"]
    assert "setmaxnreg" not in plain and "wgmma.mma_async" in plain
    assert "cp.async.bulk.tensor" in ptx and "wgmma.mma_async" in ptx
    assert "ld.local" not in ptx and "st.local" not in ptx
