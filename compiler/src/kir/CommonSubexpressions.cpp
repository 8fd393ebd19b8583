#include "kir/CommonSubexpressions.h"

#include "kir/KirVisitor.h"

#include <algorithm>
#include <functional>
#include <map>

namespace dtc {
namespace {

using kir::Expr;
using kir::ExprKind;
using kir::ExprPtr;
using kir::Stmt;
using kir::StmtKind;
using kir::StmtPtr;

bool reads_memory(const Expr& e) {
  if (e.kind == ExprKind::Load) return true;
  for (const ExprPtr& a : e.args)
    if (reads_memory(*a)) return true;
  return false;
}

bool is_leaf(const Expr& e) {
  return e.args.empty();
}

/// Whether naming `e` saves work: not a name, literal or constant tile, nor a view or cast of
/// a leaf (those cost nothing and read better inline).
bool worth_naming(const Expr& e) {
  switch (e.kind) {
  case ExprKind::Var:
  case ExprKind::Int:
  case ExprKind::Float:
  case ExprKind::Full:
  case ExprKind::Arange:
  case ExprKind::ProgramId:
  case ExprKind::NumPrograms:
    return false;
  case ExprKind::Expand:
  case ExprKind::Cast:
  case ExprKind::Neg:
  case ExprKind::Trans:
    return !is_leaf(*e.args[0]);
  default:
    return true;
  }
}

/// `root` with every subexpression equal to `what` replaced by `by`.
ExprPtr replace_all(const ExprPtr& root, const Expr& what, const ExprPtr& by) {
  if (kir::equal(*root, what)) return by;
  bool changed = false;
  std::vector<ExprPtr> args;
  for (const ExprPtr& a : root->args) {
    args.push_back(replace_all(a, what, by));
    changed |= args.back() != a;
  }
  return changed ? kir::with_args(*root, std::move(args)) : root;
}

/// Every name statements bind, their loops' bodies included, and whether they store.
struct Bindings : kir::KirVisitor {
  using KirVisitor::visit;
  Bindings(std::set<std::string>& o, bool& s) : out(o), stores(s) {}
  std::set<std::string>& out;
  bool& stores;
  void visit(const Stmt& s) override {
    if (s.kind == StmtKind::Assign || s.kind == StmtKind::For) out.insert(s.name);
    if (s.kind == StmtKind::Store || s.kind == StmtKind::Barrier) stores = true;
    visit(s.body);
  }
};

void bound_names(const std::vector<StmtPtr>& stmts, std::set<std::string>& out, bool& stores) {
  Bindings(out, stores).visit(stmts);
}

/// Every occurrence of `what` in statements' operands replaced by `by`.
struct Substitute : kir::KirMutator {
  using KirMutator::mutate;
  Substitute(const Expr& w, const ExprPtr& b) : what(w), by(b) {}
  const Expr& what;
  const ExprPtr& by;
  ExprPtr mutate(const ExprPtr& e) override { return replace_all(e, what, by); }
};

/// `x_mask` -> `x`, `A_ptr` -> `A`: a name's stem for a derived name.
std::string stem(const std::string& name) {
  for (const char* suffix : {"_mask", "_ptr"}) {
    std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0)
      return name.substr(0, name.size() - s.size());
  }
  return name;
}

/// A name for a new binding of `e`: `exp_A` for exp(A), `x_y_mask` for x_mask & y_mask,
/// `A_addr` for an address into A, else `cse`.
std::string base_name(const Expr& e) {
  const std::vector<ExprPtr>& a = e.args;
  if (e.kind == ExprKind::Call && !a.empty() && a[0]->kind == ExprKind::Var)
    return std::string(info(e.fn).name) + "_" + a[0]->name;
  if (e.kind == ExprKind::Binary && e.op == kir::BinOp::And && a[0]->kind == ExprKind::Var &&
      a[1]->kind == ExprKind::Var)
    return stem(a[0]->name) + "_" + stem(a[1]->name) + "_mask";
  if (e.type.scalar == kir::Scalar::Ptr && !e.type.elem_of.empty())
    return stem(e.type.elem_of) + "_addr";
  return "cse";
}

class Cse {
public:
  explicit Cse(kir::Kernel& k) : k_(k) {
    for (const kir::Param& p : k.params)
      names_.insert(p.name);
    bool stores = false;
    bound_names(k.body, names_, stores);
  }

