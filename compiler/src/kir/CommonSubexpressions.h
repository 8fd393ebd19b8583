#pragma once
// Common-subexpression elimination on kernel IR.
//
// Walks each block in order, keeping the values computed so far that are still valid (none of
// the names they read has been bound again since, and, for a value that reads memory, no store
// or barrier came between):
//  - a subexpression equal to a value a name already holds becomes that name (a second
//    `y_mask = y_idx < y_size` for the same `y_idx` is dropped);
//  - a subexpression computed twice in one block is bound to a new name before its first use
//    (softmax's `tl.exp(A)` in the row sum and in the quotient is evaluated once).
// Then an assignment this pass turned into a copy `a = b`, of a name bound once from another
// bound once, is removed, its reads reading `b`. A value available before a loop stays available
// inside it when the loop binds none of the names it reads and stores nothing it may load.
//
// Preconditions: a verified kernel. Names are bound by Assign and loops only; every expression
// is pure but for Load, which only stores and barriers can affect.
#include "kir/KernelIR.h"

namespace dtc {

void eliminate_common_subexpressions(kir::Kernel& kernel);

} // namespace dtc
