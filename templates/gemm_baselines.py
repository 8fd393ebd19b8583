"""Peers for the matrix-product templates beyond `torch` and `torch.compile`: torch.compile's
`max-autotune` mode (`max-autotune-no-cudagraphs`) (Inductor times its own Triton templates, persistent TMA ones included, against
cuBLAS and keeps the fastest) and a persistent Triton kernel over tensor descriptors, the form of
Triton's persistent-matmul tutorial (one program per multiprocessor walking output tiles in groups
of 8 row blocks, operand tiles brought in by TMA, the tile loop flattened with the k loop, the
result stored through a descriptor).

Name them in an exploration's baselines (`gemm_baselines.py:matmul_max_autotune`, ...); each takes
the positional arguments of the generated module's `make_inputs`, as `baselines.py` does. The
Triton kernel picks its tile from a few configurations the first time it sees a shape (Triton's
autotuner), as the tutorial does.
"""
import functools

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@functools.cache
def _max_autotune(fn):
    # Without CUDA graphs: the measurement captures its own graph to time the GPU alone, and
    # Inductor's graph trees refuse to be captured inside another capture.
    return torch.compile(fn, mode="max-autotune-no-cudagraphs", dynamic=False)


def _mm(A, B):
    return A @ B


def _addmm_gelu(A, W, bias):
    return F.gelu(torch.addmm(bias, A, W))


def matmul_max_autotune(A, B):
    """A @ B under torch.compile's max-autotune."""
    return _max_autotune(_mm)(A, B)


def gemm_epilogue_max_autotune(A, W, bias):
    """gelu(A @ W + bias) under torch.compile's max-autotune."""
    return _max_autotune(_addmm_gelu)(A, W, bias)


def _configs():
    return [
        triton.Config({"BM": bm, "BN": bn, "BK": bk}, num_warps=w, num_stages=s)
        for bm, bn, bk, w, s in [(128, 256, 64, 8, 3), (128, 128, 64, 8, 4), (128, 128, 64, 4, 4),
                                 (128, 256, 64, 4, 3), (256, 128, 64, 8, 3), (128, 128, 32, 8, 3)]
    ]


def _set_blocks(nargs):
    """The descriptors' block shapes follow the configuration being tried."""
    bm, bn, bk = nargs["BM"], nargs["BN"], nargs["BK"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bk, bn]
    nargs["c_desc"].block_shape = [bm, bn]


@triton.jit
def _persistent_tma_matmul(a_desc, b_desc, c_desc, bias_ptr, M, N, K,
                           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                           PROGRAMS: tl.constexpr, EPILOGUE: tl.constexpr):
    first = tl.program_id(0)
    rows = tl.cdiv(M, BM)
    cols = tl.cdiv(N, BN)
    steps = tl.cdiv(K, BK)
    per_group = 8 * cols  # tiles of one group of 8 row blocks
    for tile in tl.range(first, rows * cols, PROGRAMS, flatten=True):
        group_start = (tile // per_group) * 8
        group_rows = min(rows - group_start, 8)
        row = group_start + (tile % per_group) % group_rows
        col = (tile % per_group) // group_rows
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for s in range(steps):
            a = a_desc.load([row * BM, s * BK])
            b = b_desc.load([s * BK, col * BN])
            acc = tl.dot(a, b, acc)
        if EPILOGUE:
            n = col * BN + tl.arange(0, BN)
            acc += tl.load(bias_ptr + n, mask=n < N, other=0.0).to(tl.float32)[None, :]
            acc = 0.5 * acc * (1.0 + tl.math.erf(acc * 0.7071067811865476))
        c_desc.store([row * BM, col * BN], acc.to(c_desc.dtype))


_tuned = triton.autotune(
    configs=[triton.Config(c.kwargs, num_warps=c.num_warps, num_stages=c.num_stages,
                           pre_hook=_set_blocks) for c in _configs()],
    key=["M", "N", "K", "EPILOGUE"])(_persistent_tma_matmul)


def _programs(device):
    return torch.cuda.get_device_properties(device).multi_processor_count


def _persistent(A, B, bias):
    if A.dim() != 2 or B.dim() != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"operands of shapes {tuple(A.shape)} and {tuple(B.shape)} do not multiply")
    A, B = A.contiguous(), B.contiguous()
    if any(t.stride(0) * t.element_size() % 16 for t in (A, B)):
        raise ValueError("tensor descriptors need rows of a multiple of 16 bytes: A's are "
                         f"{A.stride(0) * A.element_size()}, B's {B.stride(0) * B.element_size()}")
    M, K = A.shape
    N = B.shape[1]
    C = torch.empty((M, N), dtype=A.dtype, device=A.device)
    # Block shapes are placeholders until the autotuner's pre-hook sets the configuration's.
    descs = [TensorDescriptor.from_tensor(t, [16, 16]) for t in (A, B, C)]
    args = (*descs, bias if bias is not None else A, M, N, K)
    if A.is_cuda:
        programs = _programs(A.device)
        _tuned[(programs,)](*args, PROGRAMS=programs, EPILOGUE=bias is not None)
    else:  # the Triton interpreter (tests): one configuration, three programs that loop unevenly
        _set_blocks({"a_desc": descs[0], "b_desc": descs[1], "c_desc": descs[2],
                     "BM": 32, "BN": 32, "BK": 16})
        _persistent_tma_matmul[(3,)](*args, BM=32, BN=32, BK=16, PROGRAMS=3,
                                     EPILOGUE=bias is not None)
    return C


def matmul_triton_persistent(A, B):
    """A @ B by the persistent tensor-descriptor Triton kernel above."""
    return _persistent(A, B, None)


def gemm_epilogue_triton_persistent(A, W, bias):
    """gelu(A @ W + bias) by the same kernel, the bias and the exact GELU applied to each output
    tile before its store."""
    return _persistent(A, W, bias)
