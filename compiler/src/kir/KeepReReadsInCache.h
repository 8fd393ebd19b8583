#pragma once
// Cache hints for inputs a kernel reads again: a load in a loop of an input that a later
// statement of the same block reads again (a later loop, or a whole tile after the loop) is
// marked `evict_last`, so the lines stay in L2 for the second pass over them. A row reduction
// whose row does not fit in one tile reads the row once for its statistics and again for its
// output (RMSNorm's sum of squares, then the scaled row; LayerNorm's mean, variance, then the
// normalized row); without the hint the second pass's reads compete in L2 with the streaming
// reads of other program instances. On an H200 (bfloat16, 16384×4096, rows in 1024- and
// 2048-wide steps) the hint made RMSNorm 3–5% faster at every schedule timed and LayerNorm and
// softmax 1–3% at most (docs/benchmarks.md). Inductor gives the same hint in the same place.
//
// Only tiles of inputs count: a gather's load (`P[x, T[x]]`, one element per row) is no second
// pass over the row, and a tensor the kernel writes (an output, a fusion temporary) is not
// hinted. Kernels with a product on tl.dot are left alone (their tiles are re-read by other
// program instances, an L2 reuse the hint was not measured on), as are descriptor loads.
//
// Preconditions: a verified kernel. Changes no value: only the loads' eviction hint.
#include "kir/KernelIR.h"

namespace dtc {

void keep_rereads_in_cache(kir::Kernel& kernel);

} // namespace dtc
