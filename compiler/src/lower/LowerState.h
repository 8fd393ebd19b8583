#pragma once
// What the stages of lowering one Func share (internal to lower/; LowerFunc.h is the interface).
//
// LowerFunc.cpp runs the stages in order, each in a file of its own that takes this state
// explicitly:
//
//   LowerLayout.cpp      the tensor layout: one axis per tensorized label, and its width
//   LowerSignature.cpp   the kernel's parameters and how the wrapper fills each
//   LowerMapping.cpp     program instance -> output block (`map`), and the tl.arange axes
//   LowerLoops.cpp       the loop nest: one loop (or whole tile) per dimension, and where each
//                        reduction is computed (hoisting)
//   LowerProducers.cpp   fused Funcs computed into temporaries at a loop level
//   LowerExprs.cpp       expressions: loads, arithmetic, builtins
//   LowerReductions.cpp  rsum/rmax/rmin (and rdot off the tensor cores) as loops or tile reductions
//   LowerDots.cpp        rdot on tl.dot: operand tiles, dtypes and relayout; the layout's loop
//                        tiles (labels only such products reduce over), warp specialization
//
// Once the layout and the signature are built they are only read; the loop nest, the bindings
// of labels to indices and the caches of computed values change as the body is emitted, and
// the expression stages call back into the loop nest (a reduction emits its own loop).
#include "ir/IRVisitor.h"
#include "kir/KernelIR.h"
#include "lower/KernelPlan.h"
#include "lower/Names.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace dtc::lowering {

/// log2(e): exp(x) is exp2(x log2(e)) (the online loop's base-2 maximum).
inline constexpr double kLog2E = 1.4426950408889634;

using ir::Label;
using Value = kir::ExprPtr;
using Body = std::vector<kir::StmtPtr>;

/// One tensor axis of the kernel: a tensorized label and its tile width.
struct Axis {
  Label label;
  kir::Extent width; // a literal or a constexpr parameter
};

/// The kernel's tensor layout (LowerLayout.cpp): every value is a tensor of one axis per
/// tensorized label, sized by the tile width where it varies and 1 elsewhere.
struct KernelLayout {
  std::vector<Axis> axes;
  /// Labels tiled only as the reduction of products on tl.dot whose operands are input tiles
  /// loaded straight from memory (plan_loop_tiles, LowerDots.cpp): each has a tile width, its
  /// loop's step and its 1-D index vector, but no axis in the values, so the product and all
  /// that follows it are [i, j] matrices (the form Triton's warp specialization takes).
  std::vector<Axis> loop_tiles;
  std::vector<Label> tiles;      // labels whose width is a constexpr parameter (`x_TILE`)
  std::set<Label> dot_labels;    // labels some rdot reduces over or produces
  int axis_of(Label l) const;    // -1 when `l` has no axis
  bool loop_only(Label l) const; // `l` is one of the loop tiles
  bool has_tile(Label l) const { return axis_of(l) >= 0 || loop_only(l); }
  kir::Extent width_of_axis(Label l) const; // an axis's or a loop tile's width
  /// The shape of a value varying along `dims`: the tile width on their axes, 1 elsewhere.
  kir::Shape shape_of(const ir::Labels& dims) const;
  std::string text() const; // `x:128, k:x_TILE`
};

/// How a dimension label is indexed at the current point of the kernel.
struct Binding {
  Value idx;  // index scalar or layout-shaped tensor
  Value mask; // null when every index is in range by construction
  // For a tensorized label: the same indices and mask as 1-D vectors, from which tl.dot operands
  // are loaded directly as 2-D tiles.
  Value vec, vec_mask;
  // The tile's first index, a scalar (null: 0): where a tensor descriptor's block starts.
  Value origin;
};

struct LowerState {
  LowerState(const ir::Program& p, const KernelPlan& plan, const PythonNames& names,
             const ir::Symbol* f, DiagnosticEngine& d);

  // ---- what is lowered (read only) ----
  const ir::Program& prog;
  const PythonNames& py; // every name below is built from these
  const FuncSchedule& fs;
  const SplitReduction* split;                  // null when the Func's reduction is not split
  const Materialized& materialized;             // producers this kernel computes into temporaries
  const OnlineGroup* online;                    // online(l): what the one loop over l computes
  const std::vector<const ir::Symbol*>& stored; // Funcs this kernel stores too (store_in)
  const ir::Symbol* func;
  const ir::FuncDef& def;
  DiagnosticEngine& diags;

