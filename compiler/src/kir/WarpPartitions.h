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
// operands' offsets, the consumer what the epilogue reads. An operand loaded transposed (the
// tensor holds the tile's transpose, as nn.Linear's weight [n, k]) is copied as the tensor
// holds it and read by the product through a transposed view of its slot. A store through a
// descriptor is printed as a pointer store.
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

/// The epilogue of a warp-specialized product run on chunks of the tile: `rows` rows at a time
/// (warp_specialize(k, m:R), Kernel::epilogue_rows), and of tiles wider than 128 columns, one
/// part of 128 columns after the other (`staged_columns`). Each part of the accumulator is
/// staged in shared memory in float32 and each chunk of it loaded back in a loop. The
/// statements of the consumer's slices that depend on the chunk (they read the accumulator, or
/// a range of the tile's rows or split columns expanded along them, or fill such a tile, or
/// read a name that does) move into the chunk, rewritten for it: the range becomes
/// `arange(rows)[:, None] + row` (and the columns' `arange(cols)[None, :] + part * cols`), the
/// tiles [rows, cols]; the others stay where they are.
struct StagedEpilogue {
  std::vector<const Stmt*> before, setup; // what stays before the blocks and in the block
  std::vector<StmtPtr> chunk;             // one chunk's statements: moved, the epilogue's
};

/// What a partition runs before the blocks and in each block: the statements of `p.before`
/// and `p.setup` that the names in `needed` (read by what it runs in the block) and the
/// loops' bounds depend on.
struct Slices {
  std::vector<const Stmt*> before, setup;
};
Slices partition_slices(const WarpPartitions& p, std::set<std::string> needed);

/// The consumer's slices: what the epilogue reads.
Slices consumer_slices(const WarpPartitions& p);

/// The shared memory of the Gluon kernel's ring of `stages` buffers of both operands' tiles (in
/// 16-bit floats), with its barriers; and of the epilogue's float32 stage.
long long ring_bytes(const WarpPartitions& p, int stages);
long long stage_bytes(const WarpPartitions& p);
/// The shared memory a program may use on the H100 and H200, less what the kernel's own
/// bookkeeping takes beside its buffers (Triton's per-block maximum is 232448 bytes).
inline constexpr long long kHopperSharedBytes = 232448 - 1024;

/// The columns of the parts a staged epilogue runs on: at most 128 (the float32 stage of a
/// part holds 64 KiB for 128 rows).
long long staged_columns(const WarpPartitions& p);

/// The staged form of `p`'s epilogue for chunks of `rows` rows of column part `part`, `row` the
/// chunk's first row and `chunk` the name of its part of the accumulator; or nullopt with `why`
/// (the epilogue reduces across chunks, reads a vector along the tile, or holds what the rewrite
/// does not take).
std::optional<StagedEpilogue> stage_epilogue(const WarpPartitions& p, int rows, int part,
                                             const std::string& row, const std::string& chunk,
                                             std::string& why);

/// The statements of `stmts` that names in `needed` depend on, in order: walking backwards, an
/// assignment is kept when its name is needed, and then the names it reads are needed too.
/// `needed` ends as every name the kept statements and the given names read.
std::vector<const Stmt*> slice(const std::vector<const Stmt*>& stmts,
                               std::set<std::string>& needed);

/// The names statement `s` reads (its operands', its body's, a loop's bounds).
void reads(const Stmt& s, std::set<std::string>& out);

} // namespace dtc::kir
