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

/// Whether `e` holds a load or reads a name in `loaded`.
bool from_memory(const Expr& e, const std::set<std::string>& loaded) {
  if (e.kind == ExprKind::Load || (e.kind == ExprKind::Var && loaded.count(e.name))) return true;
  for (const kir::ExprPtr& a : e.args)
    if (from_memory(*a, loaded)) return true;
  return false;
}

/// The names whose values depend on a load (a gather's index `T = tl.load(T_ptr + ...)`).
struct Loaded : kir::KirVisitor {
  using KirVisitor::visit;
  std::set<std::string> names;
  void visit(const Stmt& s) override {
    if (s.kind == StmtKind::Assign && from_memory(*s.value, names)) names.insert(s.name);
    KirVisitor::visit(s);
  }
};

/// The pointer a load reads a tile of at positions computed from labels alone; "" for a gather
/// (its address depends on another load: `P[x, T[x]]` reads one element of the row again, not
/// the row) or an address that cannot be told.
std::string tile_pointer(const Expr& load, const std::set<std::string>& loaded) {
  return from_memory(*load.args[0], loaded) ? "" : kir::base_pointer(*load.args[0]);
}

/// What statements (with everything nested in them) do: the pointers they read tiles through,
/// those they store through, and whether they hold a tl.dot.
struct Effects : kir::KirVisitor {
  using KirVisitor::visit;
  explicit Effects(const std::set<std::string>& loaded_names) : loaded(loaded_names) {}
  const std::set<std::string>& loaded;
  std::set<std::string> read, stored;
  bool dot = false;
  void visit(const Stmt& s) override {
    if (s.kind == StmtKind::Store) stored.insert(kir::base_pointer(*s.ptr));
    KirVisitor::visit(s);
  }
  void visit(const Expr& e) override {
    if (e.kind == ExprKind::Load)
      if (std::string p = tile_pointer(e, loaded); !p.empty()) read.insert(p);
    dot |= e.kind == ExprKind::Dot;
    KirVisitor::visit(e);
  }
};

/// Marks the tile loads through `pointers` in the statements it walks.
class Mark : public kir::KirMutator {
public:
  using KirMutator::mutate;
  Mark(const std::set<std::string>& pointers, const std::set<std::string>& loaded)
      : pointers_(pointers), loaded_(loaded) {}
  kir::ExprPtr mutate(const kir::ExprPtr& e) override {
    kir::ExprPtr out = KirMutator::mutate(e);
    if (out->kind == ExprKind::Load && !out->value_int &&
        pointers_.count(tile_pointer(*out, loaded_)))
      return kir::keep_in_cache(*out);
    return out;
  }

private:
  const std::set<std::string>& pointers_;
  const std::set<std::string>& loaded_;
};

// In each block, inner blocks first: a loop's tile loads of an input that a later statement
// of the block reads tiles of again. `written`: what the kernel stores through (its outputs,
// its temporaries), never hinted.
void mark(std::vector<StmtPtr>& block, const std::set<std::string>& written,
          const std::set<std::string>& loaded) {
  for (StmtPtr& s : block)
    mark(s->body, written, loaded);
  std::set<std::string> later;
  for (size_t i = block.size(); i-- > 0;) {
    Stmt& s = *block[i];
    Effects e(loaded);
    e.visit(s);
    if (s.kind == StmtKind::For) {
      std::set<std::string> again;
      for (const std::string& p : e.read)
        if (later.count(p) && !written.count(p)) again.insert(p);
      if (!again.empty()) Mark(again, loaded).mutate(s.body);
    }
    later.insert(e.read.begin(), e.read.end());
  }
}

} // namespace

void keep_rereads_in_cache(kir::Kernel& kernel) {
  Loaded loaded;
  loaded.visit(kernel.body);
  Effects whole(loaded.names);
  whole.visit(kernel.body);
  if (whole.dot) return;
  mark(kernel.body, whole.stored, loaded.names);
}

} // namespace dtc
