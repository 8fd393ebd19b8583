#include "kir/RoundBeforeShift.h"

#include "kir/KirVisitor.h"

#include <functional>
#include <map>
#include <set>

namespace dtc {
namespace {

using kir::BinOp;
using kir::Expr;
using kir::ExprKind;
using kir::ExprPtr;

using Bindings = std::map<std::string, std::vector<ExprPtr>>;

/// The names whose values are computed from a maximum, and the products to round.
class Shifts : public kir::KirVisitor {
public:
  using KirVisitor::visit;

  explicit Shifts(const Bindings& b) : b_(b) {
    // The names computed from a maximum, to a fixed point (a loop-carried maximum reads itself).
    for (bool grew = true; grew;) {
      grew = false;
      for (const auto& [name, values] : b_)
        if (!from_max_.count(name))
          for (const ExprPtr& v : values)
            if (reads_max(*v)) {
              grew = from_max_.insert(name).second;
              break;
            }
    }
  }

  std::set<const Expr*> products; // the products to round, as nodes of the kernel

  void visit(const Expr& e) override {
    if (is_float32_sub(e) && (reads_max(*e.args[0]) || reads_max(*e.args[1]))) {
      shifted(*e.args[0]);
      shifted(*e.args[1]);
    }
    if (e.kind == ExprKind::Call && (e.fn == kir::Intrinsic::Exp || e.fn == kir::Intrinsic::Exp2))
      exponent(*e.args[0]);
    KirVisitor::visit(e);
  }

private:
  static bool is_float32_sub(const Expr& e) {
    return e.kind == ExprKind::Binary && e.op == BinOp::Sub && e.type.scalar == kir::Scalar::F32;
  }

  /// The subtractions an exponential's argument `a` is: a shift whose maximum the kernel may
  /// have read from memory (another kernel's).
  void exponent(const Expr& a) {
    through(a, exponents_, [&](const Expr& e) {
      if (is_float32_sub(e)) {
        shifted(*e.args[0]);
        shifted(*e.args[1]);
      }
    });
  }

  /// `at` on each value `a` is, through reshapes, the sides of a select (a mask's -inf around
  /// the scores) and names (every binding; each name once, `seen`).
  void through(const Expr& a, std::set<std::string>& seen,
               const std::function<void(const Expr&)>& at) {
    switch (a.kind) {
    case ExprKind::Reshape:
    case ExprKind::Expand:
      through(*a.args[0], seen, at);
      break;
    case ExprKind::Select:
      through(*a.args[1], seen, at);
      through(*a.args[2], seen, at);
      break;
    case ExprKind::Var:
      if (seen.insert(a.name).second) {
        auto it = b_.find(a.name);
        if (it != b_.end())
          for (const ExprPtr& v : it->second)
            through(*v, seen, at);
      }
      break;
    default:
      at(a);
    }
  }

  bool reads_max(const Expr& e) const {
    if ((e.kind == ExprKind::Reduce && e.reduce == kir::ReduceOp::Max) ||
        (e.kind == ExprKind::Binary && e.op == BinOp::Max))
      return true;
    if (e.kind == ExprKind::Var) return from_max_.count(e.name) > 0;
    for (const ExprPtr& a : e.args)
      if (reads_max(*a)) return true;
    return false;
  }

  /// The products `a` is of, as a side of a shift (through reshapes, selects and names); not
  /// into a maximum (which no multiply-add takes in) or other arithmetic.
  void shifted(const Expr& a) {
    through(a, followed_, [&](const Expr& e) {
      if (e.kind == ExprKind::Binary && e.op == BinOp::Mul && e.type.scalar == kir::Scalar::F32)
        products.insert(&e);
    });
  }

  const Bindings& b_;
  std::set<std::string> from_max_, followed_, exponents_;
};

class Rewriter : public kir::KirMutator {
public:
  explicit Rewriter(const Shifts& s) : s_(s) {}
  using KirMutator::mutate;

  ExprPtr mutate(const ExprPtr& e) override {
    ExprPtr m = KirMutator::mutate(e); // operands first
    if (!s_.products.count(e.get())) return m;
    // `a * b` as the product the compiler cannot fuse.
    return kir::call(kir::Intrinsic::MulRn, {m->args[0], m->args[1]});
  }

private:
  const Shifts& s_;
};

} // namespace

void round_before_shift(kir::Kernel& kernel) {
  const Bindings b = kir::bindings(kernel.body);
  Shifts s(b);
  s.visit(kernel.body);
  if (s.products.empty()) return;
  Rewriter r(s);
  r.mutate(kernel.body);
}

} // namespace dtc
