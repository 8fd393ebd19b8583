#include "kir/MaxBeforeScale.h"

#include "kir/KirVisitor.h"

#include <cmath>
#include <map>
#include <optional>

namespace dtc {
namespace {

using kir::BinOp;
using kir::Expr;
using kir::ExprKind;
using kir::ExprPtr;
using kir::Intrinsic;

using Bindings = std::map<std::string, std::vector<ExprPtr>>;

/// What is known of a scale: positive (or NaN), and finite or else infinite only where size
/// parameter `zero_size` is 0.
struct Scale {
  bool finite = true;
  std::string zero_size;
};

class Rewriter : public kir::KirMutator {
public:
  explicit Rewriter(const Bindings& b) : b_(b) {}
  using KirMutator::mutate;

  ExprPtr mutate(const ExprPtr& e) override {
    ExprPtr m = KirMutator::mutate(e); // operands first
    if (m->kind != ExprKind::Reduce || m->reduce != kir::ReduceOp::Max) return m;
    const ExprPtr* scale = nullptr;
    ExprPtr unscaled = strip(m->args[0], scale);
    if (!unscaled) return m;
    return kir::mul(kir::reduce(kir::ReduceOp::Max, unscaled, static_cast<int>(m->value_int)),
                    *scale);
  }

private:
  /// `e` followed through its name's single binding.
  const Expr& resolve(const Expr& e) const {
    if (e.kind != ExprKind::Var) return e;
    auto it = b_.find(e.name);
    return it != b_.end() && it->second.size() == 1 ? *it->second.front() : e; // bound once
  }

  /// `e` (the reduced tile) without its scale: `t * s` -> t, `where(c, x, -inf)` -> `where(c,
  /// x', -inf)` (either side); null where it has no scale the rewrite may take. `scale` is set
  /// to the one scale every product of `e` shares.
  ExprPtr strip(const ExprPtr& e, const ExprPtr*& scale) const {
    if (e->kind == ExprKind::Select) {
      for (int side : {1, 2}) {
        const Expr& other = *e->args[3 - side];
        if (other.kind != ExprKind::Float || other.value_float != -INFINITY) continue;
        ExprPtr inner = strip(e->args[side], scale);
        if (!inner) return nullptr;
        return side == 1 ? kir::select(e->args[0], inner, e->args[2])
                         : kir::select(e->args[0], e->args[1], inner);
      }
      return nullptr;
    }
    if (e->kind != ExprKind::Binary || e->op != BinOp::Mul || e->type.shape.empty() ||
        e->type.scalar != kir::Scalar::F32)
      return nullptr;
    for (int side : {0, 1}) {
      const ExprPtr& s = e->args[1 - side];
      const ExprPtr& t = e->args[side];
      if (!s->type.shape.empty() || t->type.shape.empty()) continue;
      std::optional<Scale> known = positive(*s);
      if (!known || (!known->finite && !product_over(*t, known->zero_size))) return nullptr;
      if (scale && !kir::equal(**scale, *s)) return nullptr;
      scale = &s;
      return t;
    }
    return nullptr;
  }

  /// What is known of scalar `e` if it is positive (or NaN): a positive constant, a product
  /// of such, or `c / sqrt(n)` of a positive c and a size parameter n (infinite for n = 0).
  std::optional<Scale> positive(const Expr& x) const {
    const Expr& e = resolve(x);
    if (e.kind == ExprKind::Float && e.value_float > 0)
      return Scale{std::isfinite(e.value_float), ""};
    if (e.kind == ExprKind::Binary && e.op == BinOp::Mul) {
      std::optional<Scale> a = positive(*e.args[0]), b = positive(*e.args[1]);
      if (!a || !b || (!a->finite && !b->finite)) return std::nullopt;
      return Scale{a->finite && b->finite, a->zero_size + b->zero_size};
    }
    bool divide = (e.kind == ExprKind::Call && e.fn == Intrinsic::DivRn) ||
                  (e.kind == ExprKind::Binary && e.op == BinOp::Div);
    if (!divide) return std::nullopt;
    std::optional<Scale> c = positive(*e.args[0]);
    if (!c || !c->finite) return std::nullopt;
    const Expr& root = resolve(*e.args[1]);
    if (root.kind != ExprKind::Call || (root.fn != Intrinsic::Sqrt && root.fn != Intrinsic::SqrtRn))
      return std::nullopt;
    const Expr& n = resolve(*root.args[0]);
    // A size (a whole number, 0 or more) converted to float32: its square root is +0 or
    // positive, never -0.
    if (n.kind != ExprKind::Cast || n.args[0]->kind != ExprKind::Var ||
        !n.args[0]->type.shape.empty() || n.args[0]->type.is_float())
      return std::nullopt;
    const std::string& name = n.args[0]->name;
    const std::string suffix = "_size";
    if (name.size() <= suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      return std::nullopt;
    return Scale{false, name.substr(0, name.size() - suffix.size())};
  }

  /// Whether tile `t` is one product (tl.dot, reshaped or not, no accumulator) over label
  /// `label`: its operands' shared extent is that label's tile parameter.
  bool product_over(const Expr& x, const std::string& label) const {
    const Expr* e = &resolve(x);
    while (e->kind == ExprKind::Reshape)
      e = &resolve(*e->args[0]);
    if (e->kind != ExprKind::Dot || e->args.size() != 2 || label.empty()) return false;
    const kir::Shape& a = e->args[0]->type.shape;
    return a.size() == 2 && a[1].param == label + "_TILE";
  }

  const Bindings& b_;
};

} // namespace

void max_before_scale(kir::Kernel& kernel) {
  const Bindings b = kir::bindings(kernel.body);
  Rewriter r(b);
  r.mutate(kernel.body);
}

} // namespace dtc
