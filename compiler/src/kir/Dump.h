#pragma once
// The kernel IR as text, independent of Triton's spelling: what `dtc --dump-after=PASS` prints,
// what the verifier quotes and what the passes' golden tests (compiler/tests/kir/*.kir)
// compare. Every binding shows its type; operators are infix, everything else `name(args)`.
//
//   kernel relu_out_kernel(A_ptr: ptr(A_ptr), out_ptr: ptr(out_ptr), x_size: int,
//                          x_TILE: constexpr int) warps=4 stages=3 grid=[cdiv(x_size, 1)]
//     x_block: i32 = program_id(0)
//     store(out_ptr + x, maximum(a, 0.0), mask=x_mask)
#include "kir/KernelIR.h"

#include <string>

namespace dtc::kir {

std::string dump(const Expr& e);
std::string dump(const std::vector<StmtPtr>& stmts, int depth = 0);
std::string dump(const Kernel& kernel);

} // namespace dtc::kir
