#pragma once
// Loop-invariant code motion on kernel IR: an assignment in a loop's body whose value reads no
// name the loop binds is moved before the loop, so it is computed once rather than once per
// iteration (attention's scaled exponentials and their row sums, loaded or computed once per
// block of rows instead of once per `n` tile). Inner loops first, so a value invariant in
// several enclosing loops moves out of all of them.
//
// A value that loads moves only when the loop stores nothing through the same pointer
// parameter and has no barrier: distinct pointer parameters never alias where one is written
// (outputs and temporaries are fresh tensors, and an `out=` overlapping an input is computed
// into a fresh one first; docs/language.md). Its address and mask read only names bound
// outside the loop, so it is as much in bounds before the loop as inside it.
//
// The moved value stays live across the loop (in registers when it is a tile): the price of
// computing it once.
//
// Preconditions: a verified kernel. Only names bound once in the whole kernel move.
#include "kir/KernelIR.h"

namespace dtc {

void hoist_loop_invariants(kir::Kernel& kernel);

} // namespace dtc
