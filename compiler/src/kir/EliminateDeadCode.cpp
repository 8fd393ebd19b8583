#include "kir/EliminateDeadCode.h"

#include "kir/KirVisitor.h"

#include <set>

namespace dtc {
namespace {

using kir::Stmt;
using kir::StmtKind;
using kir::StmtPtr;

// Names read by a statement other than by an assignment to that same name: a loop-carried
// accumulator reads itself, which alone does not keep it alive.
struct Reads : kir::KirVisitor {
  using KirVisitor::visit;
  std::set<std::string> read;
  void visit(const Stmt& s) override {
    std::set<std::string> names;
    for (const kir::ExprPtr* e : s.operands())
      if (*e) kir::free_vars(**e, names);
    if (s.kind == StmtKind::Assign) names.erase(s.name);
    read.insert(names.begin(), names.end());
    visit(s.body);
  }
};

bool has_effect(const std::vector<StmtPtr>& stmts) {
  for (const StmtPtr& s : stmts)
    if (s->kind != StmtKind::Comment) return true;
  return false;
}

// Drops assignments nothing reads and loops left with nothing to do.
struct Sweep : kir::KirMutator {
  using KirMutator::mutate;
  explicit Sweep(const std::set<std::string>& r) : read(r) {}
  const std::set<std::string>& read;
  bool changed = false;
  std::vector<StmtPtr> mutate(StmtPtr s) override {
    if (s->kind == StmtKind::For) mutate(s->body);
    bool dead = (s->kind == StmtKind::Assign && !read.count(s->name)) ||
                (s->kind == StmtKind::For && !has_effect(s->body) && !read.count(s->name));
    std::vector<StmtPtr> out;
    if (dead)
      changed = true;
    else
      out.push_back(std::move(s));
    return out;
  }
};

} // namespace

void eliminate_dead_code(kir::Kernel& kernel) {
  while (true) {
    Reads reads;
    reads.visit(kernel.body);
    Sweep sweep(reads.read);
    sweep.mutate(kernel.body);
    if (!sweep.changed) return;
  }
}

} // namespace dtc
