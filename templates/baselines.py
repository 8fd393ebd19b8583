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


def gemm_epilogue(A, W, bias):
    """gelu(A @ W + bias) with the exact GELU: the product with its bias in one library call
    (addmm), then a second kernel for the GELU."""
    return F.gelu(torch.addmm(bias, A, W))


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


def layernorm(X, W, B, eps):
    """Layer normalization of each row of X, scaled by W and shifted by B."""
    return F.layer_norm(X, (X.shape[1],), W, B, eps)


def groupnorm(X, W, B, eps):
    """Group normalization of X [batch, groups, channels per group, spatial], viewed as the
    [batch, channels, spatial] tensor nn.GroupNorm takes; W and B [groups, channels per group]
    are its per-channel weight and bias."""
    b, g, c, s = X.shape
    return F.group_norm(X.reshape(b, g * c, s), g, W.reshape(-1), B.reshape(-1),
                        eps).reshape(b, g, c, s)


def rope(Q, K, C, S):
    """Rotary embedding of Q and K [batch, seq, heads, head_dim] with the half-split layout:
    [x1 cos - x2 sin, x2 cos + x1 sin] for the halves x1, x2 of each head, cos and sin the first
    halves of the tables C and S [seq, head_dim]. Returns (q, k)."""
    half = Q.shape[-1] // 2
    cos, sin = C[None, :, None, :half], S[None, :, None, :half]

    def rotate(x):
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    return rotate(Q), rotate(K)


def relu_squared(A):
    """relu(A)^2."""
    return torch.square(F.relu(A))


def kl_div(P, T, eps):
    """Each row's KL divergence sum_y T (log max(T, eps) - P), P log-probabilities and T
    probabilities, in float32 and rounded once to P's dtype."""
    p, t = P.float(), T.float()
    return (t * (torch.log(torch.clamp(t, min=eps)) - p)).sum(dim=1).to(P.dtype)


def jsd(beta, X, Y):
    """Each row's generalized Jensen-Shannon divergence of the log-probabilities X (student,
    log Q) and Y (teacher, log P): beta KL(P || M) + (1 - beta) KL(Q || M) with
    M = beta P + (1 - beta) Q; beta 0 is KL(P || Q) and 1 is KL(Q || P). In float32, rounded
    once to X's dtype."""
    x, y = X.float(), Y.float()
    q, p = torch.exp(x), torch.exp(y)
    if beta == 0:
        loss = p * (y - x)
    elif beta == 1:
        loss = q * (x - y)
    else:
        m = beta * p + (1 - beta) * q
        loss = beta * p * y + (1 - beta) * q * x - m * torch.log(m)
    return loss.sum(dim=1).to(X.dtype)


def tvd(P, Q):
    """Each row's total variation distance sum_y |P - Q| / 2, in float32, rounded once."""
    return (0.5 * (P.float() - Q.float()).abs()).sum(dim=1).to(P.dtype)


def cross_entropy(P, T, ignore, eps):
    """Each row's cross-entropy of the logits P against the classes T with label smoothing eps,
    0 where T is `ignore`: (1 - eps) (-log p[T]) + eps mean(-log p), with log p = log_softmax(P),
    in float32 and rounded once. Written out rather than F.cross_entropy, which refuses a label
    smoothing above 1 (make_inputs draws scalars from [0.5, 1.5))."""
    logp = torch.log_softmax(P.float(), dim=1)
    keep = T != ignore
    target = torch.where(keep, T, 0).long()
    nll = -logp.gather(1, target[:, None]).squeeze(1)
    loss = (1 - eps) * nll - eps * logp.mean(dim=1)
    return torch.where(keep, loss, 0.0).to(P.dtype)


def add_rmsnorm(X, R, W, eps):
    """(RMSNorm of s = X + R weighted by W, s): the residual add and the norm, in float32 and
    rounded once each."""
    s = X.float() + R.float()
    norm = s * torch.rsqrt(s.pow(2).mean(dim=1, keepdim=True) + eps) * W.float()
    return norm.to(X.dtype), s.to(X.dtype)


def cross_entropy_grad(P, T, ignore, eps):
    """(the gradient of each row's loss with respect to P, the losses) as cross_entropy above
    defines them: softmax(P) minus the smoothed one-hot target, 0 in ignored rows."""
    probability = torch.softmax(P.float(), dim=1)
    keep = T != ignore
    target = torch.where(keep, T, 0).long()
    grad = probability - eps / P.shape[1]
    grad.scatter_add_(1, target[:, None], torch.full((P.shape[0], 1), -(1 - eps), device=P.device))
    grad = torch.where(keep[:, None], grad, 0.0)
    return grad.to(P.dtype), cross_entropy(P, T, ignore, eps)


def embedding(E, Tok):
    """Rows Tok of the table E."""
    return F.embedding(Tok, E)


# `2mm` is not a Python identifier: the explorer looks the kernel name up with getattr.
globals()["2mm"] = _2mm


def _sdpa(Q, K, V, causal, backend=None):
    if backend is None:
        return F.scaled_dot_product_attention(Q, K, V, is_causal=causal)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(Q, K, V, is_causal=causal)


def _attention_formula(Q, K, V, causal):
    """softmax(Q Kᵀ / sqrt(d) + mask) V as a user writes it in eager PyTorch, in float32."""
    s = Q.float() @ K.float().transpose(-1, -2) / math.sqrt(Q.shape[-1])
    if causal:
        mask = torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool, device=s.device).triu(1)
        s = s.masked_fill(mask, float("-inf"))
    return (torch.softmax(s, -1) @ V.float()).to(Q.dtype)


def flash_attention(Q, K, V):
    """softmax(Q Kᵀ / sqrt(d)) V over [b, h, s, d] tensors: scaled_dot_product_attention with
    its default backend."""
    return _sdpa(Q, K, V, False)


def flash_attention_flash(Q, K, V):
    """scaled_dot_product_attention forced to its FlashAttention backend (a GPU's)."""
    from torch.nn.attention import SDPBackend
    return _sdpa(Q, K, V, False, SDPBackend.FLASH_ATTENTION)


def flash_attention_formula(Q, K, V):
    """The eager formula, for torch.compile (`baselines.py:flash_attention_formula:compile`)."""
    return _attention_formula(Q, K, V, False)


def flash_attention_causal(Q, K, V):
    """Causal attention (a query sees the keys at or before its position): scaled_dot_product_
    attention with is_causal and its default backend."""
    return _sdpa(Q, K, V, True)


def flash_attention_causal_flash(Q, K, V):
    from torch.nn.attention import SDPBackend
    return _sdpa(Q, K, V, True, SDPBackend.FLASH_ATTENTION)


def flash_attention_causal_formula(Q, K, V):
    return _attention_formula(Q, K, V, True)