  // ---- what is built ----
  kir::Kernel kernel;
  KernelLayout layout;                        // LowerLayout.cpp
  ir::Labels labels;                          // every label the kernel indexes (LowerSignature.cpp)
  std::map<Label, std::vector<Binding>> bind; // label -> its bindings, innermost last
  std::map<const ir::Expr*, Value> hoisted;   // reductions computed at an outer loop level
  std::vector<std::map<std::string, Value>> cache; // per loop level: computed values by key
  std::set<const ir::Symbol*> stores_done;         // stored Funcs whose store is emitted
  bool wide_whole = false;  // whole numbers in int64 (a computed position being lowered)
  bool online_done = false; // the online loop is emitted
  /// A condition every lane satisfies where it is lowered now (the causal mask's, in the
  /// online loop's tiles before the diagonal): `where` on it is its second operand.
  std::string known_true;
  /// Inside the online loop: the running maximum (OnlineGroup::max), kept in base 2 (the
  /// maximum of the scores times log2(e)), which exp(x - max) reads as exp2(x log2(e) - max).
  const ir::Expr* base2_max = nullptr;
  std::set<std::string> used;             // names handed out
  std::map<std::string, kir::Type> types; // every bound name's type, as last bound

  // ---- the schedule, as lowering reads it ----
  bool tensorized(Label l) const { return fs.fully_tensorized(l) || fs.tensor_of(l) > 1; }
  /// The blocked reduction label of a split reduction: reduced over its block only.
  bool is_split(Label l) const { return split && split->rvar == l; }
  /// Only the definition's top-level reduction is split; a nested reduction over the same
  /// label (a fused softmax denominator inside attention's rdot) covers the whole dimension.
  bool splits(const ir::Expr& e) const { return split && &e == def.value.get(); }
  bool is_part(Label l) const { return split && split->part == l; }
  /// Whether reduction `e` over `r` takes its whole extent as one tile (no loop).
  bool whole_tile(const ir::Expr& e, Label r) const {
    return fs.fully_tensorized(r) && (!fs.block_of(r) || splits(e));
  }

  // ---- names and their types ----
  /// A reference to a bound name (a parameter or a local), typed as last bound.
  Value ref(const std::string& name) const;
  /// Appends `name = value` to `body` and returns a reference to `name`, which fresh() then
  /// never hands out: a load named after an input (`xi_pid`) must not rebind a map variable.
  Value let(Body& body, const std::string& name, Value value);
  /// `base`, or `base_2`, `base_3`, ... : a name not yet used; reserves it.
  std::string fresh(const std::string& base);
  bool is_param(const std::string& name) const;
  void add_param(const std::string& name, kir::LaunchArg launch, kir::Type type,
                 bool constexpr_ = false);
  /// `v` in the kernel's index type (kir::kIndexParam), which the wrapper picks per call:
  /// int32 where every index fits, else int64; always int64 under `index(int64)`.
  Value index(Value v);
  Value extent_value(const kir::Extent& x) const;
  /// The least width of `l`'s tile parameter: tl.dot needs 16 along each dimension, an empty
  /// dimension still a one-lane tile.
  long long tile_least(Label l) const { return layout.dot_labels.count(l) ? 16 : 1; }
  /// A tile's mask `in_range`, or-ed with a constexpr flag (`x_EVEN`) that the wrapper sets when
  /// `l`'s size makes every tile full: a multiple of `modulus`, or when `modulus` is 0 the
  /// width of the label's tile parameter. Under the flag Triton folds the mask, the selects it
  /// feeds and the loads' masks away. Unchanged when `modulus` is 1.
  Value even_mask(Label l, Value in_range, long long modulus);
  std::map<std::pair<Label, long long>, std::string> evens;       // (label, modulus) -> flag
  std::map<const ir::Symbol*, std::string> tma_flags, half_flags; // tensor -> its flag
  std::string ws_flag;                                            // warp_specialize_flag()

