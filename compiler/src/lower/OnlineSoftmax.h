#pragma once
// Online softmax: `f.online(l)` (schedule/Online.cpp) asks f's kernel to compute its reductions
// over `l` in one loop over `l`, FlashAttention's algorithm. This pass, run once fusion has
// inlined the softmax into f, puts f's value in that form and records the loop's reductions in
// the plan (KernelPlan::online); LowerOnline.cpp emits the loop.
//
// The form. Among the reductions over `l` in f's value and in the values of the Funcs f's kernel
// stores, those outside any other reduction are the loop's members:
//   - one rmax, M = rmax(X, l), whose running value rescales the others (it may appear only
//     inside them, as in attention, where no output reads the maximum itself);
//   - sums (rsum, rdot) whose summand reads M as one factor exp(Y - M), Y free of M: their
//     running value is kept relative to the running maximum and rescaled by exp(old - new) as
//     it grows, which is exact since exp(Y - M) = exp(Y - m) * exp(m - M);
//   - any other sum, maximum or minimum over `l` that does not read M, accumulated as it is.
// No member reads another reduction over `l` but M, and no reduction over `l` sits inside a
// reduction over another label. Before the check, factors of a sum's summand that do not vary
// along `l` and hold a reduction over `l` are taken out of the sum: softmax's denominator in
// attention, rdot(e / rsum(e, l), V, l) = rdot(e, V, l) / rsum(e, l).
//
// Preconditions: schedule applied and validated, fused Funcs inlined, reductions split.
// Postcondition: for every Func with `online`, `plan.online` holds its group, or `diags` says
// why the algorithm does not have the form, at the `online` statement.
#include "ir/IR.h"
#include "lower/KernelPlan.h"

namespace dtc {

void plan_online(ir::Program& program, KernelPlan& plan, DiagnosticEngine& diags);

} // namespace dtc
