#include "ir/ConstantFold.h"

#include "ir/IRVisitor.h"

#include <cmath>

namespace dtc {
namespace {

class Folder : public ir::IRMutator {
  using ir::IRMutator::visit;

  static const ir::Const* lit(const ir::ExprPtr& e) { return e->as<ir::Const>(); }

  ir::ExprPtr visit(const ir::Unary& e, const ir::ExprPtr& self) override {
    ir::ExprPtr a = mutate(e.a);
    if (auto* c = lit(a)) {
      if (e.op == ir::UnOp::Plus) return a;
      return std::make_shared<ir::Const>(e.loc, -c->value, c->is_int);
    }
    return a == e.a ? self : std::make_shared<ir::Unary>(e.loc, e.op, a);
  }

  ir::ExprPtr visit(const ir::Binary& e, const ir::ExprPtr& self) override {
    ir::ExprPtr a = mutate(e.a), b = mutate(e.b);
    const ir::Const *x = lit(a), *y = lit(b);
    if (x && y && ir::is_comparison(e.op)) {
      // A comparison counts as 0 or 1; of two literals it is a literal.
      bool r = false;
      switch (e.op) {
      case ir::BinOp::Lt:
        r = x->value < y->value;
        break;
      case ir::BinOp::Le:
        r = x->value <= y->value;
        break;
      case ir::BinOp::Gt:
        r = x->value > y->value;
        break;
      case ir::BinOp::Ge:
        r = x->value >= y->value;
        break;
      case ir::BinOp::Eq:
        r = x->value == y->value;
        break;
      default:
        r = x->value != y->value;
        break;
      }
      return std::make_shared<ir::Const>(e.loc, r ? 1.0 : 0.0, true);
    }
    // A whole division by zero is left to run time, where it is the kernel's and torch's.
    bool zero_division = e.op == ir::BinOp::IntDiv && y && y->value == 0;
    if (x && y && !ir::is_comparison(e.op) && !zero_division) {
      double r;
      bool is_int = x->is_int && y->is_int && e.op != ir::BinOp::Div;
      switch (e.op) {
      case ir::BinOp::Add:
        r = x->value + y->value;
        break;
      case ir::BinOp::Sub:
        r = x->value - y->value;
        break;
      case ir::BinOp::Mul:
        r = x->value * y->value;
        break;
      case ir::BinOp::Div:
        r = x->value / y->value;
        break;
      case ir::BinOp::Mod:
        r = std::fmod(x->value, y->value);
        break;
      case ir::BinOp::IntDiv:
        // Rounded toward zero, as C's `/` and Triton's `//` on integers (not Python's floor).
        r = std::fabs(x->value) < 0x1p62 && std::fabs(y->value) < 0x1p62
                ? static_cast<double>(static_cast<long long>(x->value) /
                                      static_cast<long long>(y->value))
                : std::trunc(x->value / y->value);
        is_int = true;
        break;
      default:
        r = 0;
        break;
      }
      // IEEE arithmetic, as the kernel and torch compute it: 1 / 0 is inf, 0 % 0 is NaN.
      return std::make_shared<ir::Const>(e.loc, r, is_int && std::isfinite(r));
    }
    if (a == e.a && b == e.b) return self;
    return std::make_shared<ir::Binary>(e.loc, e.op, a, b, ir::union_labels(a->dims, b->dims));
  }

  ir::ExprPtr visit(const ir::Call& e, const ir::ExprPtr& self) override {
    ir::ExprPtr folded = ir::IRMutator::visit(e, self);
    auto* call = folded->as<ir::Call>();
    if (!call) return folded;
    static const std::pair<const char*, double (*)(double)> unary[] = {
        {"exp", [](double v) { return std::exp(v); }},
        {"log", [](double v) { return std::log(v); }},
        {"sqrt", [](double v) { return std::sqrt(v); }},
        {"rsqrt", [](double v) { return 1.0 / std::sqrt(v); }},
        {"tanh", [](double v) { return std::tanh(v); }},
        {"abs", [](double v) { return std::fabs(v); }},
        {"sin", [](double v) { return std::sin(v); }},
        {"cos", [](double v) { return std::cos(v); }},
        {"erf", [](double v) { return std::erf(v); }},
        {"exp2", [](double v) { return std::exp2(v); }},
        {"log2", [](double v) { return std::log2(v); }},
    };
    if (call->args.size() == 1)
      if (auto* c = lit(call->args[0]))
        for (const auto& [name, fn] : unary)
          if (call->fn == name) {
            return std::make_shared<ir::Const>(e.loc, fn(c->value), false);
          }
    if (call->fn == "pow")
      if (auto* b = lit(call->args[0]), *x = lit(call->args[1]); b && x)
        return std::make_shared<ir::Const>(e.loc, std::pow(b->value, x->value), false);
    return folded;
  }
};

} // namespace

ir::ExprPtr fold_constants(const ir::ExprPtr& e) {
  return Folder().mutate(e);
}

} // namespace dtc
