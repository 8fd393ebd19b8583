#pragma once
// Dead-code elimination on kernel IR: removes assignments whose variable nothing reads (for
// example a block count that only a `%` in a longer map would use), so generated kernels hold
// no dead code. Runs to a fixed point.
#include "lower/KernelIR.h"

namespace dtc {

void eliminate_dead_code(kir::Kernel& kernel);

} // namespace dtc
