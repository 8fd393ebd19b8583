#pragma once
// The kernel IR: one Triton kernel as typed statements over typed expressions, plus what the
// wrapper needs to launch it. Lowering (lower/LowerFunc.h) builds it from the algorithm IR and a
// schedule; the passes of this directory rewrite it, each verified (VerifyKernel.h); only the
// printer (codegen/KernelPrinter.cpp) turns it into Python.
//
// Expressions are immutable and shared (`ExprPtr`), built through the factory functions below,
// which infer every node's type (element type and tile shape) and reject ill-typed operands with
// an InternalError. Statements own their children. A name is bound by `Assign` or a loop and
// may be bound again (a loop-carried accumulator, a mask recomputed for a second loop): passes
// that reuse a value check that none of the names it reads was bound again in between.
#include "kir/Intrinsics.h"

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace dtc::kir {

// ---- types --------------------------------------------------------------------------------

/// Element types. `Int` is an integer kernel argument (Triton passes it as int32 or int64 by
/// value); `Index` the kernel's index type, int32 or int64, chosen per call by the wrapper and
/// passed as the constexpr parameter `kIndexParam`; `Elem` the element type of the tensor behind
/// a pointer parameter (float16, bfloat16 or float32: known only at launch); `Ptr` a pointer to
/// such elements; `Desc` a tensor descriptor of such elements (TMA), its shape the block it
/// loads.
enum class Scalar { F32, I64, Index, I32, Int, I1, Elem, Ptr, Desc };

/// The constexpr parameter holding the index type (`tl.int32` or `tl.int64`).
inline constexpr const char* kIndexParam = "_dt_index";

/// One extent of a tile: a literal, or a `tl.constexpr` parameter (`x_TILE`).
struct Extent {
  long long n = 1;
  std::string param; // set for a parameter; `n` is then unused
  bool operator==(const Extent&) const = default;
  bool is_one() const { return param.empty() && n == 1; }
};
using Shape = std::vector<Extent>;

struct Type {
  Scalar scalar = Scalar::F32;
  /// For `Elem` and `Ptr`: the pointer parameter whose element type this is (`A_ptr`). A `Ptr`
  /// without one points to float32 (a temporary the wrapper allocates).
  std::string elem_of;
  Shape shape; // empty: a scalar
  bool operator==(const Type&) const = default;
  bool is_float() const { return scalar == Scalar::F32 || scalar == Scalar::Elem; }
  bool is_int() const {
    return scalar == Scalar::I64 || scalar == Scalar::Index || scalar == Scalar::I32 ||
           scalar == Scalar::Int;
  }
};

/// An extent as the printers write it: its number, or its parameter's name.
std::string to_string(const Extent& x);
std::string to_string(const Shape& shape);
std::string to_string(const Type& type);

// ---- expressions --------------------------------------------------------------------------

enum class ExprKind {
  Var,         // a name bound by Assign, a loop or a parameter
  Int,         // integer literal
  Float,       // float literal (a Python float in the kernel: weakly typed, float32)
  Neg,         // -a
  Binary,      // a op b, broadcasting; Max and Min as calls (tl.maximum, tl.minimum)
  Call,        // an element-wise intrinsic: fn(args)
  Select,      // tl.where(cond, a, b)
  Cast,        // a converted to `type`
  Load,        // tl.load(ptr, mask=mask, other=0.0); value_int 1: eviction_policy="evict_last"
  Arange,      // tl.arange(0, extent): int32 [extent]
  Expand,      // a[:, None]-style: a new axis of extent 1 where `expand` is false
  Full,        // tl.full(shape, value, tl.float32)
  Reduce,      // a sum, maximum or minimum over one axis, keeping it (Max, Min: NaN if any is)
  Dot,         // tl.dot(a, b[, acc])
  Reshape,     // tl.reshape(a, shape)
  Trans,       // tl.trans(a) of a 2-D tile
  ProgramId,   // tl.program_id(axis)
  NumPrograms, // tl.num_programs(axis): the launch grid's extent
  MakeDesc, // tl.make_tensor_descriptor(ptr, [sizes], [strides..., 1], [block]) if FLAG else None
  DescLoad, // desc.load([offsets]) (tl.trans'ed where `value_int` is 1) if FLAG else fallback
  Half,     // half `value_int` (0: first) of a 2-D tile's columns: tl.split of its reshape
};

/// Max and Min are torch.maximum and torch.minimum: on floats, NaN when either operand is NaN.
/// And and Or combine conditions (`&`, `|`).
enum class BinOp { Add, Sub, Mul, Div, FloorDiv, Mod, Lt, Le, Gt, Ge, Eq, Ne, And, Or, Max, Min };
/// Max and Min are torch.amax and torch.amin: NaN where the reduced values hold a NaN.
enum class ReduceOp { Sum, Max, Min };

bool is_comparison(BinOp op);
const char* op_text(BinOp op);

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

struct Expr {
  ExprKind kind;
  Type type;
  std::string name;              // Var: the name; MakeDesc, DescLoad: the constexpr flag
  Intrinsic fn = Intrinsic::Abs; // Call
  long long value_int = 0;       // Int; Reduce, ProgramId and NumPrograms: the axis
  double value_float = 0;        // Float; Full: the fill value
  BinOp op = BinOp::Add;         // Binary
  ReduceOp reduce = ReduceOp::Sum;
  std::vector<ExprPtr> args; // operands, in printing order (Load: ptr, mask?; Dot: a, b, acc?)
  std::vector<bool> expand;  // Expand: true for a kept axis (`:`), false for a new one (`None`)
  std::string precision;     // Dot: "" (TF32, Triton's default), "tf32x3" or "ieee"
  int depth = 0;             // operations nested below this node (a leaf is 0)
};

/// Structural equality and a matching hash, for value numbering.
bool equal(const Expr& a, const Expr& b);
size_t hash(const Expr& e);

// Factories: each infers the node's type and checks its operands.
ExprPtr var(std::string name, Type type);
ExprPtr int_imm(long long v);
ExprPtr float_imm(double v);
ExprPtr neg(ExprPtr a);
ExprPtr binary(BinOp op, ExprPtr a, ExprPtr b);
ExprPtr add(ExprPtr a, ExprPtr b);
ExprPtr sub(ExprPtr a, ExprPtr b);
ExprPtr mul(ExprPtr a, ExprPtr b);
ExprPtr lt(ExprPtr a, ExprPtr b);
/// The larger (smaller) of `a` and `b`, NaN when either is NaN.
ExprPtr maximum(ExprPtr a, ExprPtr b);
ExprPtr minimum(ExprPtr a, ExprPtr b);
/// `a & b` over conditions; a null operand is "always true" and drops out.
ExprPtr and_(ExprPtr a, ExprPtr b);
ExprPtr call(Intrinsic fn, std::vector<ExprPtr> args);
ExprPtr select(ExprPtr cond, ExprPtr a, ExprPtr b);
ExprPtr cast(ExprPtr a, Scalar to, std::string elem_of = "");
ExprPtr load(ExprPtr ptr, ExprPtr mask);
/// Load `load` with the hint that its lines stay in L2 (`eviction_policy="evict_last"`).
ExprPtr keep_in_cache(const Expr& load);
ExprPtr arange(Extent extent);
ExprPtr expand(ExprPtr a, std::vector<bool> keep);
ExprPtr full(Shape shape, double value);
ExprPtr reduce(ReduceOp op, ExprPtr a, int axis);
ExprPtr dot(ExprPtr a, ExprPtr b, ExprPtr acc, std::string precision);
ExprPtr reshape(ExprPtr a, Shape shape);
ExprPtr trans(ExprPtr a);
ExprPtr program_id(int axis);
ExprPtr num_programs(int axis);
/// A tensor descriptor of rank 2 to 5 over the tensor behind `ptr` (sizes `sizes`, strides
/// `strides` but the last, which is 1) loading blocks of `block`, made where the constexpr `flag`
/// is true.
ExprPtr make_desc(ExprPtr ptr, std::vector<ExprPtr> sizes, std::vector<ExprPtr> strides,
                  Shape block, std::string flag);
/// The block of `desc` at `offsets` (int32) as a 2-D tile (a block of rank N has N - 2 leading
/// dimensions of one element), transposed where `transposed`, where `flag` is true; else
/// `fallback`, the same tile loaded through pointers (of the same type).
ExprPtr desc_load(ExprPtr desc, std::vector<ExprPtr> offsets, bool transposed, ExprPtr fallback,
                  std::string flag);

/// The first (`which` 0) or second half of the columns of 2-D tile `a`, whose column count must
/// be even: `tl.split(tl.permute(tl.reshape(a, [r, 2, c / 2]), (0, 2, 1)))[which]`.
ExprPtr half(ExprPtr a, int which);

/// The type of a loop variable `for v in range(lo, hi, step)`: the widest of its bounds'.
Type loop_var_type(const Expr& lo, const Expr& hi, const Expr& step);

/// The pointer parameter an address (a pointer plus offsets) is based on; "" when it cannot be
/// told.
std::string base_pointer(const Expr& address);

/// The names an expression reads.
void free_vars(const Expr& e, std::set<std::string>& out);

/// A copy of `e` with other operands of the same types (for passes that rebuild a node).
ExprPtr with_args(const Expr& e, std::vector<ExprPtr> args);

// ---- statements ---------------------------------------------------------------------------

enum class StmtKind { Assign, For, Store, Comment, Barrier };
/// How a store combines with the value in memory. Max and Min propagate NaN, as ReduceOp's do:
/// once one program instance combines a NaN, the result is NaN whatever the order.
enum class Atomic { None, Add, Max, Min };

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;

/// One kind per statement, with the fields of that kind:
///   Assign   name = value
///   Store    tl.store(ptr, value, mask) (mask may be null), or an atomic combination; with a
///            descriptor, `desc.store(offsets, value)` for each part where the constexpr flag
///            is true
///   For      for name in range(lo, hi, step): body (tl.range under warp_specialize)
///   Comment  # text
///   Barrier  tl.debug_barrier()
struct Stmt {
  StmtKind kind;
  std::string name;     // Assign: the name bound; For: the loop variable
  std::string text;     // Comment
  ExprPtr value;        // Assign, Store
  ExprPtr ptr, mask;    // Store
  ExprPtr lo, hi, step; // For
  /// For: a condition of constexpr parameters under which Triton warp-specializes the loop
  /// (`tl.range(..., warp_specialize=...)`), null for none. Not an operand: no pass rewrites
  /// it, so it stays a constexpr expression.
  ExprPtr warp_specialize;
  /// For: Triton fuses this loop with the loop nested in it (`tl.range(..., flatten=True)`).
  bool flatten = false;
  /// For: every iteration's tiles lie within their tensors (the whole tiles of a loop whose
  /// last, partial tile runs in a loop of its own: kir/PeelPartialTile.h), so the loop's loads
  /// and stores need no mask.
  bool full_tiles = false;
  Atomic atomic = Atomic::None; // Store
  /// Store: the tile stored through tensor descriptor `desc` (a MakeDesc's name) instead, in
  /// one or more parts (`desc.store(offsets, value)` each, the value in the tensor's dtype),
  /// where the constexpr parameter `desc_flag` is true; the pointer store where it is false.
  /// Null `desc` for a pointer store alone.
  struct DescPart {
    std::vector<ExprPtr> offsets;
    ExprPtr value;
  };
  ExprPtr desc;
  std::vector<DescPart> desc_parts;
  std::string desc_flag;
  std::vector<StmtPtr> body; // For

  /// The statement's expressions in evaluation (and printing) order: Assign's value; Store's
  /// ptr, value and mask (null when there is none), then desc and each part's offsets and value
  /// (null desc, no parts, when there is no descriptor); For's lo, hi and step.
  std::vector<ExprPtr*> operands();
  std::vector<const ExprPtr*> operands() const;

  static StmtPtr assign(std::string name, ExprPtr value);
  static StmtPtr store(ExprPtr ptr, ExprPtr value, ExprPtr mask);
  /// A pointer store that goes through descriptor `desc` where constexpr `flag` is true, in
  /// `parts`: each at its offsets (int32 scalars), its value of the descriptor's block shape.
  static StmtPtr store(ExprPtr ptr, ExprPtr value, ExprPtr mask, ExprPtr desc,
                       std::vector<DescPart> parts, std::string flag);
  static StmtPtr loop(std::string var, ExprPtr lo, ExprPtr hi, ExprPtr step);
  static StmtPtr comment(std::string text);
  static StmtPtr barrier();
};

/// A deep copy of `s` (its body's statements copied too; expressions, immutable, shared).
StmtPtr clone(const Stmt& s);

/// How many statements bind each name (assignments and loops, nested bodies included).
std::map<std::string, int> binding_counts(const std::vector<StmtPtr>& stmts);

// ---- kernels ------------------------------------------------------------------------------

struct Param {
  std::string name;
  bool is_constexpr = false;
  Type type;
};

/// How the wrapper passes one kernel argument, in terms of the wrapper's locals.
struct LaunchArg {
  enum class Kind {
    Tensor, // the tensor `name` (its pointer)
    Stride, // `name`'s stride along `axis` (of `rank`)
    Size,   // the size `name` (a label's, or one derived from it)
    Scalar, // the scalar input `name`
    Tile,   // the power of two at least `name` and at least `least` (a tile's width)
    Index,  // the index type the wrapper chose (kIndexParam)
    Even,   // whether the size `name` is a multiple of `modulus`, or when `modulus` is 0 the
            // tile width of Tile (with `least`): a constexpr under which masks fold away
    Tma,    // whether the tensor `name` can be read through a tensor descriptor (tma)
    Half,   // whether the tensor `name` holds 16-bit floats (float16 or bfloat16)
    WarpSpecialize, // whether Triton's warp specialization is correct on the launch's device
  };
  Kind kind = Kind::Size;
  std::string name;
  size_t axis = 0, rank = 0;
  long long least = 1;
  std::string param;     // the kernel parameter it binds
  long long modulus = 0; // Even
  /// Tma: tiles whose widths are parameters, as (size, least) of their Tile arguments; the
  /// descriptor's block takes them only while each is at most 256 (a TMA box's limit).
  std::vector<std::pair<std::string, long long>> boxes = {};
};

/// One factor of a kernel's 1-D grid, which the wrapper computes: ceil(size / divisor), or the
/// constant `divisor` when `size` is empty.
struct GridFactor {
  std::string size;
  long long divisor = 1;
};

/// A float32 temporary the wrapper allocates for a kernel: its name and its sizes, outermost
/// first; the kernel reads it contiguous (stride of the last axis 1).
struct Temporary {
  std::string name;
  std::vector<std::string> sizes;
};

struct Kernel {
  std::string name; // e.g. relu_out_kernel
  std::string doc;  // one-line summary for a comment above the kernel
  std::vector<Param> params;
  std::vector<StmtPtr> body;
  std::vector<LaunchArg> launch; // one per param, same order
  std::vector<GridFactor> grid;  // the 1-D grid is their product; none: one program instance
  /// Persistent programs (`persistent`): the grid is the product above, the blocks, but at most
  /// one program instance per streaming multiprocessor, each looping over blocks.
  bool persistent = false;
  int num_warps = 4;
  int num_stages = 3;
  /// For a kernel that combines into its output with atomics: the output's initial value (the
  /// reduction's identity: 0, -inf or +inf); the wrapper allocates it in float32 filled with
  /// that.
  std::optional<double> output_init;
  /// "tf32", "tf32x3" or "ieee" when the kernel multiplies on tl.dot; "" otherwise.
  std::string dot_precision;
  /// 2-D float32 inputs that feed tl.dot, with the axis tl.dot reduces over: the wrapper makes
  /// that axis contiguous, since TF32 tensor-core products read k-contiguous tiles.
  std::vector<std::pair<std::string, size_t>> k_contiguous_inputs;
  /// Copies only those of at least this many elements (`relayout(auto)`); 0 copies all.
  long long k_contiguous_min_elements = 0;
  /// Global float32 temporaries the kernel writes and reads back (partial fusion).
  std::vector<Temporary> scratch;
  /// How far past a dimension's size an index may run (masked lanes of the last tile or block,
  /// program instances of a map split past the last block): the wrapper's bound for choosing
  /// int32 indices.
  long long index_slack = 1;
  /// warp_specialize(k, m:R): in the kernel's Gluon form (codegen/GluonPrinter.cpp) the
  /// epilogue runs R rows of the product's tile at a time, staged through shared memory; 0:
  /// on the whole tile in registers.
  int epilogue_rows = 0;
  /// The shapes of the kernel's tensors whose size depends on a tile-width parameter, each
  /// at most Triton's kMaxTensorNumel elements only for some sizes: the wrapper checks them
  /// before the first launch (CheckTensorSizes.h).
  std::vector<Shape> sized_shapes;
};

/// Triton's limit on the elements of one tensor (TRITON_MAX_TENSOR_NUMEL).
inline constexpr long long kMaxTensorNumel = 1LL << 20;

/// Every distinct shape of a value in `stmts` (nested bodies included), in first-use order.
std::vector<Shape> shapes_of(const std::vector<StmtPtr>& stmts);

/// The language a kernel is printed in: Triton's, or Gluon's (a warp-specialized product on
/// Hopper: kir/WarpPartitions.h), whose ranges and fills take the layout of the values they
/// meet, whose descriptors name their shared-memory layout and whose loops are plain.
enum class Dialect { Triton, Gluon };

/// Prints an expression as Python (for the printer, diagnostics and tests).
std::string print(const Expr& e, Dialect d = Dialect::Triton);
/// Prints statements as Python at the given indentation depth.
std::string print(const std::vector<StmtPtr>& stmts, int depth = 0, Dialect d = Dialect::Triton);
/// Prints one statement (a loop with its body).
std::string print(const Stmt& s, int depth, Dialect d);
/// The shared-memory layout Gluon gives tiles of `block` of the tensor behind `pointer` (a
/// pointer parameter) for TMA copies and warpgroup products: one spelling for a descriptor and
/// the buffers it copies into, which must agree.
std::string gluon_shared_layout(const Shape& block, const std::string& pointer);
/// The Triton dtype of a value of type `t` (`tl.float32`, `<ptr>.dtype.element_ty`, ...).
std::string dtype_text(const Type& t);
/// A loop's `range(lo, hi, step)` (`tl.range(...)` with Triton's options).
std::string print_loop_head(const Stmt& loop, Dialect d);

} // namespace dtc::kir