  // ---- tensor descriptors (tma) ----
  /// The descriptor of 2-D input `t`, whose dimensions `index` labels, loading blocks of
  /// `block` (made once, at the kernel's start, where the constexpr flag tma_flag(t) is true).
  Value descriptor(const ir::Symbol* t, const ir::Labels& index, const kir::Shape& block);
  /// The constexpr parameter (`A_TMA`) by which the wrapper says `t` qualifies.
  std::string tma_flag(const ir::Symbol* t);
  /// The first index of `l`'s current tile as a descriptor's offset (int32; 0 for none).
  Value tile_origin(Label l) const;
  /// The descriptors under `flag` take a block as wide as the tile parameter `tile_param`: the
  /// wrapper sets the flag only while that width is at most 256.
  void bound_box(const std::string& flag, const std::string& tile_param);
  std::map<std::pair<const ir::Symbol*, std::string>, Value> descriptors; // (t, block) -> desc
  std::set<const ir::Symbol*> tma_used; // inputs some tile is loaded of through a descriptor,
                                        // and the Func where its store goes through one
  std::string tma_store_refused;        // why the Func's store cannot, under tma(F)
  /// The constexpr parameter (`A_HALF`) by which the wrapper says `t` holds 16-bit floats.
  std::string half_flag(const ir::Symbol* t);
  /// The constexpr under which a loop may be warp-specialized on the launch's device.
  std::string warp_specialize_flag();
  /// warp_specialize(k): whether a loop over k is specialized, else why the last product over
  /// k could not be (LowerDots.cpp).
  bool warp_specialized = false;
  std::string warp_specialize_refused;

  // ---- tensors and addresses ----
  /// Whether this kernel computes `t` into a global temporary (partial fusion): `<t>_fuse`.
  bool materialized_here(const ir::Symbol* t) const;
  std::string tensor_base(const ir::Symbol* t) const;
  std::string ptr_of(const ir::Symbol* t) const { return tensor_base(t) + "_ptr"; }
  Value ptr_var(const ir::Symbol* t) const { return ref(ptr_of(t)); }
  Value stride_var(const ir::Symbol* t, size_t i) const;
  /// The element offset of `t[index]` at the labels' current bindings.
  Value offset_expr(const ir::Symbol* t, const ir::Labels& index);
  /// The conjunction of the labels' current masks; null when none has one.
  Value mask_of(const ir::Labels& of);
  /// Visits the kernel's value and the values of the Funcs it computes into temporaries or
  /// stores.
  void for_each_value(ir::IRVisitor& v) const;

  // ---- computed values, reused by key ----
  /// Where a label is indexed now, as a key part: the name bound to its index.
  std::string index_key(Label l);
  /// A reduction computes the same value wherever its free labels are indexed the same way.
  std::string reduction_key(const ir::Expr& e);
  std::optional<Value> cached(const std::string& key) const;
};

kir::Type int_type(kir::Scalar s = kir::Scalar::Int);
kir::LaunchArg launch_arg(kir::LaunchArg::Kind kind, const std::string& name = "", size_t axis = 0,
                          size_t rank = 0, long long least = 1);

// ---- the stages ---------------------------------------------------------------------------

/// LowerLayout.cpp: the layout of `def` under `fs`: an axis per tensorized schedulable label.
KernelLayout plan_layout(const ir::Program& prog, const FuncSchedule& fs, const ir::FuncDef& def,
                         const PythonNames& py);
/// LowerDots.cpp: moves the labels that only products on tl.dot reduce over, with both operands
/// input tiles, from the layout's axes to its loop tiles (KernelLayout::loop_tiles).
void plan_loop_tiles(LowerState& s);

/// LowerSignature.cpp: the kernel's parameters (tensors and strides, scalars, sizes, tile
/// widths) with how the wrapper fills each; sets `s.labels`. Needs the layout.
void add_params(LowerState& s);

/// LowerMapping.cpp: the program instance's output block, from the `map` loop nest (and the
/// launch grid); returns the body the block's code goes in (under `persistent`, the loop over
/// block numbers). Then the `tl.arange` index tensor of each axis.
Body* emit_program_mapping(LowerState& s, Body& body);
void emit_aranges(LowerState& s, Body& body);

/// LowerLoops.cpp: the loop (or whole-tile index) of one dimension, binding `l`; returns the
/// body to continue in. `whole` walks the entire dimension (a reduction), ignoring its block.
/// `stop`, when given, ends the loop early (a causal mask's last key); masks still compare
/// with the dimension's end. `from`, when given, starts a loop there instead.
Body* emit_dim(LowerState& s, Label l, Body& body, const std::string& prefix, bool whole,
               Value stop = nullptr, Value from = nullptr);
/// The output dimensions' loops, with the producers and reductions computed at each level;
/// returns the innermost body.
Body* emit_output_loops(LowerState& s, Body& body);
/// Computes at this loop level every reduction of `root` whose labels are all `bound` here.
void hoist(LowerState& s, const ir::Labels& bound, Body& body, const ir::Expr& root);
/// Name prefixes of a reduction's loop variables (`x_red_`, `r2_`, ...).
std::string reduction_prefix(LowerState& s, Label r);
std::string loop_prefix(LowerState& s, Label r, const std::string& prefix);

