#pragma once
// The partitions of a warp-specialized product on Hopper. Triton 3.6's own warp specialization
// (`tl.range(..., warp_specialize=True)`) writes wrong results on sm_90, so there a kernel whose
// product loop is warp-specialized (`warp_specialize(k)`) is printed a second time in Gluon,
// Triton's lower-level language, in which the partitions are written out
// (codegen/GluonPrinter.cpp):
//
//   - a producer warp streams both operands' tiles into a ring of shared-memory buffers through
//     their tensor descriptors (TMA), one `ready` barrier per buffer;
//   - the kernel's warps (the default partition) wait for each buffer, multiply on the
//     warpgroup instructions (wgmma), release the buffer (`empty`) once its product has retired,
//     and run the epilogue: every statement after the product, as in the Triton kernel.
//
// This file finds those parts in a kernel: the statements before the loop over output blocks
// (`before`), that loop (persistent programs) or none (one block per program), the block's
// statements before the product (`setup`), the accumulator, the product's loop and its two
// operand loads, and the statements after it (`after`). Each partition prints only the
// statements the names it reads depend on (`slice`): the producer needs the descriptors and the
// operands' offsets, the consumer what the epilogue reads.
//
// Preconditions: a verified kernel after every pass (the form lower/LowerDots.cpp gives a
// warp-specialized product: two descriptor loads, one tl.dot into the accumulator).
#include "kir/KernelIR.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace dtc::kir {

struct WarpPartitions {
  /// One operand of the product: its tile's name and its load through a descriptor (DescLoad).
  struct Operand {
    std::string tile;
    const Expr* load = nullptr;
  };
  std::vector<const Stmt*> before; // the kernel's statements before the loop over blocks
  const Stmt* blocks = nullptr;    // the persistent loop over output blocks; null: one block
  std::vector<const Stmt*> setup;  // the block's statements before the accumulator's zeros
  std::string acc;                 // the accumulator: zeros, then tl.dot(a, b, acc) in `product`
  const Stmt* product = nullptr;   // the loop over the reduction label
  Operand a, b;
  std::vector<const Stmt*> after; // the block's statements after the product
  /// The constexpr flags under which the Gluon kernel runs: each operand through a descriptor
  /// and in 16-bit floats (the names the loop's `warp_specialize` condition reads but the
  /// device's flag).
  std::vector<std::string> flags;
};

/// The partitions of `kernel`'s warp-specialized product, or nullopt with `why` set to the
/// reason there are none (no such loop, or one whose form the Gluon printer does not take).
std::optional<WarpPartitions> warp_partitions(const Kernel& kernel, std::string& why);

/// The statements of `stmts` that names in `needed` depend on, in order: walking backwards, an
/// assignment is kept when its name is needed, and then the names it reads are needed too.
/// `needed` ends as every name the kept statements and the given names read.
std::vector<const Stmt*> slice(const std::vector<const Stmt*>& stmts,
                               std::set<std::string>& needed);

/// The names statement `s` reads (its operands', its body's, a loop's bounds).
void reads(const Stmt& s, std::set<std::string>& out);

} // namespace dtc::kir
