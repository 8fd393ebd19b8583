#include "lower/EliminateDeadCode.h"

#include <cctype>
#include <map>

namespace dtc {
namespace {

// Counts identifier tokens in Python expression text.
void count_names(const std::string& text, std::map<std::string, int>& uses) {
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == '"' || c == '\'') { // skip string literals such as float("-inf")
      size_t end = text.find(c, i + 1);
      i = end == std::string::npos ? text.size() : end + 1;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t start = i;
      while (i < text.size() &&
             (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_'))
        ++i;
      // An attribute (`.to`) is not a variable.
      if (start == 0 || text[start - 1] != '.') ++uses[text.substr(start, i - start)];
      continue;
    }
    ++i;
  }
}

void count(const std::vector<kir::StmtPtr>& stmts, std::map<std::string, int>& uses) {
  for (const kir::StmtPtr& s : stmts) {
    switch (s->kind) {
    case kir::StmtKind::Assign:
      count_names(s->value, uses);
      // A loop-carried accumulator reads itself; that alone does not keep it alive.
      break;
    case kir::StmtKind::Store:
      count_names(s->target, uses);
      count_names(s->value, uses);
      count_names(s->mask, uses);
      break;
    case kir::StmtKind::For:
      count_names(s->lo, uses);
      count_names(s->hi, uses);
      count_names(s->step, uses);
      count(s->body, uses);
      break;
    case kir::StmtKind::Expr:
      count_names(s->value, uses);
      break;
    case kir::StmtKind::Comment:
      break;
    }
  }
}

bool sweep(std::vector<kir::StmtPtr>& stmts, const std::map<std::string, int>& uses) {
  bool changed = false;
  for (auto it = stmts.begin(); it != stmts.end();) {
    kir::Stmt& s = **it;
    if (s.kind == kir::StmtKind::For) changed |= sweep(s.body, uses);
    if (s.kind == kir::StmtKind::Assign && !uses.count(s.target)) {
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
    std::map<std::string, int> uses;
    count(kernel.body, uses);
    if (!sweep(kernel.body, uses)) return;
  }
}

} // namespace dtc
