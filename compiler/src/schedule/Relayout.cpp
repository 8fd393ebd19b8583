// relayout(MODE): how a float32 input that the Func's kernel multiplies on tl.dot (rdot) reaches
// the TF32 tensor cores when its k axis is not contiguous (a row-major B[k, n]). TF32 products
// read k-contiguous tiles, so an operand laid out otherwise is either copied by the wrapper into
// a k-contiguous layout before each launch (`copy`, a tiled transpose kernel: one extra read and
// write of the operand) or read as it is (`none`: the kernel's tiles are transposed on the way to
// the tensor cores, which costs more per tile). `auto`, the default, copies operands of at least
// 65536 elements and reads smaller ones as they are: measured on an H100, copying is 2-3.5x
// faster for operands from 65536 elements up (matmul 256^3 to 8192^3, sigmoid(A@B) with k from
// 32 to 1024), and reading in place 1.3x faster below (k=32, n <= 1024), where the copy's launch
// outweighs it. float16 and bfloat16 inputs, `precision(ieee)` and operands already k-contiguous
// are never copied.
#include "schedule/Primitive.h"

namespace dtc {

Primitive relayout_primitive() {
  return word_primitive("relayout", {"auto", "copy", "none"}, "relayout-invalid", "copy",
                        &FuncSchedule::relayout);
}

} // namespace dtc
