"""tma(A, ...) (docs/language.md, Tensor descriptors): a product's operand tiles loaded through
tensor descriptors where the wrapper finds the tensor qualifies (2-D, last stride 1, the other
stride and the address multiples of 16 bytes), through pointers where it does not; the same
results either way, checked against torch written here under the interpreter, which validates
descriptors as the hardware does. Compiled for sm_90 the loads are TMA copies."""
import pytest
import torch

from conftest import MATMUL, compile_source, run_dtc
from hopper import compile_for_hopper

# B read as [n, k]: its tiles are the descriptor's blocks transposed.
MATMUL_NT = MATMUL.replace("B[k, n]", "B[n, k]")
SCHEDULE = ("c.block(m:32, n:64); c.tensorize(m:0, n:0, k:16); c.map(n:ni/2, m, ni); "
            "c.tma(A, B); c.compile()")


@pytest.fixture
def descriptors_made(monkeypatch):
    """How many tensor descriptors the interpreter makes (each program instance makes its own)."""
    from triton.runtime import interpreter
    made = []
    original = interpreter.InterpreterBuilder.create_make_tensor_descriptor

    def counting(self, *args, **kwargs):
        made.append(1)
        return original(self, *args, **kwargs)
    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_make_tensor_descriptor", counting)
    return made


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("source", [MATMUL, MATMUL_NT], ids=["nn", "nt"])
def test_products_through_descriptors(tmp_path, dtype, source, descriptors_made):
    module, text = compile_source(tmp_path, source, SCHEDULE)
    assert "tl.make_tensor_descriptor(A_ptr, [m_size, k_size], [A_stride0, 1], [32, 16])" in text
    assert ".load([" in text and "if A_TMA else tl.load(" in text
    nt = "B[n, k]" in source
    # Rows of 48 and 64 elements are 16-byte multiples in every dtype: descriptors, including
    # for the partial tiles past 70 rows, 100 columns and 40 k (read as 0 there).
    for m, n, k in [(70, 100, 48), (64, 128, 64)]:
        A = torch.randn(m, k).to(dtype)
        B = torch.randn(n, k).to(dtype) if nt else torch.randn(k, n).to(dtype)
        made = len(descriptors_made)
        got = module.c(A, B)
        assert len(descriptors_made) > made, "no descriptor made"
        want = A.double() @ (B.double().t() if nt else B.double())
        torch.testing.assert_close(got.double(), want.to(dtype).double(), rtol=2e-2, atol=2e-2)


def test_a_tensor_that_does_not_qualify_is_read_through_pointers(tmp_path, descriptors_made):
    module, _ = compile_source(tmp_path, MATMUL, SCHEDULE)
    A = torch.randn(33, 7, dtype=torch.float16)      # rows of 14 bytes
    Bt = torch.randn(40, 7, dtype=torch.float16).t()  # last stride 7
    offset = torch.randn(33 * 8 + 1, dtype=torch.float16)[1:].view(33, 8)  # 2-byte aligned
    # (A, B, whether B qualifies): A never does; B contiguous with rows of 80 bytes does.
    for a, b, b_qualifies in [(A, Bt.contiguous(), True), (A, Bt, False),
                              (offset, torch.randn(8, 33).half(), False)]:
        made = len(descriptors_made)
        got = module.c(a, b)
        torch.testing.assert_close(got.double(), (a.double() @ b.double()).half().double(),
                                   rtol=2e-2, atol=2e-2)
        assert (len(descriptors_made) > made) == b_qualifies


@pytest.mark.parametrize("persistent", ["none", "interleaved"])
def test_with_an_epilogue_and_persistent_programs(tmp_path, persistent, descriptors_made):
    from conftest import ROOT
    source = (ROOT / "templates" / "gemm_epilogue.dt").read_text()
    module, _ = compile_source(tmp_path, source, "out.block(m:64, n:32); "
                               "out.tensorize(m:0, n:0, k:16); mm.fuse_at(out, n); "
                               f"out.tma(A, W); out.persistent({persistent}); out.compile()")
    A, W, bias = torch.randn(90, 64).half(), torch.randn(64, 72).half(), torch.randn(72).half()
    got = module.out(A, W, bias)
    want = torch.nn.functional.gelu(A.double() @ W.double() + bias.double())
    torch.testing.assert_close(got.double(), want.half().double(), rtol=2e-2, atol=2e-2)
    assert descriptors_made


def test_canonical_text(tmp_path):
    src = tmp_path / "c.dt"
    src.write_text(MATMUL)
    r = run_dtc(src, "--canonical", "--schedule", SCHEDULE.replace("c.tma(A, B)", "c.tma(B, A)"))
    assert r.returncode == 0 and "c.tma(A,B)" in r.stdout, r.stdout + r.stderr


def test_descriptor_loads_compile_to_tma_copies_for_hopper(tmp_path):
    src, out = tmp_path / "c.dt", tmp_path / "c.py"
    src.write_text(MATMUL)
    r = run_dtc(src, "-o", out, "--schedule", "c.block(m:128, n:128); "
                "c.tensorize(m:0, n:0, k:64); c.tma(A, B); c.persistent(interleaved); "
                "c.num_warps(8); c.compile()")
    assert r.returncode == 0, r.stderr
    ptx = compile_for_hopper(out, "c_kernel", "bf16", num_warps=8, num_stages=3)["ptx"]
    assert "cp.async.bulk.tensor" in ptx and "wgmma.mma_async" in ptx
    assert "ld.local" not in ptx and "st.local" not in ptx
