#pragma once
// Peeling the partial tile: a loop stepping through a dimension in whole tiles whose last tile
// may run past the dimension's end masks every load, store and reduced value of every tile
// (`y_mask = (y_idx < y_size) | y_EVEN`), though only the last one can be partial. Where the
// size is not a multiple of the tile (a vocabulary of 128256 in 16384-wide steps) that mask
// costs registers and instructions in every iteration; in a row reduction with a logarithm
// (KL divergence, bfloat16, 4096×128256) the masked tile held 80 registers a thread against 64
// without it, and the kernel ran 3% behind Liger-Kernel's (docs/benchmarks.md). The loop
// becomes two:
//
//     y_iter_full = y_size // 16384 * 16384
//     for y_iter in range(0, y_iter_full, 16384):   // full tiles: the mask is dropped
//         ...
//     for y_iter in range(y_iter_full, y_size, 16384):   // the partial tile, masked as before
//         ...
//
// A loop is peeled when it is innermost, holds no product (tl.dot: compile time matters more
// there, and its sizes are usually multiples of its tiles), is not warp-specialized or
// flattened, and binds, in its body, a mask of the form `idx < hi` or `(idx < hi) | FLAG` where
// hi is the loop's end and idx is `var + R`, R a range (`tl.arange`, expanded or converted) as
// wide as the step, the mask's tile of literal widths and at most 64 elements a thread (Triton
// unrolls a thread's elements, and the peeled loop is compiled twice: a tile of 512 elements a
// thread compiled in 58 s, peeled in 122 s, past a worker's time limit). In the loop over full
// tiles each such mask is true: a conjunction drops it,
// `tl.where(mask, v, 0.0)` becomes v (of the same type), and a load or store masked by it alone
// loses its mask (the loop is marked Stmt::full_tiles, where the verifier allows that). A loop
// where any other use of the mask remains, or whose mask a later statement reads, is left as it
// is. Values are unchanged: each iteration computes what it did, in the same order.
//
// Preconditions: a verified kernel, after `evict` (a tail loop reading the tiles the loop read
// is not a second pass over them).
#include "kir/KernelIR.h"

namespace dtc {

void peel_partial_tiles(kir::Kernel& kernel);

} // namespace dtc
