#include "kir/HoistLoopInvariants.h"

#include "kir/KirVisitor.h"

#include <map>

namespace dtc {
namespace {

using kir::Expr;
using kir::ExprKind;
using kir::Stmt;
using kir::StmtKind;
using kir::StmtPtr;

/// The pointers `e` loads through ("" for one that cannot be told).
void loaded_pointers(const Expr& e, std::set<std::string>& out) {
  if (e.kind == ExprKind::Load) out.insert(kir::base_pointer(*e.args[0]));
  for (const kir::ExprPtr& a : e.args)
    loaded_pointers(*a, out);
}

struct LoopEffects {
  std::set<std::string> bound;  // names the loop binds, its own variable included
  std::set<std::string> stored; // pointers it stores through ("" for one that cannot be told)
  bool barrier = false;
};

struct Effects : kir::KirVisitor {
  using KirVisitor::visit;
  LoopEffects out;
  void visit(const Stmt& s) override {
    if (s.kind == StmtKind::Assign || s.kind == StmtKind::For) out.bound.insert(s.name);
    if (s.kind == StmtKind::Store) out.stored.insert(kir::base_pointer(*s.ptr));
    if (s.kind == StmtKind::Barrier) out.barrier = true;
    visit(s.body);
  }
};

// A loop (inner loops first) becomes its invariant assignments, then the loop.
class Hoister : public kir::KirMutator {
public:
  using KirMutator::mutate;
  explicit Hoister(kir::Kernel& k) : k_(k), bindings_(kir::binding_counts(k.body)) {}

  void run() { mutate(k_.body); }

  std::vector<StmtPtr> mutate(StmtPtr s) override {
    std::vector<StmtPtr> out;
    if (s->kind == StmtKind::For) {
      mutate(s->body);
      out = invariants(*s);
    }
    out.push_back(std::move(s));
    return out;
  }

private:
  bool movable(const Stmt& s, const LoopEffects& loop) const {
    if (s.kind != StmtKind::Assign || bindings_.at(s.name) != 1) return false;
    std::set<std::string> reads;
    kir::free_vars(*s.value, reads);
    for (const std::string& r : reads)
      if (loop.bound.count(r)) return false;
    std::set<std::string> loads;
    loaded_pointers(*s.value, loads);
    if (loads.empty()) return true;
    if (loop.barrier || loop.stored.count("")) return false;
    for (const std::string& p : loads)
      if (p.empty() || loop.stored.count(p)) return false;
    return true;
  }

  // Takes the loop's invariant assignments out of its body, in order.
  std::vector<StmtPtr> invariants(Stmt& loop) {
    Effects e;
    e.visit(loop.body);
    LoopEffects fx = std::move(e.out);
    fx.bound.insert(loop.name);
    std::vector<StmtPtr> out;
    for (auto it = loop.body.begin(); it != loop.body.end();) {
      if (movable(**it, fx)) {
        fx.bound.erase((*it)->name);
        out.push_back(std::move(*it));
        it = loop.body.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }

  kir::Kernel& k_;
  std::map<std::string, int> bindings_;
};

} // namespace

void hoist_loop_invariants(kir::Kernel& kernel) {
  Hoister(kernel).run();
}

} // namespace dtc
