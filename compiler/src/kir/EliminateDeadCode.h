#pragma once
// Dead-code elimination on kernel IR: removes every assignment to a name that no other statement
// reads (a block count that only a longer map would use, an accumulator nothing reads after its
// loop), then loops left with nothing to do. Runs to a fixed point.
//
// Preconditions: none beyond a verified kernel. Stores and barriers are never removed.
#include "kir/KernelIR.h"

namespace dtc {

void eliminate_dead_code(kir::Kernel& kernel);

} // namespace dtc
