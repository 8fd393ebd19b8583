#pragma once
// Mask simplification on kernel IR: drops masking that is provably redundant.
//  - `tl.where(m, v, 0.0)` becomes `v` when `v` is already 0.0 wherever `m` is false: a load
//    whose mask includes `m` as a conjunct (masked lanes read 0.0), a cast of such a value, a
//    sum or product of such values, or a name bound once to one of these. A reduction's masked
//    operand (`tl.sum(tl.where(k_mask, A, 0.0))` with A loaded under `x_mask & k_mask`) and a
//    `tl.dot` operand read from a masked load lose their `tl.where`.
//  - a conjunction repeats no condition (`m & m` is `m`).
// Only a `tl.where` choosing 0.0 is dropped: the load's `other` is 0.0, and a product of two
// such values is 0.0 too (never 0 * inf). The condition's names must each be bound once, so
// that they mean in the `tl.where` what they meant in the load.
//
// Preconditions: a verified kernel; names bound once keep the value they were bound to.
#include "kir/KernelIR.h"

namespace dtc {

void simplify_masks(kir::Kernel& kernel);

} // namespace dtc
