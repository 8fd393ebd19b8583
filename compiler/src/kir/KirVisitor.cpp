#include "kir/KirVisitor.h"

namespace dtc::kir {

void KirVisitor::visit(const std::vector<StmtPtr>& block) {
  for (const StmtPtr& s : block)
    visit(*s);
}

void KirVisitor::visit(const Stmt& s) {
  for (const ExprPtr* e : s.operands())
    if (*e) visit(**e);
  visit(s.body);
}

void KirVisitor::visit(const Expr& e) {
  for (const ExprPtr& a : e.args)
    visit(*a);
}

void KirMutator::mutate(std::vector<StmtPtr>& block) {
  std::vector<StmtPtr> out;
  out.reserve(block.size());
  for (StmtPtr& s : block)
    for (StmtPtr& r : mutate(std::move(s)))
      out.push_back(std::move(r));
  block = std::move(out);
}

std::vector<StmtPtr> KirMutator::mutate(StmtPtr s) {
  for (ExprPtr* e : s->operands())
    if (*e) *e = mutate(*e);
  mutate(s->body);
  std::vector<StmtPtr> out;
  out.push_back(std::move(s));
  return out;
}

ExprPtr KirMutator::mutate(const ExprPtr& e) {
  std::vector<ExprPtr> args;
  bool changed = false;
  for (const ExprPtr& a : e->args) {
    args.push_back(mutate(a));
    changed |= args.back() != a;
  }
  return changed ? with_args(*e, std::move(args)) : e;
}

std::map<std::string, std::vector<ExprPtr>> bindings(const std::vector<StmtPtr>& block) {
  struct Collect : KirVisitor {
    using KirVisitor::visit;
    std::map<std::string, std::vector<ExprPtr>> values;
    void visit(const Stmt& s) override {
      if (s.kind == StmtKind::Assign) values[s.name].push_back(s.value);
      KirVisitor::visit(s);
    }
  } collect;
  collect.visit(block);
  return std::move(collect.values);
}

} // namespace dtc::kir
