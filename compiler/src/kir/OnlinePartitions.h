#pragma once
// The partitions of a warp-specialized online loop on Hopper (`online(l)` with
// `warp_specialize(l)`: FlashAttention). As for a product loop (WarpPartitions.h), Triton 3.6's
// own warp specialization is wrong on sm_90, so the kernel is printed a second time in Gluon
// (codegen/GluonOnlinePrinter.cpp), in the form FlashAttention-3 runs on Hopper:
//
//   - a producer warp copies the block's query tile once, then each step's key and value tiles
//     into a ring of shared-memory buffers through their tensor descriptors (TMA), with a
//     `ready` barrier for each so that a step's scores start before its values arrive;
//   - one consumer partition per warpgroup of the kernel's warps (4 warps each), each on its
//     share of the block's query rows: per step it waits for the keys, computes the scores on
//     the warpgroup instructions (wgmma), runs the loop's statements (the running maximum, the
//     exponentials, the sums), multiplies the probabilities by the values into the rescaled
//     accumulator, releases the step's buffers, and after the loop runs the statements after it.
//
// With persistent programs (`persistent`) both partitions run the loop over the output's blocks,
// each block as above: the queries go to two buffers in turn where both fit beside the ring
// (one where they do not), each taken again once every consumer has run its loops on the block
// before in it (`q_empty`), and the ring's count runs on from block to block, so the next
// block's queries and tiles load while the consumers finish this one.
//
// The kernel's values are tiles over all of its labels, most of them of one element (b:1, h:1,
// ..., in the form lowering gives every kernel); Gluon needs each value's layout written out.
// Each value the consumer computes is one of four forms (`Form`): a scalar, a vector along the
// block's query rows, a vector along one column axis, or a tile over the rows and one column
// axis; a tile's column axis is the scores' (the keys') or the output's, and its layout is the
// layout the warpgroup instructions give that product's result. This file finds the parts and
// gives every value of the consumer its form, or says why a kernel does not have this form.
//
// Preconditions: a verified kernel after every pass.
#include "kir/KernelIR.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace dtc::kir {

/// The form of a value in the consumer (see above).
struct Form {
  enum class Kind { Scalar, Rows, Cols, Tile };
  /// Which product's layout a column vector or a tile is in: the scores' or the output's (its
  /// column axis). A row vector is in the one it was computed in (the scores' where it was
  /// made from indices alone); where it meets the other product's values it is converted.
  enum class Of { Scores, Output };
  Kind kind = Kind::Scalar;
  Of of = Of::Scores;
  bool operator==(const Form&) const = default;
};

struct OnlinePartitions {
  /// One online loop: under a causal mask there are two, one after the other (the key tiles
  /// before the block's first query, then the diagonal), which share the ring, the running
  /// values and the accumulator.
  struct Loop {
    const Stmt* loop = nullptr;
    const Stmt* k = nullptr;           // the key tile, loaded in the loop (transposed: value_int)
    const Stmt* v = nullptr;           // the value tile, loaded in the loop
    std::string v_read;                // the name the update reads the value tile as (it or a cast)
    const Stmt* scores = nullptr;      // the scores: the product of q and k (reshaped)
    const Stmt* update = nullptr;      // the accumulator's update: dot(p, v_read, rescaled acc)
    std::vector<const Stmt*> consumer; // the consumer's statements of it (less the loads)
    /// Whether the update runs one step late, its product overlapping the next step's
    /// exponentials (the consumer then issues step j's scores and step j-1's update together):
    /// where no other statement of the loop reads the accumulator, none after the update binds
    /// a name it reads, and the ring has 2 stages or more. A consumer then holds K_j and
    /// V_{j-1}; it releases a step's keys once its scores are in and its values once its update
    /// is, so that with 2 stages the producer still loads ahead (on an H200 the pipelined loop
    /// of 2 stages ran 3-9% faster than the plain one; when one `empty` barrier released both,
    /// 2-12% slower).
    bool pipelined = false;
  };
  /// Persistent programs: the loop over output blocks the online loops run in, and the
  /// kernel's statements before it (null and none: one block per program).
  const Stmt* blocks = nullptr;
  std::vector<const Stmt*> outer;
  std::vector<const Stmt*> before; // the block's statements before the loops
  std::vector<Loop> loops;         // the online loops, one after the other
  std::vector<const Stmt*> after;  // the statements after them
  const Stmt* q = nullptr;         // the query tile, loaded through a descriptor before them
  std::string acc;                 // the accumulator
  int rank_of_values = 0;          // the dimensions of the kernel's values: one per label
  int row_axis = -1, score_axis = -1, out_axis = -1; // their axes of rows, keys and output
  Extent rows, score_cols, out_cols;                 // the block's rows, key step, output width
  /// The form `f` as the consumer prints it: where the key step and the output's width are
  /// one extent the two products' layouts are one, and every form is the scores'.
  Form normal(Form f) const {
    if (score_cols == out_cols) f.of = Form::Of::Scores;
    return f;
  }
  /// The consumer's statements before the loops, and before the loop over blocks.
  std::vector<const Stmt*> consumer_before, consumer_outer;
  /// What the producer needs before the loops (and before the loop over blocks): the
  /// descriptors and the copies' offsets.
  std::vector<const Stmt*> producer_before, producer_outer;
};

/// The partitions of `kernel`'s warp-specialized online loop, or nullopt with `why`.
std::optional<OnlinePartitions> online_partitions(const Kernel& kernel, std::string& why);

/// Whether `kernel`'s warp-specialized loops (if any) are online loops: two products in each.
bool has_online_loop(const Kernel& kernel);

/// The form of `e` in the consumer, given the forms of the names it reads; nullopt where the
/// consumer cannot compute it (a value over another axis, a reduction along the rows, a load).
std::optional<Form> online_form(const OnlinePartitions& p, const Expr& e,
                                const std::map<std::string, Form>& names);

/// The form of an operation's operands together (a row and a column vector make a tile), or
/// nullopt where they do not combine (two column axes).
std::optional<Form> combine_forms(const OnlinePartitions& p, const std::vector<Form>& operands);

/// The form a shape of the kernel's values has (its non-unit axes), or nullopt.
std::optional<Form> form_of_shape(const OnlinePartitions& p, const Shape& shape);

} // namespace dtc::kir
