#pragma once
// The algorithm IR: symbols resolved, every expression typed with the dimension labels it varies
// along (its "dims", in first-appearance order). Operands align by label, not by position: the
// value of `A[x, y] + B[y, x]` at (x, y) is A(x, y) + B(y, x). Nodes are immutable and shared;
// passes rewrite them with IRMutator.
#include "support/Diagnostics.h"

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dtc::ir {

enum class SymbolKind { Func, In, SIn, Var, RVar };
const char* kind_name(SymbolKind kind);

struct Symbol {
  std::string name; // as written in the DT source
  SymbolKind kind;
  Loc loc;       // declaration
  int order = 0; // declaration order among all symbols
  /// An input of whole numbers (`In T: int;`, `SIn n: int;`); inputs are numbers otherwise.
  bool is_int = false;
  /// `In T: int(y)`: T's values are positions along `y` (a gather's index).
  const Symbol* range = nullptr;
  /// `SIn eps = 1e-6;`: the value make_inputs passes (a random one otherwise), as written.
  std::optional<double> example;
  std::string example_text;
  bool is_label() const { return kind == SymbolKind::Var || kind == SymbolKind::RVar; }
};
using Label = const Symbol*;
using Labels = std::vector<Label>;

enum class ExprKind {
  Const,
  ScalarIn,
  Len,
  ProgramId,
  LabelValue,
  Access,
  Unary,
  Binary,
  Call,
  Reduce,
  Dot,
  Reshape
};
/// `IntDiv` is `//`, on whole numbers only, rounding toward zero as `%` does (C's rules).
enum class BinOp { Add, Sub, Mul, Div, IntDiv, Mod, Lt, Le, Gt, Ge, Eq, Ne };
/// What a value is: a number (float32 in kernels, as the thesis' values) or a whole number
/// (a label's position, a size, an integer input's element; the kernel's integers). A whole
/// number where a number is wanted is converted; never the reverse.
enum class ValueType { Float, Int };
enum class UnOp { Neg, Plus };
enum class ReduceOp { Sum, Max, Min };

const char* op_text(BinOp op);
bool is_comparison(BinOp op);
const char* type_name(ValueType t);   // "number" or "whole number"
const char* reduce_name(ReduceOp op); // rsum, rmax, rmin

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;
class IRVisitor;

struct Expr {
  ExprKind kind;
  Loc loc;
  Labels dims; // labels this value varies along; empty for a scalar
  ValueType type = ValueType::Float;
  Expr(ExprKind k, Loc l, Labels d) : kind(k), loc(l), dims(std::move(d)) {}
  bool is_int() const { return type == ValueType::Int; }
  virtual ~Expr() = default;
  virtual void accept(IRVisitor& v) const = 0;
  template <typename T> const T* as() const {
    return kind == T::kKind ? static_cast<const T*>(this) : nullptr;
  }
};

#define DTC_IR_NODE(Name)                                                                          \
  static constexpr ExprKind kKind = ExprKind::Name;                                                \
  void accept(IRVisitor& v) const override;

/// A numeric literal. `is_int` keeps `2` apart from `2.0` (pow exponents, printing).
/// A literal written as an integer is a whole number, which combines with numbers and whole
/// numbers alike (see `combined_type`).
struct Const : Expr {
  DTC_IR_NODE(Const)
  double value;
  bool is_int;
  Const(Loc l, double v, bool i) : Expr(kKind, l, {}), value(v), is_int(i) {
    if (i) type = ValueType::Int;
  }
};

/// A scalar input (`SIn`).
struct ScalarIn : Expr {
  DTC_IR_NODE(ScalarIn)
  const Symbol* symbol;
  ScalarIn(Loc l, const Symbol* s) : Expr(kKind, l, {}), symbol(s) {
    if (s->is_int) type = ValueType::Int;
  }
};

/// `len(x)`: the size of dimension x.
struct Len : Expr {
  DTC_IR_NODE(Len)
  Label label;
  Len(Loc l, Label lab) : Expr(kKind, l, {}), label(lab) { type = ValueType::Int; }
};

/// `program_id(axis)`.
struct ProgramId : Expr {
  DTC_IR_NODE(ProgramId)
  int axis;
  ProgramId(Loc l, int a) : Expr(kKind, l, {}), axis(a) {}
};

/// `x` used as a value: the position along label x, a whole number from 0 to len(x) - 1.
struct LabelValue : Expr {
  DTC_IR_NODE(LabelValue)
  Label label;
  LabelValue(Loc l, Label lab) : Expr(kKind, l, {lab}), label(lab) { type = ValueType::Int; }
};

/// `A[x, y]` for an input tensor or a Func: element (x, y) of `tensor`. A position of an input
/// may be computed (`X[x, y + 4]`, `P[x, T[x]]`): `pos[i]` is then the whole-number expression
/// and `index[i]` the label whose size is that dimension's extent; a position outside the
/// extent reads 0. `pos` is empty when every position is its label.
struct Access : Expr {
  DTC_IR_NODE(Access)
  const Symbol* tensor;
  Labels index; // one label per dimension of the tensor, in the tensor's dimension order
  std::vector<ExprPtr> pos; // empty, or one per dimension: null where the position is index[i]
  Access(Loc l, const Symbol* t, Labels idx, std::vector<ExprPtr> p = {})
      : Expr(kKind, l, position_dims(idx, p)), tensor(t), index(std::move(idx)), pos(std::move(p)) {
    if (t->is_int) type = ValueType::Int;
  }
  /// The expression of position `i`, null when it is the label `index[i]` itself.
  const Expr* position(size_t i) const { return pos.empty() ? nullptr : pos[i].get(); }
  bool plain() const {
    for (const ExprPtr& p : pos)
      if (p) return false;
    return true;
  }
  static Labels position_dims(const Labels& idx, const std::vector<ExprPtr>& p);
};

/// Whole numbers combine into a whole number; anything else is a number. A literal integer
/// takes the type of what it combines with (`y + 1` is whole, `A[x] + 1` and `where(c, 1, 0)`
/// are numbers, as before whole numbers existed).
ValueType combined_type(const std::vector<const Expr*>& operands);

struct Unary : Expr {
  DTC_IR_NODE(Unary)
  UnOp op;
  ExprPtr a;
  Unary(Loc l, UnOp o, ExprPtr x) : Expr(kKind, l, x->dims), op(o), a(std::move(x)) {
    type = a->type;
  }
};

struct Binary : Expr {
  DTC_IR_NODE(Binary)
  BinOp op;
  ExprPtr a, b;
  Binary(Loc l, BinOp o, ExprPtr x, ExprPtr y, Labels d)
      : Expr(kKind, l, std::move(d)), op(o), a(std::move(x)), b(std::move(y)) {
    if (op == BinOp::IntDiv)
      type = ValueType::Int;
    else if (op != BinOp::Div && !is_comparison(op))
      type = combined_type({a.get(), b.get()});
  }
};

/// An element-wise math function (see Builtins.h for the table). `where`, `maximum` and
/// `minimum` of whole numbers are whole numbers; every other function is a number.
struct Call : Expr {
  DTC_IR_NODE(Call)
  std::string fn;
  std::vector<ExprPtr> args;
  Call(Loc l, std::string f, std::vector<ExprPtr> as, Labels d)
      : Expr(kKind, l, std::move(d)), fn(std::move(f)), args(std::move(as)) {
    if (fn == "where")
      type = combined_type({args[1].get(), args[2].get()});
    else if (fn == "maximum" || fn == "minimum")
      type = combined_type({args[0].get(), args[1].get()});
  }
};

/// `rsum/rmax/rmin(a, rvar)`.
struct Reduce : Expr {
  DTC_IR_NODE(Reduce)
  ReduceOp op;
  ExprPtr a;
  Label rvar;
  Reduce(Loc l, ReduceOp o, ExprPtr x, Label r, Labels d)
      : Expr(kKind, l, std::move(d)), op(o), a(std::move(x)), rvar(r) {}
};

/// `rdot(a, b, rvar)`: sum over rvar of a * b (a matrix product when a and b are 2-D).
struct Dot : Expr {
  DTC_IR_NODE(Dot)
  ExprPtr a, b;
  Label rvar;
  Dot(Loc l, ExprPtr x, ExprPtr y, Label r, Labels d)
      : Expr(kKind, l, std::move(d)), a(std::move(x)), b(std::move(y)), rvar(r) {}
};

/// `reshape(a, x, 1, ...)`: relabels the value's shape; a literal 1 (nullptr) is a size-1
/// dimension that broadcasts. Under label alignment it changes no value.
struct Reshape : Expr {
  DTC_IR_NODE(Reshape)
  ExprPtr a;
  std::vector<Label> shape; // nullptr for a literal 1
  Reshape(Loc l, ExprPtr x, std::vector<Label> s)
      : Expr(kKind, l, x->dims), a(std::move(x)), shape(std::move(s)) {
    type = a->type;
  }
};

#undef DTC_IR_NODE

/// A Func's algorithm: `f[dims] = value`.
struct FuncDef {
  const Symbol* symbol = nullptr;
  Labels dims;
  ExprPtr value;
  Loc loc;
  std::vector<const Symbol*> deps; // Funcs read by `value`, in first-use order
};

/// A checked DT program.
struct Program {
  std::deque<Symbol> symbols; // stable addresses
  std::map<std::string, Symbol*> by_name;
  std::map<const Symbol*, FuncDef> funcs;
  std::vector<const Symbol*> inputs; // In and SIn symbols, in declaration order
  /// Labels made by the compiler whose sizes follow from other sizes (a split reduction's
  /// number of parts): label -> ceil(size of `of` / `divisor`).
  struct DerivedSize {
    const Symbol* of = nullptr;
    long long divisor = 1;
  };
  std::map<const Symbol*, DerivedSize> derived_sizes;

  const Symbol* find(const std::string& name) const {
    auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : it->second;
  }
  const FuncDef& def(const Symbol* func) const { return funcs.at(func); }
};

/// The union of two label lists, in first-appearance order.
Labels union_labels(const Labels& a, const Labels& b);
bool contains(const Labels& labels, Label l);

/// The direct operands of an expression node, in order.
std::vector<const Expr*> children(const Expr& e);

/// Calls `fn(access, rvars)` for every Access in `e`, with the RVars of the reductions around
/// it, outermost first: inside `rsum(f[k, x], k)` the k of the read runs over every k.
void for_each_access(const Expr& e, const std::function<void(const Access&, const Labels&)>& fn);

/// Nodes on the longest path from `e` down to a leaf, `e` included. Iterative, so it is safe on
/// expressions of any depth; shared subexpressions are measured once.
int height(const Expr& e);

/// The longest chain of operations the compiler accepts in one expression, before and after
/// fusion inlines producers: passes walk expressions recursively.
constexpr int kMaxExprHeight = 1000;

/// A float as a Python literal that reads back exactly (`0.5`, `2.0`, `1e-30`, `float("inf")`).
std::string python_float(double v);

/// Prints an expression in DT syntax (fully parenthesized where precedence needs it).
std::string to_dt(const Expr& e);
/// Prints the whole program IR with the dims of every Func (for `dtc --emit=ir`).
std::string print(const Program& program);

} // namespace dtc::ir