/// LowerProducers.cpp: computes the Funcs fused at level `at` into their temporaries.
void materialize_at(LowerState& s, Label at, Body& body);
/// LowerProducers.cpp: stores each Func of `s.stored` whose dimensions `bound` all holds (and
/// that is not computed into a temporary, whose computation stores it), once.
void store_outputs(LowerState& s, const ir::Labels& bound, Body& body);
/// LowerProducers.cpp: `value` of stored Func `g` into its output tensor (the wrapper's).
void store_output(LowerState& s, const ir::Symbol* g, Value value, Body& body);

/// LowerExprs.cpp: the value of `e` at the current bindings (statements go to `body`).
Value lower_expr(LowerState& s, const ir::Expr& e, Body& body);
/// Loads `e` in the kernel's layout (float32 for inputs unless `native`).
Value load(LowerState& s, const ir::Access& e, Body& body, bool native = false);
/// Loads a 2-D input access straight into a [p, q] tile, as tl.dot wants it; null if the
/// bindings have no 1-D index vectors.
Value load_tile(LowerState& s, const ir::Access& e, Label p, Label q, Body& body);
/// Whether `tma` reads the tiles of 2-D input access `e` through a tensor descriptor: the input
/// is named in `tma`, read plainly, in tiles of literal widths 16 to 256.
bool descriptor_qualifies(const LowerState& s, const ir::Access& e);
/// A comparison counts as 0 or 1 where a number is wanted.
Value numeric(Value v);
/// The value of `e` as a number: whole numbers and conditions converted.
Value number(LowerState& s, const ir::Expr& e, Body& body);
/// The value of whole-number `e` (or an integer literal) as the kernel's integer.
Value whole(LowerState& s, const ir::Expr& e, Body& body);
/// `value` broadcast to the tile of `dims` where `e` does not vary along a tensorized one.
Value broadcast(const LowerState& s, Value value, const ir::Expr& e, const ir::Labels& dims);
/// Whether `e` is a number or a scalar of the kernel, never a tensor.
bool is_scalar_value(const ir::Expr& e);

/// LowerReductions.cpp: a reduction of `operands` (one, or two multiplied for rdot) over `r`.
Value lower_reduce(LowerState& s, ir::ReduceOp op, std::vector<ir::ExprPtr> operands, Label r,
                   const ir::Expr& e, Body& body);
kir::ReduceOp kernel_op(ir::ReduceOp op);
double identity_of(ir::ReduceOp op);

/// LowerDots.cpp: whether rdot `d` runs on tl.dot, and lowering it there.
bool on_tensor_cores(const LowerState& s, const ir::Dot& d);
Value lower_dot(LowerState& s, const ir::Dot& d, Body& body);
/// How an rdot on tl.dot runs: the product is an [i, j] matrix, i before j in the layout, of
/// `lhs` ([i, rvar]) and `rhs` ([rvar, j]).
struct DotOnCores {
  Label i, j;
  ir::ExprPtr lhs, rhs;
};
/// Orients rdot `d` (on_tensor_cores) and checks its tile sizes; nullopt after an error.
std::optional<DotOnCores> orient_dot(LowerState& s, const ir::Dot& d);
/// One step of `d` at the current binding of its label: tl.dot of the operand tiles, loaded
/// into `inner`, accumulated onto `acc` (null: none); an [i, j] matrix.
Value dot_step(LowerState& s, const ir::Dot& d, const DotOnCores& o, Body& inner, Value acc);
/// A layout-shaped value varying along some of `dims` as the [i, j] matrix of a product (1
/// where it does not vary), to combine with a product's accumulator.
Value dot_matrix(const LowerState& s, Value v, const ir::Labels& dims, Label i, Label j);

/// LowerOnline.cpp: online(l): when every dimension of the loop's reductions is bound, computes
/// them all in one loop over l (OnlineSoftmax.h) and caches each at this level; false when
/// some dimension is not bound yet.
bool lower_online(LowerState& s, Body& body);
/// Whether `e` is one of the reductions the online loop computes.
bool in_online_loop(const LowerState& s, const ir::Expr& e);
/// Whether the online loop's reductions all have their dimensions bound now.
bool online_ready(const LowerState& s);

} // namespace dtc::lowering
