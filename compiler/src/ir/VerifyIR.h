#pragma once
// IR verifier: checks the invariants every pass must keep (each node's dims follow from its
// operands; accesses match their tensor's rank). A failure is a compiler bug.
#include "ir/IR.h"

namespace dtc {

/// Throws InternalError naming `after_pass` if `program` breaks an IR invariant.
void verify_ir(const ir::Program& program, const char* after_pass);

} // namespace dtc
