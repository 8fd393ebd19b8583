"""`relayout(auto|copy|none)`: how a float32 tl.dot input whose k axis is not contiguous reaches
the TF32 tensor cores. Each mode computes the product (against torch, in float64); `copy` lays
the operand out k-contiguous before every launch, `none` never does (the module does not even
carry the transpose kernel), and `auto` copies operands of at least 65536 elements only."""
import pytest
import torch

from conftest import load_module, run_dtc

PROGRAM = """Func c; In A, B; Var m, n; RVar k;
c[m, n] = rdot(A[m, k], B[k, n], k);
c.block(m:16, n:16); c.tensorize(m:0, n:0, k:16);
c.compile();
"""


def build(tmp_path, mode):
    src = tmp_path / "mm.dt"
    src.write_text(PROGRAM.replace("c.compile();", f"c.relayout({mode}); c.compile();"))
    out = tmp_path / f"mm_{mode}.py"
    result = run_dtc(src, "-o", out)
    assert result.returncode == 0, result.stderr
    return out.read_text(), load_module(out)


def counted_copies(module, monkeypatch):
    calls = []
    original = module._dt_k_contiguous

    def count(tensor, axis, *rest):
        calls.append((tuple(tensor.shape), axis))
        return original(tensor, axis, *rest)

    monkeypatch.setattr(module, "_dt_k_contiguous", count)
    return calls


def check(module, m, k, n, transposed_b=False):
    A = torch.randn(m, k)
    B = torch.randn(n, k).t() if transposed_b else torch.randn(k, n)
    got = module.c(A, B)
    want = (A.double() @ B.double()).float()
    torch.testing.assert_close(got, want, rtol=2e-3, atol=2e-3)


def test_copy_lays_out_every_strided_operand(tmp_path, monkeypatch):
    text, module = build(tmp_path, "copy")
    assert "B_relayout = B.dtype == torch.float32 and B.stride(0) != 1\n" in text
    calls = counted_copies(module, monkeypatch)
    check(module, 16, 32, 48)
    assert calls == [((32, 48), 0)]
    check(module, 16, 32, 48)  # from the plan, which keeps the verdict: copied again
    assert len(calls) == 2
    check(module, 16, 32, 48, transposed_b=True)  # already k-contiguous: no copy
    assert len(calls) == 2
    check(module, 16, 32, 48, transposed_b=True)
    assert len(calls) == 2


def test_none_reads_operands_as_they_are(tmp_path):
    text, module = build(tmp_path, "none")
    assert "_dt_k_contiguous" not in text and "_dt_transpose_kernel" not in text
    check(module, 16, 32, 48)
    check(module, 20, 40, 24, transposed_b=True)


def test_auto_copies_large_operands_only(tmp_path, monkeypatch):
    text, module = build(tmp_path, "auto")
    canonical = run_dtc(tmp_path / "mm.dt", "--canonical").stdout
    assert "relayout" not in canonical  # auto is the default
    assert "B.stride(0) != 1 and B.numel() >= 65536\n" in text
    calls = counted_copies(module, monkeypatch)
    check(module, 16, 32, 48)
    assert calls == []
    check(module, 16, 256, 256)
    assert calls == [((256, 256), 0)]


@pytest.mark.parametrize("mode", ["auto", "copy", "none"])
def test_float16_operands_are_never_copied(tmp_path, monkeypatch, mode):
    _, module = build(tmp_path, mode)
    if mode != "none":
        calls = counted_copies(module, monkeypatch)
    A, B = torch.randn(16, 32).half(), torch.randn(32, 48).half()
    want = A.double() @ B.double()
    torch.testing.assert_close(module.c(A, B).double(), want, rtol=1e-2, atol=1e-2)
    if mode != "none":
        assert calls == []
