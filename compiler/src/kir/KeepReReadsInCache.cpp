#include "kir/KeepReReadsInCache.h"

#include "kir/KirVisitor.h"

#include <set>

namespace dtc {
namespace {

using kir::Expr;
using kir::ExprKind;
using kir::Stmt;
using kir::StmtKind;
using kir::StmtPtr;

/// The pointers a statement (with everything nested in it) loads through, and whether it
/// holds a matrix product.
struct Reads : kir::KirVisitor {
  using KirVisitor::visit;
  std::set<std::string> pointers;
  bool dot = false;
  void visit(const Expr& e) override {
    if (e.kind == ExprKind::Load) {
      if (std::string p = kir::base_pointer(*e.args[0]); !p.empty()) pointers.insert(p);
    }
    dot |= e.kind == ExprKind::Dot;
    KirVisitor::visit(e);
  }
};

Reads reads_of(const std::vector<StmtPtr>& block) {
  Reads r;
  r.visit(block);
  return r;
}

/// Marks the loads through `pointers` in the statements it walks.
class Mark : public kir::KirMutator {
public:
  using KirMutator::mutate;
  explicit Mark(const std::set<std::string>& pointers) : pointers_(pointers) {}
  kir::ExprPtr mutate(const kir::ExprPtr& e) override {
    kir::ExprPtr out = KirMutator::mutate(e);
    if (out->kind == ExprKind::Load && !out->value_int &&
        pointers_.count(kir::base_pointer(*out->args[0])))
      return kir::keep_in_cache(*out);
    return out;
  }

private:
  const std::set<std::string>& pointers_;
};

// In each block, inner blocks first: a loop's loads of a pointer that a later statement of
// the block loads again.
void mark(std::vector<StmtPtr>& block) {
  for (StmtPtr& s : block)
    mark(s->body);
  std::set<std::string> later;
  for (size_t i = block.size(); i-- > 0;) {
    Stmt& s = *block[i];
    Reads r;
    r.visit(s);
    if (s.kind == StmtKind::For) {
      std::set<std::string> again;
      for (const std::string& p : r.pointers)
        if (later.count(p)) again.insert(p);
      if (!again.empty()) {
        Mark m(again);
        m.mutate(s.body);
      }
    }
    later.insert(r.pointers.begin(), r.pointers.end());
  }
}

} // namespace

void keep_rereads_in_cache(kir::Kernel& kernel) {
  if (reads_of(kernel.body).dot) return;
  mark(kernel.body);
}

} // namespace dtc
