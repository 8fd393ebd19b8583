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


HOPPER = ("out.block(m:128, n:{bn}); out.tensorize(m:0, n:0, k:64); mm.fuse_at(out, n); "
          "out.map(m:mi/8, n, mi); out.tma(A, W); out.warp_specialize(k); "
          "out.persistent({persistent}); out.num_warps({warps}); out.num_stages(4)")


def test_the_gluon_form_is_printed_and_launched(tmp_path):
    """On Hopper the wrapper launches `out__kernel_hopper`, which picks the Gluon kernel; its
    partitions read what each needs: the producer the descriptors and the operands' offsets, the
    consumer the epilogue's indices (kir/WarpPartitions.h)."""
    module, text = compile_source(tmp_path, EPILOGUE, HOPPER.format(bn=128, persistent="interleaved",
                                                                     warps=8))
    assert re.search(r"plan\.launch\(\d, out__kernel_hopper, \(", text), text
    assert re.search(r"out__kernel_hopper = _DtHopper\(out__kernel, out__kernel_gluon, "
                     r"\((\d+), (\d+), (\d+), (\d+)\), 168\)", text), text
    load = kernel_of(text, "out__kernel_load").split('"""')[2]  # the bodies, past the docstrings
    mma = kernel_of(text, "out__kernel_mma").split('"""')[2]
    # The producer: descriptors, block indices, the copies; nothing of the epilogue.
    assert "tma.make_tensor_descriptor(A_ptr, [m_size, k_size], [A_stride0, 1], [128, 64]" in load
    assert "tma.async_copy_global_to_shared(A_desc, [tl.cast(m_start, tl.int32), " in load
    assert "bias" not in load and "_dt_gelu" not in load and "warpgroup_mma" not in load
    # The consumer: no descriptors, the products from the ring, the epilogue as in Triton's.
    assert "make_tensor_descriptor" not in mma and "async_copy" not in mma
    assert "k_acc = warpgroup_mma(_dt_a_ring.index(_dt_slot), _dt_b_ring.index(_dt_slot)" in mma
    assert "out_ = _dt_gelu(k_dot + bias)" in mma
    assert "m_arange = gl.arange(0, 128)[:, None].to(_dt_index)" in mma
    # Under the interpreter the Triton kernel runs.
    A, W, bias = torch.randn(130, 64).bfloat16(), torch.randn(64, 72).bfloat16(), torch.randn(72).bfloat16()
    args = (A, W, bias) + (True,) * 30
    assert module.out__kernel_hopper.chosen(args) is module.out__kernel
    torch.testing.assert_close(module.out(A, W, bias).double(), gelu_product(A, W, bias).bfloat16().double(),
                               rtol=2e-2, atol=5e-2)


def test_the_kernel_without_a_gluon_form_is_launched_as_it_is(tmp_path):
    _, text = compile_source(tmp_path, EPILOGUE, HOPPER.format(bn=128, persistent="interleaved",
                                                               warps=8).replace("; out.warp_specialize(k)", ""))
    assert re.search(r"plan\.launch\(\d, out__kernel, \(", text), text
    assert "@gluon.jit" not in text and "from triton.experimental import gluon" not in text


@pytest.mark.parametrize("persistent,warps,bn", [("none", 4, 128), ("interleaved", 4, 64),
                                                 ("interleaved", 8, 128), ("none", 8, 256)])
def test_the_gluon_kernel_compiles_for_hopper(tmp_path, persistent, warps, bn):
    """The Gluon kernel compiled for sm_90 as the wrapper launches it there: the producer's
    and consumers' registers set (setmaxnreg), TMA copies into the ring, warpgroup products,
    no spills, and the ring's shared memory (4 stages of both operands' tiles)."""
    out = tmp_path / "h.py"
    src = tmp_path / "h.dt"
    src.write_text(EPILOGUE)
    r = run_dtc(src, "-o", out, "--schedule", HOPPER.format(bn=bn, persistent=persistent, warps=warps))
    assert r.returncode == 0, r.stderr
    compiled = compile_for_hopper(out, "out__kernel_gluon", "bf16", num_warps=warps, num_stages=4)
    ptx = compiled["ptx"]
    assert "setmaxnreg" in ptx and "wgmma.mma_async" in ptx and "cp.async.bulk.tensor" in ptx
    assert "mbarrier.try_wait" in ptx
    assert "ld.local" not in ptx and "st.local" not in ptx
    ring = 4 * (128 * 64 + 64 * bn) * 2
    assert ring <= compiled["shared"] <= ring + 1024, compiled["shared"]


def test_a_plain_product_has_a_gluon_form(tmp_path):
    """A product stored as it is (no epilogue) at 64-row tiles of 32 columns: compiles for
    sm_90 (wgmma of 32 columns)."""
    out = tmp_path / "p.py"
    src = tmp_path / "p.dt"
    src.write_text(MATMUL)
    r = run_dtc(src, "-o", out, "--schedule", PRODUCT)
    assert r.returncode == 0, r.stderr
    assert "c_kernel_hopper = _DtHopper(c_kernel, c_kernel_gluon" in out.read_text()
    ptx = compile_for_hopper(out, "c_kernel_gluon", "fp16", num_warps=4, num_stages=3)["ptx"]
    assert "wgmma.mma_async" in ptx and "ld.local" not in ptx


