"""Liger-Kernel's forward kernels as baselines: the `liger` entry of a template's `baselines`.

One function per template, named as the template's `kernel:` field, taking the positional
arguments of the generated module's `make_inputs` (as `baselines.py` does) and returning what the
DT program computes, through Liger's own op on the same data. Written against liger-kernel 0.8.5.

Liger is optional: this file imports without it, and each function raises
`ModuleNotFoundError("liger_kernel is not installed ...")` when it is called where the package is
missing, so an exploration reports its `liger` baseline as failed with that message and goes on
with the others and the candidates.

Where Liger's op returns another shape than the DT program (its losses reduce over the batch to
a scalar), the function launches the Triton kernel that Liger's op launches, with the arguments
Liger's forward gives it, and keeps the per-row values that Liger sums afterwards: the time is
Liger's forward without the final scalar sum (a few microseconds).
"""
import importlib

import torch

NOT_INSTALLED = ("liger_kernel is not installed (pip install liger-kernel): the liger baseline "
                 "needs it")


def _liger(name):
    """The module `name` of liger_kernel, or the not-installed error."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is not None and e.name.split(".")[0] == "liger_kernel":
            raise ModuleNotFoundError(NOT_INSTALLED, name="liger_kernel") from None
        raise


def _functional():
    return _liger("liger_kernel.transformers.functional")


# ---------------------------------------------------------------------------------------------
# Element-wise kernels.

def geglu(A, B):
    """LigerGELUMulFunction: gelu_tanh(A) * B."""
    return _functional().liger_geglu(A, B)


def swiglu(A, B):
    """LigerSiLUMulFunction: silu(A) * B."""
    return _functional().liger_swiglu(A, B)


def dyt(X, alpha, gamma, beta):
    """LigerDyTFunction: gamma * tanh(alpha * X) + beta. Liger's alpha is a one-element tensor
    (a parameter), filled on the device."""
    alpha = torch.full((1,), float(alpha), dtype=X.dtype, device=X.device)
    return _functional().liger_dyt(X, alpha, gamma, beta)


def relu_squared(A):
    """LigerReLUSquaredFunction: relu(A)^2."""
    return _functional().liger_relu_squared(A)


# ---------------------------------------------------------------------------------------------
# Normalizations and softmax.

def softmax(A):
    """LigerSoftmaxFunction over each row (with the row maximum subtracted; the same values as
    the thesis' program, which omits it, for inputs of moderate size)."""
    return _functional().liger_softmax(A)


def rmsnorm(X, W, Eps, Offset):
    """LigerRMSNormFunction with the offset: X * rsqrt(mean(X^2) + Eps) * (Offset + W), Llama's
    casting (the statistics in float32)."""
    return _functional().liger_rms_norm(X, W, Eps, offset=Offset, casting_mode="llama",
                                        in_place=False)


def layernorm(X, W, B, eps):
    """LigerLayerNormFunction over each row of X [rows, hidden]."""
    return _functional().liger_layer_norm(X, W, B, eps)


def groupnorm(X, W, B, eps):
    """LigerGroupNormFunction: X [batch, groups, channels per group, spatial] is the
    [batch, channels, spatial] tensor Liger takes (a view), W and B [groups, channels per group]
    its per-channel weight and bias."""
    b, g, c, s = X.shape
    y = _functional().liger_group_norm(X.reshape(b, g * c, s), W.reshape(-1), B.reshape(-1),
                                       g * c, g, eps)
    return y.reshape(b, g, c, s)


# ---------------------------------------------------------------------------------------------
# Positions: RoPE and embedding.

def rope(Q, K, C, S):
    """LigerRopeFunction on the [batch, heads, seq, head_dim] views of Q and K
    [batch, seq, heads, head_dim], the layout Liger's kernel reads in place (it rotates Q and K's
    memory: no copy, as in a model). C and S [seq, head_dim]; Liger reads their first halves.
    Returns (q, k) as [batch, seq, heads, head_dim] views."""
    q, k = _functional().liger_rope(Q.transpose(1, 2), K.transpose(1, 2), C, S)
    return q.transpose(1, 2), k.transpose(1, 2)


def embedding(E, Tok):
    """LigerEmbeddingFunction: rows Tok of the table E."""
    return _liger("liger_kernel.ops").LigerEmbeddingFunction.apply(E, Tok)


# ---------------------------------------------------------------------------------------------
# Losses, per row.

def cross_entropy(P, T, ignore, eps):
    """LigerCrossEntropyFunction with reduction="none": each row's loss, label smoothing eps,
    0 where T is `ignore` (the inputs do not require gradients, so Liger writes none)."""
    return _functional().liger_cross_entropy(P, T, ignore_index=ignore, reduction="none",
                                             label_smoothing=eps)


def cross_entropy_grad(P, T, ignore, eps):
    """Liger's cross-entropy forward as in training: with gradients wanted it writes each row's
    gradient into the logits in place (HAS_GRADIENTS) beside the losses (reduction="none", so the
    gradient is not divided by the number of rows). Returns (gradient, losses); the gradient is
    P itself afterwards, as in Liger."""
    ce = _liger("liger_kernel.ops.cross_entropy")
    P.requires_grad_(True)
    loss, _, _, _, grad = ce.cross_entropy_forward(P, T, None, ignore, 0.0, eps, "none", None,
                                                   False)
    return grad.detach(), loss


def add_rmsnorm(X, R, W, eps):
    """LigerFusedAddRMSNormFunction (Llama's casting, not in place): (the norm, X + R)."""
    return _functional().liger_fused_add_rms_norm(X, R, W, eps, offset=0.0, casting_mode="llama",
                                                  in_place=False)


def kl_div(P, T, eps):
    """Each row's KL divergence through liger_kernel.ops.kl_div's forward kernel, launched as
    LigerKLDivLossFunction launches it for reductions other than "none" (log_target=False), one
    float32 sum per row, which Liger then adds up."""
    kl = _liger("liger_kernel.ops.kl_div")
    import triton
    P, T = P.contiguous(), T.contiguous()
    rows, cols = P.shape
    block = min(kl.MAX_FUSED_SIZE, triton.next_power_of_2(cols))
    out = torch.zeros(rows, dtype=torch.float32, device=P.device)
    kl._kldiv_kernel_forward[(rows,)](
        P, P.stride(0), T, T.stride(0), out, out.stride(0), cols, eps=eps, BLOCK_SIZE=block,
        num_warps=kl.get_num_warps(block), log_target=False,
        reduction=kl._str_to_reduction_mode["sum"])
    return out.to(P.dtype)


def tvd(P, Q):
    """Each row's total variation distance through liger_kernel.ops.tvd's kernel, launched as
    LigerTVDLossFunction launches it for reduction="sum" (no labels, scale 1): one float32 sum per
    row, and the gradient Liger's forward also writes."""
    tv = _liger("liger_kernel.ops.tvd")
    import triton
    P, Q = P.contiguous(), Q.contiguous()
    rows, cols = P.shape
    block = min(tv.MAX_FUSED_SIZE, triton.next_power_of_2(cols))
    out = torch.zeros(rows, dtype=torch.float32, device=P.device)
    grads = torch.empty_like(P)
    tv._tv_distance_kernel[(rows,)](
        P, P.stride(0), Q, Q.stride(0), out, out.stride(0), grads, grads.stride(0),
        torch.empty(1, device=P.device), -100, cols, 1.0, BLOCK_SIZE=block, HAS_LABEL=False,
        num_warps=tv.get_num_warps(block), reduction=tv._str_to_reduction_mode["sum"])
    return out.to(P.dtype)


def jsd(beta, X, Y):
    """Each row's generalized JSD through Liger's `jsd_loss_and_grad` primitive, the one
    LigerJSDFunction dispatches to (its implementation of choice for the device): the float32
    loss of every element, summed per row here where Liger sums them all. Like Liger's forward it
    writes the gradient into a copy of X."""
    _liger("liger_kernel.functional")  # declares where the primitive's implementations are
    dispatch = _liger("liger_kernel.backends").dispatch
    loss, _ = dispatch("jsd_loss_and_grad", X.clone(), Y.contiguous(), None, float(beta), -100,
                       1.0)
    return loss.sum(dim=1).to(X.dtype)
