#pragma once
// Split reductions: a Func whose schedule blocks one of its reduction labels k (thesis 3.3.2) is
// defined as one reduction over k. Each program instance reduces one block of k:
//   - by default the partial results go to a float32 temporary `f_partial[dims..., k_parts]`,
//     computed by a kernel of its own, and f becomes the reduction of that temporary over
//     k_parts (a second kernel), with k_parts = cdiv(size of k, block);
//   - with `f.atomic(k)` every program combines its partial result into f with an atomic
//     operation, and f is accumulated in float32.
//
// The partial kernel reduces its block of k in steps of the split Func's tensor size for k; the
// second kernel reduces the partial results up to kPartialsPerStep at a time (fewer when the
// output's tile would pass Triton's 2^20 elements per tensor), so any number of them fits.
//
// Preconditions: schedule applied and validated; fused Funcs inlined (`plan` holds what fusion
// decided). Postcondition: in the plan's schedule the only blocked reduction labels left are
// those recorded in `plan.split`.
#include "ir/IR.h"
#include "lower/KernelPlan.h"
#include "lower/Names.h"

namespace dtc {

inline constexpr long long kPartialsPerStep = 256;

/// The symbols it adds (`k_parts`, `f_partial`) are named in `py` as they are added.
void split_reductions(ir::Program& program, KernelPlan& plan, PythonNames& py,
                      DiagnosticEngine& diags);

} // namespace dtc
