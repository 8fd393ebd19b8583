#pragma once
// Kernel IR verifier: parameters are unique and each has a launch argument, no statement
// assigns to a parameter, loops have positive steps, and every load or store whose address uses
// a tensor index is masked (no path reads or writes out of bounds).
#include "lower/KernelIR.h"

namespace dtc {

/// Throws InternalError if `kernel` breaks one of the invariants above.
void verify_kernel(const kir::Kernel& kernel);

} // namespace dtc
