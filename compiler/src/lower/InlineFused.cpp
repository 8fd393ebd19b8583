#include "lower/InlineFused.h"

#include "ir/IRVisitor.h"

#include <algorithm>
#include <functional>
#include <set>

namespace dtc {
namespace {

/// Renames labels in an expression (a Func's dims to the labels of one access).
class Relabel : public ir::IRMutator {
public:
  explicit Relabel(std::map<ir::Label, ir::Label> map) : map_(std::move(map)) {}
  using ir::IRMutator::visit;

  ir::Label rename(ir::Label l) const {
    auto it = map_.find(l);
    return it == map_.end() ? l : it->second;
  }
  ir::Labels rename(const ir::Labels& ls) const {
    ir::Labels out;
    for (ir::Label l : ls)
      out.push_back(rename(l));
    return out;
  }

  ir::ExprPtr visit(const ir::Access& e, const ir::ExprPtr&) override {
    std::vector<ir::ExprPtr> pos;
    for (const ir::ExprPtr& p : e.pos)
      pos.push_back(p ? mutate(p) : nullptr);
    return std::make_shared<ir::Access>(e.loc, e.tensor, rename(e.index), pos);
  }
  ir::ExprPtr visit(const ir::LabelValue& e, const ir::ExprPtr&) override {
    return std::make_shared<ir::LabelValue>(e.loc, rename(e.label));
  }
  ir::ExprPtr visit(const ir::Len& e, const ir::ExprPtr&) override {
    return std::make_shared<ir::Len>(e.loc, rename(e.label));
  }
  ir::ExprPtr visit(const ir::Reduce& e, const ir::ExprPtr&) override {
    ir::ExprPtr a = mutate(e.a);
    return std::make_shared<ir::Reduce>(e.loc, e.op, a, rename(e.rvar), rename(e.dims));
  }
  ir::ExprPtr visit(const ir::Dot& e, const ir::ExprPtr&) override {
    ir::ExprPtr a = mutate(e.a), b = mutate(e.b);
    return std::make_shared<ir::Dot>(e.loc, a, b, rename(e.rvar), rename(e.dims));
  }
  ir::ExprPtr visit(const ir::Reshape& e, const ir::ExprPtr&) override {
    std::vector<ir::Label> shape;
    for (ir::Label l : e.shape)
      shape.push_back(l ? rename(l) : nullptr);
    return std::make_shared<ir::Reshape>(e.loc, mutate(e.a), shape);
  }

private:
  std::map<ir::Label, ir::Label> map_;
};

class Inliner : public ir::IRMutator {
public:
  Inliner(const ir::Program& p, const std::set<const ir::Symbol*>& fused,
          const std::map<const ir::Symbol*, ir::ExprPtr>& values, DiagnosticEngine& d)
      : prog_(p), fused_(fused), values_(values), diags_(d) {}
  using ir::IRMutator::visit;

