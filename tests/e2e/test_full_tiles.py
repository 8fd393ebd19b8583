"""What the generated code saves where it can: masks that fold away when every tile is full (the
`x_EVEN` flags of docs/language.md, Masking) and a tile divided by a scale as one product by its
reciprocal. The code says so, and every size, whole tiles or not, computes what PyTorch
computes under the interpreter, special values included."""
import pytest
import torch

from conftest import compile_source

DOUBLE = "Func f;\nIn A;\nVar x;\nf[x] = A[x] * 2.0;\nf.compile();\n"


@pytest.mark.parametrize("size", [1, 48, 64, 100, 128])
def test_a_map_split_is_full_only_at_multiples_of_its_turn(tmp_path, size):
    """Blocks of 16 taken four at a time (`map(x:xi/4, xi)`): at 48 one program instance in four
    has no block, so the mask may fold only at multiples of 64, not 16. The instance past the end
    must write nothing: the output is a view into a larger tensor whose tail must stay."""
    module, text = compile_source(tmp_path, DOUBLE, "f.block(x:16); f.tensorize(x:0); "
                                  "f.map(x:xi/4, xi); f.compile()")
    assert "x_mask = (x_idx < x_end) | x_EVEN" in text and "x % 64 == 0" in text
    A = torch.randn(size)
    whole = torch.full((size + 64,), -7.0)
    module.f(A, out=whole[:size])
    assert torch.equal(whole[:size], A * 2) and (whole[size:] == -7.0).all()


@pytest.mark.parametrize("size", [0, 7, 64, 65, 256])
def test_loops_and_whole_tiles_fold_only_when_full(tmp_path, size):
    """A loop in steps of 64 is full at multiples of 64; a whole dimension in one tile (a row sum
    over k) when its size is the tile's width, a power of two of at least 1."""
    src = "Func f;\nIn A;\nVar x;\nRVar k;\nf[x] = rsum(A[x, k], k);\nf.compile();\n"
    module, text = compile_source(tmp_path, src, "f.tensorize(x:64, k:0); f.compile()")
    assert "x % 64 == 0" in text and "k == _dt_tile(k, 1)" in text
    A = torch.randn(size, 12 if size % 2 else 16)
    torch.testing.assert_close(module.f(A), A.sum(1), rtol=1e-5, atol=1e-5)


def test_a_scale_divides_through_its_reciprocal(tmp_path):
    """`A / 3.0` and `A / sqrt(len(k))`: a product by a reciprocal taken once, correctly rounded,
    within 1.5 ulp of the quotient, with the quotient's infinities, NaN and signed zeros."""
    src = ("Func f, g;\nIn A, B;\nVar x;\nRVar k;\nf[x] = A[x] / 3.0;\n"
           "g[x] = A[x] / sqrt(len(k)) + rsum(B[x, k], k);\nf.compile();\ng.compile();\n")
    module, text = compile_source(tmp_path, src)
    assert "* 0.3333333432674408" in text  # 1/3 rounded to float32, folded
    assert "inverse = tl.div_rn(1.0, tl.sqrt(tl.cast(k_size, tl.float32)))" in text
    A = torch.randn(300) * 1e3
    A[:6] = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0, -0.0, 1e-38])
    got = module.f(A)
    want = A / 3.0
    assert torch.equal(got[:6].isnan(), want[:6].isnan())
    assert torch.equal(torch.nan_to_num(got[:6], 0.0).signbit(),
                       torch.nan_to_num(want[:6], 0.0).signbit())
    ulp = torch.finfo(torch.float32).eps * want[6:].abs()
    assert ((got[6:] - want[6:]).abs() <= 1.5 * ulp).all()
    for k in (0, 5):  # no k: A / 0 is ±inf, and 0 / 0 NaN, as torch gives
        B = torch.randn(300, k)
        got, want = module.g(A, B), module.reference_g(A, B)
        torch.testing.assert_close(got, want, rtol=2e-6, atol=1e-6, equal_nan=True)
        assert torch.equal(got.isinf(), want.isinf())
