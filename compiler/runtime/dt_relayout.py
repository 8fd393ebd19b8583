"""Copies a 2-D tensor into a layout whose `axis` is contiguous, through tiles that Triton
transposes in shared memory: reads and writes both coalesced, unlike a strided copy. Printed
into a module whose tl.dot operands need it (what follows the marker line, as dt_runtime.py)."""
import triton
import triton.language as tl

# --- embedded below ---


@triton.jit
def _dt_transpose_kernel(src_ptr, dst_ptr, rows, cols, src_stride0, src_stride1, dst_stride0,
                         dst_stride1, TILE: tl.constexpr):
    row = (tl.program_id(0).to(tl.int64) * TILE + tl.arange(0, TILE))[:, None]
    col = (tl.program_id(1).to(tl.int64) * TILE + tl.arange(0, TILE))[None, :]
    mask = (row < rows) & (col < cols)
    tile = tl.load(src_ptr + row * src_stride0 + col * src_stride1, mask=mask)
    tl.store(dst_ptr + row * dst_stride0 + col * dst_stride1, tile, mask=mask)


def _dt_k_contiguous(tensor, axis, plan=None, slot=None, direct=None):
    """`tensor` (2-D) copied to a layout in which dimension `axis` is contiguous; launched through
    the wrapper's `plan` (dt_runtime.py) under `slot` when given, and directly when `direct`
    (the plan's direct launches, _DtPlan.direct()) is."""
    rows, cols = tensor.shape
    strides = (1, rows) if axis == 0 else (cols, 1)
    out = tensor.new_empty_strided((rows, cols), strides)
    if out.numel():
        if direct:  # what varies: the two addresses (the plan's key fixes the rest)
            direct[1][slot](direct[0], tensor.data_ptr(), out.data_ptr())
            return out
        grid = ((rows + 63) // 64, (cols + 63) // 64)  # triton.cdiv costs microseconds a call
        args = (tensor, out, rows, cols, *tensor.stride(), *out.stride(), 64)
        if plan is None:
            _dt_transpose_kernel[grid](*args)
        else:
            plan.launch(slot, _dt_transpose_kernel, grid, args, 4, 3, (0, 1))
    return out
