#pragma once
// A product rounded before a maximum is subtracted from it. Softmax shifts its scores by their
// maximum, `exp(t * s - max)`, and relies on the largest score minus the maximum being exactly
// 0: PyTorch rounds `t * s` first, and every rounded product is at most the maximum of the
// rounded products. The GPU compiler, left alone, fuses the product and the subtraction into
// one multiply-add, which subtracts from the exact product: the largest score minus the maximum
// is then the product's rounding error, up to half an ulp of the maximum, and for scaled scores
// beyond 2^31 in magnitude exp2 of it overflows to inf, a NaN row where PyTorch's is finite
// (the special-values inputs of tests/gpu/online_special_values.py on an H200). So the product
// read by such a subtraction is printed as one the compiler cannot fuse (`_dt_mul_rn`, PTX
// mul.rn): every rounded score is then at most the maximum, as in PyTorch, at the cost of a
// second instruction per score.
//
// Which products: the sides of a subtraction `a - b` in float32 where either side is computed
// from a maximum (a max reduction or a maximum of two values, through any names; with the row
// in one tile the maximum is `max(x) * s` itself, kir/MaxBeforeScale.h), or whose result an
// exponential takes (a shift by a maximum read from memory, another kernel's): `a` and `b`
// themselves, or what they are of through reshapes, the sides of a select (a causal mask's
// -inf around the scores) and names (every binding of the name); a maximum is not entered.
//
// Preconditions: a verified kernel.
#include "kir/KernelIR.h"

namespace dtc {

void round_before_shift(kir::Kernel& kernel);

} // namespace dtc
