#include "kir/SimplifyMasks.h"

#include "kir/KirVisitor.h"

#include <functional>
#include <map>

namespace dtc {
namespace {

using kir::BinOp;
using kir::Expr;
using kir::ExprKind;
using kir::ExprPtr;
using kir::StmtKind;
using kir::StmtPtr;

bool is_and(const Expr& e) {
  return e.kind == ExprKind::Binary && e.op == BinOp::And;
}

bool is_zero(const Expr& e) {
  return e.kind == ExprKind::Float && e.value_float == 0.0;
}

// The values of names bound once.
struct Definitions : kir::KirVisitor {
  using KirVisitor::visit;
  explicit Definitions(const std::map<std::string, int>& n) : bindings(n) {}
  const std::map<std::string, int>& bindings;
  std::map<std::string, ExprPtr> defs;
  void visit(const kir::Stmt& s) override {
    if (s.kind == StmtKind::Assign && bindings.at(s.name) == 1) defs[s.name] = s.value;
    visit(s.body);
  }
};

// Each operand of a statement (a whole value, not its parts) simplified.
class Simplifier : public kir::KirMutator {
public:
  using KirMutator::mutate;
  explicit Simplifier(kir::Kernel& k) : k_(k), bindings_(kir::binding_counts(k.body)) {
    Definitions d(bindings_);
    d.visit(k.body);
    defs_ = std::move(d.defs);
  }

  void run() { mutate(k_.body); }

  ExprPtr mutate(const ExprPtr& e) override { return simplify(e); }

private:
  // The conditions a conjunction `e` requires, each once, looking through names bound once to a
  // conjunction (`x_y_mask = x_mask & y_mask`).
  void conjuncts(const ExprPtr& e, std::vector<ExprPtr>& out) const {
    const ExprPtr* of = &e;
    if (e->kind == ExprKind::Var)
      if (auto it = defs_.find(e->name); it != defs_.end() && is_and(*it->second)) of = &it->second;
    if (is_and(**of)) {
      conjuncts((*of)->args[0], out);
      conjuncts((*of)->args[1], out);
      return;
    }
    for (const ExprPtr& x : out)
      if (kir::equal(*x, *e)) return;
    out.push_back(e);
  }

  // Whether every name `e` reads is a parameter or bound once: then it means the same here as
  // in the load that masked with it.
  bool bound_once(const Expr& e) const {
    std::set<std::string> names;
    kir::free_vars(e, names);
    for (const std::string& n : names)
      if (auto it = bindings_.find(n); it != bindings_.end() && it->second != 1) return false;
    return true;
  }

  // Whether `v` is 0.0 on every lane where condition `m` is false.
  bool zero_where_not(const Expr& v, const Expr& m, int depth = 0) const {
    if (depth > 16) return false;
    switch (v.kind) {
    case ExprKind::Var: {
      auto it = defs_.find(v.name);
      return it != defs_.end() && zero_where_not(*it->second, m, depth + 1);
    }
    case ExprKind::Load: {
      if (v.args.size() < 2) return false;
      std::vector<ExprPtr> parts;
      conjuncts(v.args[1], parts);
      for (const ExprPtr& p : parts)
        if (kir::equal(*p, m)) return true;
      return false;
    }
    case ExprKind::Cast:
      return v.type.is_float() && zero_where_not(*v.args[0], m, depth + 1);
    case ExprKind::Binary:
      return (v.op == BinOp::Add || v.op == BinOp::Mul) &&
             zero_where_not(*v.args[0], m, depth + 1) && zero_where_not(*v.args[1], m, depth + 1);
    default:
      return false;
    }
  }

  ExprPtr simplify(const ExprPtr& e) {
    std::vector<ExprPtr> args;
    bool changed = false;
    for (const ExprPtr& a : e->args) {
      args.push_back(simplify(a));
      changed |= args.back() != a;
    }
    ExprPtr out = changed ? kir::with_args(*e, std::move(args)) : e;
    // The value must already have the select's type: a broadcast by the mask is kept.
    if (out->kind == ExprKind::Select && is_zero(*out->args[2]) &&
        out->args[1]->type == out->type && bound_once(*out->args[0]) &&
        zero_where_not(*out->args[1], *out->args[0]))
      return out->args[1];
    if (is_and(*out)) {
      // Repeated conditions only: names stay as written.
      std::vector<ExprPtr> parts;
      std::function<void(const ExprPtr&)> flat = [&](const ExprPtr& x) {
        if (is_and(*x)) {
          flat(x->args[0]);
          flat(x->args[1]);
          return;
        }
        for (const ExprPtr& y : parts)
          if (kir::equal(*x, *y)) return;
        parts.push_back(x);
      };
      flat(out);
      ExprPtr joined;
      for (const ExprPtr& p : parts)
        joined = kir::and_(joined, p);
      if (!kir::equal(*joined, *out)) return joined;
    }
    return out;
  }

  kir::Kernel& k_;
  std::map<std::string, int> bindings_; // name -> how many statements bind it
  std::map<std::string, ExprPtr> defs_; // names bound once -> their value
};

} // namespace

void simplify_masks(kir::Kernel& kernel) {
  Simplifier(kernel).run();
}

} // namespace dtc
