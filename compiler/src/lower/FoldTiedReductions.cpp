// Reductions folded onto a tied output label (FoldTiedReductions.h).
#include "lower/FoldTiedReductions.h"

#include "ir/IRVisitor.h"

#include <set>

namespace dtc {
namespace {

using ir::Label;

/// The pairs of labels that index one dimension of one input somewhere in `e`.
std::set<std::pair<Label, Label>> tied_pairs(const ir::Expr& e) {
  std::map<std::pair<const ir::Symbol*, size_t>, std::set<Label>> by_dimension;
  ir::for_each_access(e, [&](const ir::Access& a, const ir::Labels&) {
    if (a.tensor->kind != ir::SymbolKind::In) return;
    for (size_t i = 0; i < a.index.size(); ++i)
      if (!a.position(i)) by_dimension[{a.tensor, i}].insert(a.index[i]);
  });
  std::set<std::pair<Label, Label>> pairs;
  for (const auto& [dim, labels] : by_dimension)
    for (Label a : labels)
      for (Label b : labels)
        if (a != b) pairs.insert({a, b});
  return pairs;
}

/// Labels some rdot reduces over or produces: their tiles are at least 16 wide, so the width of
/// such a tile need not be its tied label's.
ir::Labels dot_labels(const ir::Expr& e) {
  struct Dots : ir::IRVisitor {
    ir::Labels out;
    void visit(const ir::Dot& d) override {
      out = ir::union_labels(out, ir::union_labels(d.a->dims, d.b->dims));
      ir::IRVisitor::visit(d);
    }
  } dots;
  e.accept(dots);
  return dots.out;
}

/// Whether renaming `from` to `to` in `e` would capture: a reduction or product inside `e` runs
/// over `to` and its operand reads `from` (after the rename it would read its own label).
/// `e`'s dims do not show a label bound inside it; a closed inner reduction over `to` (a folded
/// mean beside the variance, in LayerNorm) is no obstacle.
bool captures(const ir::Expr& e, Label from, Label to) {
  struct Captures : ir::IRVisitor {
    Label from, to;
    bool found = false;
    void visit(const ir::Reduce& r) override {
      found = found || (r.rvar == to && ir::contains(r.a->dims, from));
      ir::IRVisitor::visit(r);
    }
    void visit(const ir::Dot& d) override {
      found = found ||
              (d.rvar == to && (ir::contains(d.a->dims, from) || ir::contains(d.b->dims, from)));
      ir::IRVisitor::visit(d);
    }
  } c;
  c.from = from;
  c.to = to;
  e.accept(c);
  return c.found;
}

/// Renames label `from` to `to` in an expression.
class Rename : public ir::IRMutator {
public:
  Rename(Label from, Label to) : from_(from), to_(to) {}
  using ir::IRMutator::visit;

private:
  Label r(Label l) const { return l == from_ ? to_ : l; }
  ir::Labels r(const ir::Labels& ls) const {
    ir::Labels out;
    for (Label l : ls)
      out.push_back(r(l));
    return out;
  }
  ir::ExprPtr visit(const ir::Access& e, const ir::ExprPtr&) override {
    std::vector<ir::ExprPtr> pos;
    for (const ir::ExprPtr& p : e.pos)
      pos.push_back(p ? mutate(p) : nullptr);
    return std::make_shared<ir::Access>(e.loc, e.tensor, r(e.index), pos);
  }
  ir::ExprPtr visit(const ir::LabelValue& e, const ir::ExprPtr&) override {
    return std::make_shared<ir::LabelValue>(e.loc, r(e.label));
  }
  ir::ExprPtr visit(const ir::Len& e, const ir::ExprPtr&) override {
    return std::make_shared<ir::Len>(e.loc, r(e.label));
  }
  ir::ExprPtr visit(const ir::Reduce& e, const ir::ExprPtr&) override {
    return std::make_shared<ir::Reduce>(e.loc, e.op, mutate(e.a), r(e.rvar), r(e.dims));
  }
  ir::ExprPtr visit(const ir::Dot& e, const ir::ExprPtr&) override {
    return std::make_shared<ir::Dot>(e.loc, mutate(e.a), mutate(e.b), r(e.rvar), r(e.dims));
  }
  ir::ExprPtr visit(const ir::Reshape& e, const ir::ExprPtr&) override {
    std::vector<Label> shape;
    for (Label l : e.shape)
      shape.push_back(l ? r(l) : nullptr);
    return std::make_shared<ir::Reshape>(e.loc, mutate(e.a), shape);
  }
  Label from_, to_;
};

/// Folds each reduction of a Func's value whose label is tied to one of the Func's dimensions.
class Fold : public ir::IRMutator {
public:
  Fold(const ir::FuncDef& def, const FuncSchedule& fs, std::set<std::pair<Label, Label>> tied,
       ir::Labels dots)
      : def_(def), fs_(fs), tied_(std::move(tied)), dots_(std::move(dots)) {}
  using ir::IRMutator::visit;

private:
  bool whole_tile(Label l) const { return fs_.fully_tensorized(l) && !fs_.block_of(l); }

  ir::ExprPtr visit(const ir::Reduce& e, const ir::ExprPtr& self) override {
    ir::ExprPtr folded = ir::IRMutator::visit(e, self);
    const auto& r = static_cast<const ir::Reduce&>(*folded);
    Label k = r.rvar;
    if (ir::contains(def_.dims, k) || !whole_tile(k) || ir::contains(dots_, k)) return folded;
    for (Label y : def_.dims) {
      // The operand must not vary along y already, nor reduce over y where it reads k: y
      // would then name two things there.
      if (!whole_tile(y) || ir::contains(dots_, y) || ir::contains(r.a->dims, y) ||
          captures(*r.a, k, y) || !tied_.count({k, y}))
        continue;
      return Rename(k, y).mutate(folded);
    }
    return folded;
  }

  const ir::FuncDef& def_;
  const FuncSchedule& fs_;
  std::set<std::pair<Label, Label>> tied_;
  ir::Labels dots_;
};

} // namespace

void fold_tied_reductions(ir::Program& program, const KernelPlan& plan) {
  for (auto& [f, def] : program.funcs) {
    if (plan.split_of(f)) continue;
    const FuncSchedule& fs = plan.of(f);
    Fold fold(def, fs, tied_pairs(*def.value), dot_labels(*def.value));
    def.value = fold.mutate(def.value);
  }
}

} // namespace dtc
