#pragma once
// Split reductions: a Func whose schedule blocks one of its reduction labels k (thesis 3.3.2) is
// defined as one reduction over k. Each program instance reduces one block of k:
//   - by default the partial results go to a float32 temporary `f_partial[dims..., k_parts]`,
//     computed by a kernel of its own, and f becomes the reduction of that temporary over
//     k_parts (a second kernel), with k_parts = cdiv(size of k, block);
//   - with `f.atomic(k)` every program combines its partial result into f with an atomic
//     operation, and f is accumulated in float32.
//
// Preconditions: schedule applied and validated; fused Funcs inlined. Postcondition: the only
// blocked reduction labels left are those recorded in FuncSchedule::split.
#include "ir/IR.h"
#include "schedule/Schedule.h"

namespace dtc {

void split_reductions(ir::Program& program, Schedule& schedule, DiagnosticEngine& diags);

} // namespace dtc
