// index(MODE): the integer width of the index and address arithmetic in the Func's kernel.
// `auto`, the default, lets the wrapper choose per call: int32 when no index of the call can
// exceed it (32-bit address arithmetic is about half the instructions), else int64. `int64`
// always computes in int64. Measured on an H100, int32 made element-wise and row-reduction
// kernels 5-9% faster and float16/bfloat16 matmuls 4-5%, but a float32 (TF32) matmul at 8192^3
// 3% slower: a template can offer both (`f.index({auto, int64})`) for the explorer to measure.
#include "schedule/Primitive.h"

namespace dtc {

Primitive index_primitive() {
  return word_primitive("index", {"auto", "int64"}, "index-invalid", "int64", &FuncSchedule::index);
}

} // namespace dtc
