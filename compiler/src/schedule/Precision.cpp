// precision(MODE): how tl.dot multiplies float32 operands in the Func's kernel (rdot): `tf32`
// (the default, Triton's: tensor cores with 10-bit mantissas, about 1e-3 relative error),
// `tf32x3` (three TF32 products, close to float32) or `ieee` (exact float32 arithmetic, slower).
// float16 and bfloat16 operands are unaffected. The generated module's DOT_PRECISION reports
// it, so checks can pick their tolerance.
#include "schedule/Primitive.h"

namespace dtc {

Primitive precision_primitive() {
  return word_primitive("precision", {"tf32", "tf32x3", "ieee"}, "precision-invalid", "ieee",
                        &FuncSchedule::precision);
}

} // namespace dtc