  /// Whether copies were forwarded: values that differed only by those names may be equal now.
  bool run() {
    std::vector<Entry> table;
    block(k_.body, table);
    return forward_copies();
  }

private:
  struct Entry {
    ExprPtr expr;
    std::set<std::string> reads;
    bool memory = false;
    std::string holder;                    // the name holding the value; "" if none yet
    std::vector<StmtPtr>* block = nullptr; // for an unnamed value: where it was first seen
    const Stmt* first = nullptr;           // ... and in which statement
  };

  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int i = 2; names_.count(name); ++i)
      name = base + "_" + std::to_string(i);
    names_.insert(name);
    return name;
  }

  static Entry entry_of(ExprPtr e) {
    Entry x;
    kir::free_vars(*e, x.reads);
    x.memory = reads_memory(*e);
    x.expr = std::move(e);
    return x;
  }

  static void invalidate(std::vector<Entry>& table, const std::set<std::string>& bound,
                         bool memory) {
    std::erase_if(table, [&](const Entry& x) {
      if (memory && x.memory) return true;
      if (!x.holder.empty() && bound.count(x.holder)) return true;
      for (const std::string& r : x.reads)
        if (bound.count(r)) return true;
      return false;
    });
  }

  // `e` with the values named earlier in the current statement read by name (their first
  // occurrence in it is renamed when the statement is done).
  ExprPtr normalized(ExprPtr e) const {
    for (const auto& [what, by] : pending_)
      e = replace_all(e, *what, by);
    return e;
  }

  // The name holding table entry `x`'s value, naming it now if it has none: bound before the
  // statement that first computed it, which then reads the name.
  ExprPtr use(Entry& x, const kir::Type& type, std::vector<StmtPtr>& blk, Stmt* at,
              std::vector<Entry>& table) {
    if (x.holder.empty()) {
      x.holder = fresh(base_name(*x.expr));
      Stmt* first = const_cast<Stmt*>(x.first);
      ExprPtr ref = kir::var(x.holder, type);
      if (first != at) // the statement being rewritten is renamed once it is done
        for (ExprPtr* slot : first->operands())
          if (*slot) *slot = replace_all(*slot, *x.expr, ref);
      auto pos =
          std::find_if(blk.begin(), blk.end(), [&](const StmtPtr& s) { return s.get() == first; });
      blk.insert(pos, Stmt::assign(x.holder, x.expr));
      if (first == at) pending_.push_back({x.expr, ref});
      // Values seen before that contain this one now read it by name, as their later
      // occurrences will once rewritten: `e + e * y` stays equal to itself.
      for (Entry& y : table) {
        if (&y == &x) continue;
        ExprPtr renamed = replace_all(y.expr, *x.expr, ref);
        if (renamed == y.expr) continue;
        y.expr = std::move(renamed);
        y.reads.insert(x.holder);
      }
    }
    return kir::var(x.holder, type);
  }

  Entry* find(std::vector<Entry>& table, const Expr& e, const std::vector<StmtPtr>& blk) {
    for (Entry& x : table)
      if ((!x.holder.empty() || x.block == &blk) && kir::equal(*x.expr, e)) return &x;
    return nullptr;
  }

  // Rewrites `e` within statement `at` of `blk`: values held by a name become the name; a value
  // seen before in this block gets a name. A value is looked for as it is and, once its
  // operands are rewritten, with the names they got.
  ExprPtr rewrite(ExprPtr e, std::vector<StmtPtr>& blk, Stmt* at, std::vector<Entry>& table) {
    if (worth_naming(*e))
      if (Entry* x = find(table, *e, blk)) return use(*x, e->type, blk, at, table);
    bool changed = false;
    std::vector<ExprPtr> args;
    for (const ExprPtr& a : e->args) {
      args.push_back(rewrite(a, blk, at, table));
      changed |= args.back() != a;
    }
    ExprPtr out = changed ? kir::with_args(*e, std::move(args)) : e;
    if (worth_naming(*out)) {
      ExprPtr key = normalized(out);
      if (changed || key != out)
        if (Entry* x = find(table, *key, blk)) return use(*x, e->type, blk, at, table);
      Entry x = entry_of(key);
      x.block = &blk;
      x.first = at;
      table.push_back(std::move(x));
    }
    return out;
  }

  void block(std::vector<StmtPtr>& blk, std::vector<Entry>& table) {
    for (size_t i = 0; i < blk.size(); ++i) {
      Stmt* s = blk[i].get();
      bool was_copy = s->kind == StmtKind::Assign && s->value->kind == ExprKind::Var;
      auto rewrite_slot = [&](ExprPtr& slot) {
        if (!slot) return;
        // Insertions before this statement shift it; find it again afterwards.
        slot = rewrite(slot, blk, s, table);
      };
      for (ExprPtr* slot : s->operands())
        rewrite_slot(*slot);
      // A value first computed earlier in this same statement: its first use is named too.
      for (const auto& [what, by] : pending_)
        for (ExprPtr* slot : s->operands())
          if (*slot) *slot = replace_all(*slot, *what, by);
      pending_.clear();
      while (blk[i].get() != s)
        ++i;
      switch (s->kind) {
      case StmtKind::Assign: {
        if (s->value->kind == ExprKind::Var && s->value->name == s->name) {
          // Binds the value the name already holds.
          std::erase_if(table, [&](const Entry& x) { return x.first == s; });
          blk.erase(blk.begin() + i--);
          break;
        }
        if (!was_copy && s->value->kind == ExprKind::Var) made_copies_.insert(s);
        invalidate(table, {s->name}, false);
        if (worth_naming(*s->value)) {
          Entry x = entry_of(s->value);
          if (!x.reads.count(s->name)) {
            x.holder = s->name;
            std::erase_if(table, [&](const Entry& y) {
              return y.holder.empty() && kir::equal(*y.expr, *x.expr);
            });
            table.push_back(std::move(x));
          }
        }
        break;
      }
      case StmtKind::Store:
      case StmtKind::Barrier:
        invalidate(table, {}, true);
        break;
      case StmtKind::For: {
        std::set<std::string> bound{s->name};
        bool stores = false;
        bound_names(s->body, bound, stores);
        invalidate(table, bound, stores);
        // Inside the loop: only values already named; unnamed ones cannot be bound from there.
        std::vector<Entry> inner;
        for (const Entry& x : table)
          if (!x.holder.empty()) inner.push_back(x);
        block(s->body, inner);
        break;
      }
      case StmtKind::Comment:
        break;
      }
    }
  }

  // `a = b` made a copy by this pass, where each name is bound once (b may be a parameter):
  // every read of a reads b. Copies lowering wrote (`x_block = pid`) keep their names.
  bool forward_copy(std::vector<StmtPtr>& stmts, const std::map<std::string, int>& bindings) {
    for (auto it = stmts.begin(); it != stmts.end(); ++it) {
      Stmt& s = **it;
      if (made_copies_.count(&s) && bindings.at(s.name) == 1 &&
          (!bindings.count(s.value->name) || bindings.at(s.value->name) == 1)) {
        ExprPtr by = s.value;
        ExprPtr what = kir::var(s.name, by->type);
        stmts.erase(it);
        Substitute(*what, by).mutate(k_.body);
        return true;
      }
      if (forward_copy(s.body, bindings)) return true;
    }
    return false;
  }

  bool forward_copies() {
    bool any = false;
    while (forward_copy(k_.body, kir::binding_counts(k_.body)))
      any = true;
    return any;
  }

  kir::Kernel& k_;
  std::set<std::string> names_;
  std::vector<std::pair<ExprPtr, ExprPtr>> pending_; // named within the current statement
  std::set<const Stmt*> made_copies_;                // assignments this pass made copies
};

} // namespace

void eliminate_common_subexpressions(kir::Kernel& kernel) {
  // Again while copies were forwarded (`r2_k_mask = k_mask` made the loads that read them
  // equal), a few rounds at most.
  for (int round = 0; round < 4 && Cse(kernel).run(); ++round) {
  }
}

} // namespace dtc
