#pragma once
// Constant factors folded into scalar scales on kernel IR: a float32 tile multiplied by a
// scalar and then by a constant, `(t * s) * c`, becomes `t * (s * c)`: one multiplication per
// element instead of two, the other once per program. FlashAttention's scores are the case:
// scaled by 1/sqrt(d) (a scalar, LowerExprs) and then by log2(e) for exp2 (LowerOnline), they
// cost one multiplication each, as in a hand-written kernel whose scale has log2(e) folded in.
// Through a select choosing a constant, `where(m, t * s, k) * c` becomes
// `where(m, t * (s * c), k * c)` (a causal mask's -inf stays -inf), `k * c` rounded to float32
// as the kernel would round it.
//
// Rounding: `s * c` is rounded where `t * s` was, so a product moves by at most an ulp or so;
// infinities and NaN come out as before (0 * inf is NaN either way, and an overflow happens at
// the same magnitude up to that ulp).
//
// Preconditions: a verified kernel.
#include "kir/KernelIR.h"

namespace dtc {

void fold_scale_constants(kir::Kernel& kernel);

} // namespace dtc
