#pragma once
// The module's reference: the algorithm as written, evaluated in PyTorch in float32 with every
// value aligned by label (a second back end, independent of the kernels, to check them).
#include "codegen/PythonCodegen.h"

namespace dtc {

/// The body of `reference_<f>` after its argument checks: each Func `f` reads, then `f`,
/// computed as a tensor over its labels, and `f` returned in the inputs' dtype.
std::string print_reference_values(const ModuleInput& in, const ir::Symbol* f);

} // namespace dtc
