#pragma once
// Reductions over a label tied to an output dimension, both one whole tile: in RMSNorm and
// LayerNorm, `rsum(X[x, k], k)` beside `X[x, y]`, where k and y index the same dimension of X
// (so the wrapper gives them one size) and each is one tile as wide as that size. The reduction
// is made over y instead of k: both read the same tile, loaded once, and the reduction runs over
// the output's own axis, with no second load and no data moved between axes.
//
// Preconditions: fused Funcs inlined, reductions split (`plan` as lowering reads it).
// Postcondition: each such reduction reduces over the output label; its operand does not vary
// along that label otherwise (the condition of the rewrite).
#include "ir/IR.h"
#include "lower/KernelPlan.h"

namespace dtc {

void fold_tied_reductions(ir::Program& program, const KernelPlan& plan);

} // namespace dtc
