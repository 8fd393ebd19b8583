#pragma once
// Constant folding: evaluates arithmetic and math functions whose operands are all literals, so
// `-1`, `2 * 0.5` and `sqrt(2)` reach code generation as single numbers (Triton's math functions
// take tensors, not Python floats).
#include "ir/IR.h"

namespace dtc {

/// Returns `e` with constant subexpressions folded. Preserves dims.
ir::ExprPtr fold_constants(const ir::ExprPtr& e);

} // namespace dtc
