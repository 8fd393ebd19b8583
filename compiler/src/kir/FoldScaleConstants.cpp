#include "kir/FoldScaleConstants.h"

#include "kir/KirVisitor.h"

namespace dtc {
namespace {

using kir::BinOp;
using kir::Expr;
using kir::ExprKind;
using kir::ExprPtr;

bool is_f32(const Expr& e) {
  return e.type.scalar == kir::Scalar::F32;
}
bool is_constant(const Expr& e) {
  return e.kind == ExprKind::Float;
}
bool is_mul(const Expr& e) {
  return e.kind == ExprKind::Binary && e.op == BinOp::Mul;
}
/// A float32 scalar that is not a constant (a constant times a constant is folded elsewhere).
bool is_scale(const Expr& e) {
  return is_f32(e) && e.type.shape.empty() && !is_constant(e);
}

class Folder : public kir::KirMutator {
public:
  using KirMutator::mutate;

  ExprPtr mutate(const ExprPtr& e) override {
    ExprPtr m = KirMutator::mutate(e); // operands first
    if (!is_mul(*m) || !is_f32(*m) || m->type.shape.empty()) return m;
    const ExprPtr& a = m->args[0];
    const ExprPtr& b = m->args[1];
    if (is_constant(*b))
      if (ExprPtr folded = times(a, b->value_float)) return folded;
    if (is_constant(*a))
      if (ExprPtr folded = times(b, a->value_float)) return folded;
    return m;
  }

private:
  /// `t * c` with the constant moved into a scale of `t`, or null when `t` has none.
  ExprPtr times(const ExprPtr& t, double c) {
    if (is_mul(*t) && is_f32(*t)) {
      const ExprPtr &x = t->args[0], &y = t->args[1];
      if (is_scale(*y) && !x->type.shape.empty())
        return kir::mul(x, kir::mul(y, kir::float_imm(c)));
      if (is_scale(*x) && !y->type.shape.empty())
        return kir::mul(y, kir::mul(x, kir::float_imm(c)));
      return nullptr;
    }
    if (t->kind == ExprKind::Select && is_f32(*t) && is_constant(*t->args[2])) {
      ExprPtr inner = times(t->args[1], c);
      if (!inner) return nullptr;
      // The constant side as the kernel would compute it: a float32 product.
      float k = static_cast<float>(t->args[2]->value_float) * static_cast<float>(c);
      return kir::select(t->args[0], inner, kir::float_imm(k));
    }
    return nullptr;
  }
};

} // namespace

void fold_scale_constants(kir::Kernel& kernel) {
  Folder f;
  f.mutate(kernel.body);
}

} // namespace dtc
