"""templates/gemm_baselines.py, the matrix-product peers an exploration can name besides torch and
torch.compile: the persistent tensor-descriptor Triton kernel under the interpreter (float32 and
float16; the interpreter multiplies bfloat16 tl.dot operands as their integer storage, which the
generated modules work around and this peer, written as a user writes Triton, does not), and the
max-autotune wrappers on the CPU, each against PyTorch written out by hand."""
import importlib.util

import pytest
import torch
import torch.nn.functional as F

from conftest import ROOT


def _peers():
    spec = importlib.util.spec_from_file_location("gemm_baselines",
                                                  ROOT / "templates" / "gemm_baselines.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PEERS = _peers()


def _operands(m, n, k, dtype):
    g = torch.Generator().manual_seed(m * 7 + n * 3 + k)
    return (torch.randn(m, k, generator=g).to(dtype), torch.randn(k, n, generator=g).to(dtype),
            torch.randn(n, generator=g).to(dtype))


def _close(got, want, dtype):
    err = (got.double() - want).norm() / want.norm()
    assert err < (2e-3 if dtype == torch.float16 else 1e-5), err


# Sizes: a partial tile in every dimension (32x32x16 tiles, 3 programs looping over 3x5 tiles),
# one whole tile, and more programs than tiles.
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("m, n, k", [(72, 136, 48), (32, 32, 16), (8, 8, 24)])
def test_the_persistent_kernel_multiplies_and_applies_the_epilogue(m, n, k, dtype):
    A, B, bias = _operands(m, n, k, dtype)
    want = A.double() @ B.double()
    got = PEERS.matmul_triton_persistent(A, B)
    assert got.dtype == dtype and got.shape == (m, n)
    _close(got, want, dtype)
    # The exact GELU of the biased product, computed in float64.
    z = want + bias.double()
    _close(PEERS.gemm_epilogue_triton_persistent(A, B, bias),
           0.5 * z * (1 + torch.special.erf(z / 2 ** 0.5)), dtype)


def test_the_persistent_kernel_refuses_what_descriptors_cannot_address():
    A, B, _ = _operands(16, 12, 8, torch.float16)  # B's rows are 24 bytes
    with pytest.raises(ValueError, match="multiple of 16 bytes: A's are 16, B's 24"):
        PEERS.matmul_triton_persistent(A, B)
    with pytest.raises(ValueError, match="do not multiply"):
        PEERS.matmul_triton_persistent(A, A)


def test_max_autotune_wrappers_compute_the_product_and_the_epilogue():
    A, B, bias = _operands(64, 48, 32, torch.float32)
    torch.testing.assert_close(PEERS.matmul_max_autotune(A, B), A @ B)
    torch.testing.assert_close(PEERS.gemm_epilogue_max_autotune(A, B, bias),
                               F.gelu(A @ B + bias))
