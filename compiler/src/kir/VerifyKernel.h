#pragma once
// Kernel IR verifier, run after lowering and after every kernel pass:
//  - parameters are unique and each has a launch argument;
//  - every name is bound (a parameter, an earlier assignment or an enclosing loop) before it is
//    read, with the type it was last bound with; a name bound before a loop keeps its type
//    when the loop binds it again (Triton requires it of loop-carried values); no statement
//    binds a parameter;
//  - loops step by a positive literal or a parameter;
//  - every load and store of a tile (a tensor of addresses) is masked, so no path reads or
//    writes out of bounds; a store's value fits its addresses' shape.
// The factories of KernelIR.h have already checked each node's operand types.
#include "kir/KernelIR.h"

namespace dtc {

/// Throws InternalError, naming `after` (the pass just run), if `kernel` breaks an invariant.
void verify_kernel(const kir::Kernel& kernel, const std::string& after = "lowering");

} // namespace dtc
