"""Hand-written eager PyTorch for the kernels of the schedule templates beside this file.

One function per template, named as the template's `kernel:` field. Each takes the positional
arguments that the generated module's `make_inputs` returns, in that order (the DT program's
`In` tensors and `SIn` scalars in declaration order), and returns the output in the inputs'
dtype. They are written from the math, independently of the compiler's own PyTorch reference,
so that the explorer times each schedule against what a PyTorch user would write
(`baselines: [torch, torch.compile]`) and the template tests check the compiler against them.
"""
import math

import torch
import torch.nn.functional as F


def geglu(A, B):
    """gelu(A) * B with GELU's tanh approximation (thesis listing 4.1)."""
    return F.gelu(A, approximate="tanh") * B


def dyt(X, alpha, gamma, beta):
    """Dynamic Tanh: gamma * tanh(alpha * X) + beta, gamma and beta per column."""
    return gamma * torch.tanh(alpha * X) + beta


def swiglu(A, B):
    """silu(A) * B."""
    return F.silu(A) * B


def softmax(A):
    """Softmax over each row. The thesis' program (listing 4.2) does not subtract the row
    maximum; torch.softmax does, which gives the same values for inputs of moderate size."""
    return torch.softmax(A, dim=1)


def rmsnorm(X, W, Eps, Offset):
    """Root mean square normalization of each row of X, scaled by (Offset + W) (listing 3.4).
    Computed in float32, as the kernels compute, and rounded once to X's dtype."""
    x = X.float()
    scale = torch.rsqrt(x.pow(2).mean(dim=1, keepdim=True) + Eps)
    return (x * scale * (Offset + W.float())).to(X.dtype)


def sum(A):  # noqa: A001 (the kernel is called `sum`)
    """Row sums (listing 3.17), accumulated in float32."""
    return torch.sum(A, dim=1, dtype=torch.float32).to(A.dtype)


def matmul(A, B):
    """A @ B."""
    return A @ B


def sigmoid_mm(A, B):
    """sigmoid(A @ B), the thesis' `mmsigmoid` (figure 4.12): PyTorch runs a library matrix
    product and then a second kernel for the sigmoid."""
    return torch.sigmoid(A @ B)


def gemm_gelu(A, B):
    """gelu(A @ B) with the exact GELU: a library product, then a second kernel."""
    return F.gelu(A @ B)


def _2mm(A, B, C):
    """(A @ B) @ C: two matrix products, two library calls."""
    return (A @ B) @ C


def attention(A, B, C):
    """softmax(A @ B / sqrt(l)) @ C, with A the queries [m, k], B the keys already transposed
    [k, l] and C the values [l, n] (listing 4.4), through PyTorch's fused attention, as the
    thesis' baseline. The score scale is 1/sqrt(l), the number of keys, as the listing writes
    it (len(l)), where scaled_dot_product_attention's default would be 1/sqrt(k)."""
    return F.scaled_dot_product_attention(A.unsqueeze(0), B.t().unsqueeze(0), C.unsqueeze(0),
                                          scale=1.0 / math.sqrt(B.shape[1])).squeeze(0)


# `2mm` is not a Python identifier: the explorer looks the kernel name up with getattr.
globals()["2mm"] = _2mm