  ir::ExprPtr visit(const ir::Access& e, const ir::ExprPtr& self) override {
    if (e.tensor->kind != ir::SymbolKind::Func || !fused_.count(e.tensor)) return self;
    const ir::FuncDef& def = prog_.def(e.tensor);
    std::map<ir::Label, ir::Label> map;
    for (size_t i = 0; i < def.dims.size(); ++i)
      map[def.dims[i]] = e.index[i];
    // A reduction label of the producer that the access uses as a dimension would be captured:
    // the producer's own, and those of the producers already inlined into it (a chain).
    ir::Labels reduced;
    struct RVars : ir::IRVisitor {
      ir::Labels* out;
      void visit(const ir::Reduce& r) override {
        *out = ir::union_labels(*out, {r.rvar});
        ir::IRVisitor::visit(r);
      }
      void visit(const ir::Dot& d) override {
        *out = ir::union_labels(*out, {d.rvar});
        ir::IRVisitor::visit(d);
      }
    } rvars;
    rvars.out = &reduced;
    values_.at(e.tensor)->accept(rvars);
    for (ir::Label r : reduced) {
      if (ir::contains(def.dims, r)) continue;
      for (size_t i = 0; i < def.dims.size(); ++i)
        if (e.index[i] == r && def.dims[i] != r)
          diags_.error("fuse-illegal-access", e.loc,
                       "cannot fuse `" + e.tensor->name +
                           "` here: this access indexes it "
                           "with `" +
                           r->name +
                           "`, which its definition (or a Func fused into it) "
                           "reduces over; use another label");
    }
    // The producer's value may read Funcs fused into this same consumer (attention reads e
    // through sm): inline those too.
    return mutate(Relabel(map).mutate(values_.at(e.tensor)));
  }

private:
  const ir::Program& prog_;
  const std::set<const ir::Symbol*>& fused_;
  const std::map<const ir::Symbol*, ir::ExprPtr>& values_;
  DiagnosticEngine& diags_;
};

/// The reads of `f` in `value`, each with the RVars of the reductions around it.
std::vector<std::pair<const ir::Access*, ir::Labels>> reads_of(const ir::Symbol* f,
                                                               const ir::ExprPtr& value) {
  std::vector<std::pair<const ir::Access*, ir::Labels>> out;
  ir::for_each_access(*value, [&](const ir::Access& a, const ir::Labels& bound) {
    if (a.tensor == f) out.push_back({&a, bound});
  });
  return out;
}

size_t position(const ir::Labels& dims, ir::Label l) {
  return std::find(dims.begin(), dims.end(), l) - dims.begin();
}

/// Producers computed into temporaries in `g`'s kernel, checked and put in an order where each
/// is computed before the ones that read it. A temporary filled at level `at` holds, for one
/// iteration of `at`, only the entries at the consumer's current outer coordinates: every read
/// of it (by `g` or by another producer computed in `g`'s kernel) must index its dimensions up
/// to `at` with the consumer's own labels for them (`o[x, y] = t[y, x]` fused at x would read
/// rows of `t` that this iteration never computed), and a producer that reads it must be
/// computed at `at` or inside it.
void settle_materialized(const ir::Program& program, const ir::Symbol* g, Materialized& list,
                         const Schedule& schedule, DiagnosticEngine& diags) {
  if (list.empty()) return;
  const ir::Labels& gdims = program.def(g).dims;
  std::vector<std::pair<const ir::Symbol*, ir::Label>> readers{{g, nullptr}};
  readers.insert(readers.end(), list.begin(), list.end());
  for (const auto& [f, at] : list) {
    const ir::Labels& fdims = program.def(f).dims;
    size_t pos = position(fdims, at);
    const Loc& loc = schedule.of(f).fuse_at->loc;
    for (const auto& [reader, reader_at] : readers) {
      if (reader == f) continue;
      for (const auto& [a, bound] : reads_of(f, program.def(reader).value)) {
        for (size_t i = 0; i <= pos && i < a->index.size(); ++i) {
          // The same label, unless a reduction around the read rebinds it: inside
          // `rdot(.., f[r, z], r)` the r of the read runs over every r.
          if (a->index[i] == fdims[i] && !ir::contains(bound, a->index[i])) continue;
          std::string outer;
          for (size_t j = 0; j <= pos; ++j)
            outer += (j ? ", " : "") + fdims[j]->name;
          diags.error("fuse-temporary-read", loc,
                      "`" + f->name + "` is fused into `" + g->name + "` at `" + at->name +
                          "` and computed into a temporary one `" + at->name +
                          "` at a time, but `" + reader->name + "` reads `" + ir::to_dt(*a) +
                          "`, which needs `" + f->name + "` at other values of `" + fdims[i]->name +
                          "`; fuse only where the consumer reads the producer with the same "
                          "outer labels (" +
                          outer + "), fully tensorize the dimensions inside `" + at->name +
                          "` so that `" + f->name + "` is computed inline, or drop the fuse_at");
          return;
        }
        if (reader_at && position(gdims, reader_at) < position(gdims, at)) {
          diags.error("fuse-temporary-order", loc,
                      "`" + reader->name + "` is computed into a temporary at `" + reader_at->name +
                          "`, outside `" + at->name + "` where `" + f->name +
                          "`, which it reads, is computed; fuse `" + f->name + "` at `" +
                          reader_at->name + "` or further out");
          return;
        }
      }
    }
  }
  // Producers first: a producer computed in the kernel may read another one.
  std::vector<std::pair<const ir::Symbol*, ir::Label>> ordered;
  std::set<const ir::Symbol*> placed;
  while (ordered.size() < list.size()) {
    size_t before = ordered.size();
    for (const auto& [f, at] : list) {
      if (placed.count(f)) continue;
      bool ready = true;
      for (const auto& [m, m_at] : list)
        if (m != f && !placed.count(m) && !reads_of(m, program.def(f).value).empty()) ready = false;
      if (ready) {
        ordered.push_back({f, at});
        placed.insert(f);
      }
    }
    DTC_ASSERT(ordered.size() > before, "fused producers read each other in a cycle");
  }
  list = ordered;
}

} // namespace

void inline_fused_funcs(ir::Program& program, KernelPlan& plan, DiagnosticEngine& diags) {
  Schedule& schedule = plan.schedule;
  // Which producers each consumer computes inline, and which into a global temporary: a
  // producer fused at a level whose inner dimensions are all fully tensorized in the consumer
  // (or that is fused innermost, or varies inside it only along the label of the consumer's
  // online loop) is computed where each value is used; otherwise it is
  // computed once per iteration of the fuse level into a temporary (thesis listing 3.14).
  std::map<const ir::Symbol*, std::set<const ir::Symbol*>> inline_into;
  bool any = false;
  for (auto& [f, fs] : schedule.funcs) {
    any |= !fs.stored.empty();
    if (!fs.fuse_at || !program.funcs.count(f)) continue;
    any = true;
    const ir::Symbol* g = fs.fuse_at->into;
    const ir::FuncDef& fdef = program.def(f);
    FuncSchedule& gs = schedule.of(g);
    size_t pos = std::find(fdef.dims.begin(), fdef.dims.end(), fs.fuse_at->at) - fdef.dims.begin();
    // Under online(l) the consumer's loop over l computes each step's values where it uses
    // them: a producer varying along l is computed inline, one tile of l at a time.
    bool all_full = true;
    for (size_t i = pos + 1; i < fdef.dims.size(); ++i)
      all_full &= gs.fully_tensorized(fdef.dims[i]) || gs.online == fdef.dims[i];
    bool consumer_fused = gs.fuse_at.has_value();
    if (!all_full && !consumer_fused) plan.materialized[g].push_back({f, fs.fuse_at->at});
  }
  if (!any) return;
  // Every other Func computed in g's kernel (fused into g directly or through a chain) is
  // inlined wherever g's kernel reads it, including g's own direct reads of it.
  for (const auto& [g, def] : program.funcs) {
    const FuncSchedule& gs = schedule.of(g);
    for (const ir::Symbol* f : gs.fused) {
      bool materialized = false;
      for (const auto& [m, at] : plan.materialized_of(g))
        materialized |= m == f;
      if (!materialized) inline_into[g].insert(f);
    }
  }
  // Inline producers before their consumers: a fused producer may itself have producers fused
  // into it (chains of fusions, thesis listing 4.4).
  std::map<const ir::Symbol*, const ir::Symbol*> owner; // materialized producer -> its kernel
  for (const auto& [g, list] : plan.materialized)
    for (const auto& [m, at] : list)
      owner[m] = g;
  // A Func another's kernel stores (store_in) reads, inline, what that kernel computes inline.
  for (const auto& [f, fs] : schedule.funcs)
    for (const ir::Symbol* g : fs.stored)
      owner.emplace(g, f);
  std::map<const ir::Symbol*, ir::ExprPtr> values;
  bool too_deep = false;
  std::function<void(const ir::Symbol*)> resolve = [&](const ir::Symbol* f) {
    if (values.count(f) || too_deep) return;
    for (const ir::Symbol* d : program.def(f).deps)
      if (program.funcs.count(d)) resolve(d);
    if (too_deep) return;
    // A producer computed into a temporary in g's kernel reads, inline, what g's kernel
    // computes inline (a Func fused into g that it reads has no kernel of its own).
    std::set<const ir::Symbol*> inlined = inline_into[f];
    if (auto it = owner.find(f); it != owner.end())
      inlined.insert(inline_into[it->second].begin(), inline_into[it->second].end());
    Inliner inliner(program, inlined, values, diags);
    values[f] = inliner.mutate(program.def(f).value);
    if (int h = ir::height(*values[f]); h > ir::kMaxExprHeight && !inline_into[f].empty()) {
      // Stop before chains of fusions grow further (each inlining copies the producer).
      const ir::Symbol* first = *inline_into[f].begin();
      diags.error("expression-too-deep", schedule.of(first).fuse_at->loc,
                  "fusing " + std::to_string(inline_into[f].size()) + " Funcs into `" + f->name +
                      "` makes its expression " + std::to_string(h) +
                      " operations deep, more than the " + std::to_string(ir::kMaxExprHeight) +
                      " the compiler accepts; fuse fewer of them (a chain of fusions can be "
                      "broken into several kernels)");
      too_deep = true;
    }
  };
  for (auto& [f, def] : program.funcs)
    resolve(f);
  if (too_deep) return;
  for (auto& [f, def] : program.funcs) {
    def.value = values[f];
    def.deps = schedule.deps_of(program, f);
  }
  for (auto& [g, list] : plan.materialized)
    settle_materialized(program, g, list, schedule, diags);
  // A stored Func is computed where the storing kernel's loops bind its dimensions; a Func that
  // kernel computes into a temporary (at a level of its own) is not there to read.
  for (const auto& [f, fs] : schedule.funcs)
    for (const ir::Symbol* g : fs.stored)
      for (const auto& [m, at] : plan.materialized_of(f))
        if (m != g && !reads_of(m, program.def(g).value).empty())
          diags.error("store-reads-temporary",
                      fs.stored.empty() ? Loc{} : schedule.of(g).store_in->loc,
                      "`" + g->name + "` reads `" + m->name + "`, which `" + f->name +
                          "`'s kernel computes into a temporary one `" + at->name +
                          "` at a time; fully tensorize the dimensions of `" + m->name +
                          "` inside `" + at->name + "` in `" + f->name +
                          "` so that it is computed inline, or do not store `" + g->name +
                          "` in `" + f->name + "`");
}

} // namespace dtc
