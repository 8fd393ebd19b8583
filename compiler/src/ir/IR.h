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
  bool is_label() const { return kind == SymbolKind::Var || kind == SymbolKind::RVar; }
};
using Label = const Symbol*;
using Labels = std::vector<Label>;

enum class ExprKind {
  Const,
  ScalarIn,
  Len,
  ProgramId,
  Access,
  Unary,
  Binary,
  Call,
  Reduce,
  Dot,
  Reshape
};
enum class BinOp { Add, Sub, Mul, Div, Mod, Lt, Le, Gt, Ge, Eq, Ne };
enum class UnOp { Neg, Plus };
enum class ReduceOp { Sum, Max, Min };

const char* op_text(BinOp op);
bool is_comparison(BinOp op);
const char* reduce_name(ReduceOp op); // rsum, rmax, rmin

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;
class IRVisitor;

struct Expr {
  ExprKind kind;
  Loc loc;
  Labels dims; // labels this value varies along; empty for a scalar
  Expr(ExprKind k, Loc l, Labels d) : kind(k), loc(l), dims(std::move(d)) {}
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
struct Const : Expr {
  DTC_IR_NODE(Const)
  double value;
  bool is_int;
  Const(Loc l, double v, bool i) : Expr(kKind, l, {}), value(v), is_int(i) {}
};

/// A scalar input (`SIn`).
struct ScalarIn : Expr {
  DTC_IR_NODE(ScalarIn)
  const Symbol* symbol;
  ScalarIn(Loc l, const Symbol* s) : Expr(kKind, l, {}), symbol(s) {}
};

/// `len(x)`: the size of dimension x.
struct Len : Expr {
  DTC_IR_NODE(Len)
  Label label;
  Len(Loc l, Label lab) : Expr(kKind, l, {}), label(lab) {}
};

/// `program_id(axis)`.
struct ProgramId : Expr {
  DTC_IR_NODE(ProgramId)
  int axis;
  ProgramId(Loc l, int a) : Expr(kKind, l, {}), axis(a) {}
};

/// `A[x, y]` for an input tensor or a Func: element (x, y) of `tensor`.
struct Access : Expr {
  DTC_IR_NODE(Access)
  const Symbol* tensor;
  Labels index; // one label per dimension of the tensor, in the tensor's dimension order
  Access(Loc l, const Symbol* t, Labels idx) : Expr(kKind, l, idx), tensor(t), index(idx) {}
};

struct Unary : Expr {
  DTC_IR_NODE(Unary)
  UnOp op;
  ExprPtr a;
  Unary(Loc l, UnOp o, ExprPtr x) : Expr(kKind, l, x->dims), op(o), a(std::move(x)) {}
};

struct Binary : Expr {
  DTC_IR_NODE(Binary)
  BinOp op;
  ExprPtr a, b;
  Binary(Loc l, BinOp o, ExprPtr x, ExprPtr y, Labels d)
      : Expr(kKind, l, std::move(d)), op(o), a(std::move(x)), b(std::move(y)) {}
};

/// An element-wise math function (see Builtins.h for the table).
struct Call : Expr {
  DTC_IR_NODE(Call)
  std::string fn;
  std::vector<ExprPtr> args;
  Call(Loc l, std::string f, std::vector<ExprPtr> as, Labels d)
      : Expr(kKind, l, std::move(d)), fn(std::move(f)), args(std::move(as)) {}
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
      : Expr(kKind, l, x->dims), a(std::move(x)), shape(std::move(s)) {}
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
