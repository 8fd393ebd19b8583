#pragma once
// Triton refuses a tensor of more than 2^20 elements (kir::kMaxTensorNumel). A schedule that
// tensorizes many labels can ask for one: 16 x 32 x 16 x 32 x 16 for five tensorized labels.
//
// Preconditions: `kernel` lowered and through its passes (dead values are gone). Reports an
// error at `where` (the Func's tensorize statement) when a tensor of literal extents is too
// large; records in kernel.sized_shapes the shapes whose extents include a tile-width parameter,
// which the wrapper checks with the call's sizes before the first launch.
#include "kir/KernelIR.h"
#include "support/Diagnostics.h"

namespace dtc {

void check_tensor_sizes(kir::Kernel& kernel, const std::string& func, Loc where,
                        DiagnosticEngine& diags);

} // namespace dtc
