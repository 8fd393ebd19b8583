#include "kir/EliminateDeadCode.h"

#include <map>

#include <utility>

namespace dtc {
namespace {

// Names read by a statement other than by an assignment to that same name: a loop-carried
// accumulator reads itself, which alone does not keep it alive.
void count_reads(const std::vector<kir::StmtPtr>& stmts, std::set<std::string>& read) {
  for (const kir::StmtPtr& s : stmts) {
    std::set<std::string> names;
    for (const kir::ExprPtr* e : std::as_const(*s).operands())
      if (*e) kir::free_vars(**e, names);
    if (s->kind == kir::StmtKind::Assign) names.erase(s->name);
    read.insert(names.begin(), names.end());
    count_reads(s->body, read);
  }
}

bool has_effect(const std::vector<kir::StmtPtr>& stmts) {
  for (const kir::StmtPtr& s : stmts)
    if (s->kind != kir::StmtKind::Comment) return true;
  return false;
}

bool sweep(std::vector<kir::StmtPtr>& stmts, const std::set<std::string>& read) {
  bool changed = false;
  for (auto it = stmts.begin(); it != stmts.end();) {
    kir::Stmt& s = **it;
    if (s.kind == kir::StmtKind::For) changed |= sweep(s.body, read);
    bool dead = (s.kind == kir::StmtKind::Assign && !read.count(s.name)) ||
                (s.kind == kir::StmtKind::For && !has_effect(s.body) && !read.count(s.name));
    if (dead) {
      it = stmts.erase(it);
      changed = true;
      continue;
    }
    ++it;
  }
  return changed;
}

} // namespace

void eliminate_dead_code(kir::Kernel& kernel) {
  while (true) {
    std::set<std::string> read;
    count_reads(kernel.body, read);
    if (!sweep(kernel.body, read)) return;
  }
}

} // namespace dtc