def test_a_staged_epilogue(tmp_path):
    """warp_specialize(k, m:16): the epilogue runs 16 rows at a time in a loop, the tile staged
    in shared memory, 128 columns at a time (two parts of a 256-column tile); the statements
    that depend on the rows move into the loop, rewritten; the rest stay in the block."""
    out = tmp_path / "s.py"
    src = tmp_path / "s.dt"
    src.write_text(EPILOGUE)
    schedule = HOPPER.format(bn=256, persistent="interleaved", warps=8).replace(
        "warp_specialize(k)", "warp_specialize(k, m:16)").replace("num_stages(4)", "num_stages(3)")
    r = run_dtc(src, "-o", out, "--schedule", schedule)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    mma = kernel_of(text, "out__kernel_mma").split('"""')[2]
    assert "_dt_part0, _dt_part1 = k_acc.reshape([128, 2, 128]).permute(0, 2, 1).split()" in mma
    assert mma.count("for _dt_chunk in range(8):") == 2
    assert "m_arange = (gl.arange(0, 16)[:, None] + tl.cast(_dt_row, tl.int32)).to(_dt_index)" in mma
    assert "n_arange = (gl.arange(0, 128)[None, :] + tl.cast(128, tl.int32)).to(_dt_index)" in mma
    assert "out_ = _dt_gelu(k_dot + bias)" in mma and "k_dot = _dt_rows" in mma
    # The block's indices that do not depend on the rows stay outside the chunks.
    assert re.search(r"\n        m_end = tl\.minimum\(m_start \+ 128, m_size\)\n", mma)
    compiled = compile_for_hopper(out, "out__kernel_gluon", "bf16", num_warps=8, num_stages=3)
    ptx = compiled["ptx"]
    assert "setmaxnreg" in ptx and "ld.local" not in ptx and "st.local" not in ptx
    ring, stage = 3 * (128 * 64 + 64 * 256) * 2, 128 * 128 * 4
    assert ring + stage <= compiled["shared"] <= ring + stage + 1024, compiled["shared"]
    # Under the interpreter the Triton kernel, the same values.
    module = compile_source(tmp_path, EPILOGUE, schedule, name="staged")[0]
    A, W, bias = torch.randn(130, 64).bfloat16(), torch.randn(64, 300).bfloat16(), torch.randn(300).bfloat16()
    torch.testing.assert_close(module.out(A, W, bias).double(), gelu_product(A, W, bias).bfloat16().double(),
                               rtol=2e-2, atol=5e-2)


def test_a_transposed_operand(tmp_path):
    """nn.Linear's weight [n, k]: its tiles are copied as the tensor holds them and the product
    reads a transposed view of the slot."""
    out = tmp_path / "t.py"
    src = tmp_path / "t.dt"
    src.write_text(MATMUL.replace("B[k, n]", "B[n, k]"))
    r = run_dtc(src, "-o", out, "--schedule", "c.block(m:128, n:128); c.tensorize(m:0, n:0, k:64); "
                "c.tma(A, B); c.warp_specialize(k); c.num_warps(8)")
    assert r.returncode == 0, r.stderr
    mma = kernel_of(out.read_text(), "c_kernel_mma")
    assert "warpgroup_mma(_dt_a_ring.index(_dt_slot), _dt_b_ring.index(_dt_slot).permute((1, 0))" in mma
    ptx = compile_for_hopper(out, "c_kernel_gluon", "bf16", num_warps=8, num_stages=3)["ptx"]
    assert "wgmma.mma_async" in ptx and "ld.local" not in ptx


def test_names_the_gluon_kernel_uses_are_the_users_too(tmp_path):
    """A scalar input `i` (the barriers' initialisation loop once shadowed it: the epilogue read
    a constant) and Funcs named after Gluon's modules are renamed in Python, not shadowed."""
    source = EPILOGUE.replace("In A, W, bias;", "In A, W, bias;\nSIn i, tma;").replace(
        "out[m, n] = gelu(mm[m, n] + bias[n]);", "out[m, n] = gelu(mm[m, n] + bias[n]) * i + tma;")
    out = tmp_path / "n.py"
    src = tmp_path / "n.dt"
    src.write_text(source)
    r = run_dtc(src, "-o", out, "--schedule", HOPPER.format(bn=128, persistent="none", warps=4))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "for _dt_i in gl.static_range(4):" in text and "tma_" in text
    ttgir = compile_for_hopper(out, "out__kernel_gluon", "bf16", num_warps=4, num_stages=4)
    assert "wgmma.mma_async" in ttgir["ptx"]
    module = compile_source(tmp_path, source, HOPPER.format(bn=128, persistent="none", warps=4),
                            name="names")[0]
    A, W, bias = torch.randn(70, 64).bfloat16(), torch.randn(64, 40).bfloat16(), torch.randn(40).bfloat16()
    want = (gelu_product(A, W, bias) * 3.0 + 0.5).bfloat16().double()
    torch.testing.assert_close(module.out(A, W, bias, 3.0, 0.5).double(), want, rtol=2e-2, atol=5e-2)


def test_a_kernel_without_partitions_warns_and_keeps_the_plain_loop_on_hopper(tmp_path):
    src = tmp_path / "two.dt"
    src.write_text(MATMUL.replace("In A, B;", "In A, B, D, E;").replace(
        "rdot(A[m, k], B[k, n], k)", "rdot(A[m, k], B[k, n], k) + rdot(D[m, k], E[k, n], k)"))
    out = tmp_path / "two.py"
    r = run_dtc(src, "-o", out, "--schedule", "c.block(m:128, n:128); c.tensorize(m:0, n:0, k:64); "
                "c.tma(A, B, D, E); c.warp_specialize(k)")
    assert r.returncode == 0, r.stderr
    assert "warning: in `c.warp_specialize(k)`: on Hopper the product runs in a producer and a " \
           "consumer partition, and here the kernel has 2 warp-specialized loops" in r.stderr
    assert "_gluon" not in out.read_text()
