#pragma once
// The row maximum taken before the scale: `max(t * s)` over an axis, t a tile and s a positive
// scalar, becomes `max(t) * s`, and a select choosing -inf around the product,
// `max(where(m, t * s, -inf))`, becomes `max(where(m, t, -inf)) * s`. FlashAttention's running
// maximum is the case: its scores are a product times 1/sqrt(d) log2(e) (FoldScaleConstants.h),
// and once the maximum no longer reads the scaled scores, `exp2(t * s - max)` is the only use
// of the product: one multiplication per score for both, instead of one for the maximum and one
// for the exponent. On an H200 that made the online loop 13-15% faster (docs/benchmarks.md).
// (The product is rounded on its own before the maximum is subtracted: RoundBeforeShift.h.)
//
// Exactness: rounding to nearest is monotone, so for a finite s > 0 the largest rounded product
// is the rounded product of the largest element, NaN and infinities included (max propagates
// NaN; -inf * s is -inf). For s = +inf the two differ where a row holds a zero (0 * inf is NaN)
// beside a positive value, so an s that may be infinite is taken only in the form dtc lowers
// `x / sqrt(len(k))` to, `c / sqrt(k_size)` (c finite and positive), with t a product over k
// itself: s is then infinite only for an empty k, where every product is 0 (its tiles are
// masked, or padded by TMA, to zeros) and both forms give NaN. Any other scale is left as it is.
//
// Names are followed to their single assignment (a name bound twice is not followed).
//
// Preconditions: a verified kernel (after FoldScaleConstants).
#include "kir/KernelIR.h"

namespace dtc {

void max_before_scale(kir::Kernel& kernel);

} // namespace dtc
