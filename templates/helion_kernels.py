"""The Helion kernels behind `helion_baselines.py` (which imports this file only where Helion is
installed, and says so where it is not). Each is written the way Helion's documentation writes a
row reduction: a loop over tiles of rows (`hl.tile`) whose body is PyTorch on whole rows, the
statistics in float32; Helion's autotuner chooses the rest. Shapes are specialized (one tuned
kernel per shape, as the explorer tunes a schedule per shape); a call that finds no tuned
configuration in Helion's cache searches with the effort `HELION_AUTOTUNE_EFFORT` names, `quick`
when it is unset (`tests/gpu/helion_tune.py` tunes ahead with the full effort)."""
import os

import helion
import helion.language as hl
import torch

SETTINGS = {"static_shapes": True,
            "autotune_effort": os.environ.get("HELION_AUTOTUNE_EFFORT") or "quick"}


@helion.kernel(**SETTINGS)
def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float, offset: float) -> torch.Tensor:
    m, _ = x.size()
    out = torch.empty_like(x)
    for rows in hl.tile(m):
        v = x[rows, :].to(torch.float32)
        inv = torch.rsqrt(torch.mean(v * v, dim=-1) + eps)
        out[rows, :] = (v * inv[:, None] * (offset + w[:].to(torch.float32))).to(out.dtype)
    return out


@helion.kernel(**SETTINGS)
def layernorm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    m, _ = x.size()
    out = torch.empty_like(x)
    for rows in hl.tile(m):
        v = x[rows, :].to(torch.float32)
        mean = torch.mean(v, dim=-1, keepdim=True)
        centred = v - mean
        rstd = torch.rsqrt(torch.mean(centred * centred, dim=-1, keepdim=True) + eps)
        y = centred * rstd * w[:].to(torch.float32) + b[:].to(torch.float32)
        out[rows, :] = y.to(out.dtype)
    return out


@helion.kernel(**SETTINGS)
def softmax(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.size()
    out = torch.empty_like(x)
    for rows in hl.tile(m):
        v = x[rows, :].to(torch.float32)
        e = torch.exp(v - torch.amax(v, dim=-1, keepdim=True))
        out[rows, :] = (e / torch.sum(e, dim=-1, keepdim=True)).to(out.dtype)
    return out
