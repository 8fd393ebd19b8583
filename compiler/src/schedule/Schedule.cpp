#include "schedule/Schedule.h"

#include "ir/Builtins.h"
#include "ir/IRVisitor.h"
#include "schedule/Primitive.h"

#include "dtx/Text.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>

namespace dtc {

const FuncSchedule& Schedule::of(const ir::Symbol* f) const {
  static const FuncSchedule empty;
  auto it = funcs.find(f);
  return it == funcs.end() ? empty : it->second;
}

FuncSchedule& Schedule::of(const ir::Symbol* f) {
  FuncSchedule& s = funcs[f];
  s.func = f;
  return s;
}

const std::vector<Primitive>& primitive_table() {
  static const std::vector<Primitive> table = {
      block_primitive(),      tensorize_primitive(),       map_primitive(),
      fuse_at_primitive(),    store_in_primitive(),        online_primitive(),
      atomic_primitive(),     precision_primitive(),       relayout_primitive(),
      tma_primitive(),        subtile_primitive(),         index_primitive(),
      persistent_primitive(), warp_specialize_primitive(), num_warps_primitive(),
      num_stages_primitive(), compile_primitive()};
  return table;
}

std::string primitive_names() {
  const std::vector<Primitive>& table = primitive_table();
  std::vector<std::string> names;
  for (const Primitive& p : table)
    names.emplace_back(p.name);
  return dtx::listed(names, "and");
}

Primitive word_primitive(const char* name, std::vector<std::string> words, const char* code,
                         const char* example, std::optional<std::string> FuncSchedule::*field) {
  const std::string choices = dtx::listed(words, "or");
  Primitive p;
  p.name = name;
  p.apply = [=](PrimitiveContext& ctx) {
    const auto& args = ctx.stmt.args;
    if (args.size() != 1 || args[0].name.empty() || args[0].has_value ||
        std::find(words.begin(), words.end(), args[0].name) == words.end()) {
      ctx.diags.error(code, args.empty() ? ctx.stmt.loc : args[0].loc,
                      "in " + stmt_text(ctx.stmt) + ": `" + name + "` takes " + choices +
                          ", as in `" + ctx.func->name + "." + name + "(" + example + ")`");
      return false;
    }
    ctx.target.*field = args[0].name;
    return true;
  };
  p.print = [=](const FuncSchedule& fs, const ir::Program&) -> std::optional<std::string> {
    const std::optional<std::string>& v = fs.*field;
    if (!v || *v == words.front()) return std::nullopt;
    return *v;
  };
  return p;
}

bool is_power_of_two(long long v) {
  return v > 0 && (v & (v - 1)) == 0;
}

bool merge_sizes(PrimitiveContext& ctx, std::map<ir::Label, long long>& sizes, const char* usage,
                 const char* what, const std::function<bool(const ast::ScheduleArg&)>& check) {
  const std::string prim = ctx.stmt.primitive.text;
  if (ctx.stmt.args.empty()) {
    ctx.diags.error("sizes-missing", ctx.stmt.loc,
                    "in " + stmt_text(ctx.stmt) + ": `" + prim +
                        "` needs at least one `VAR:SIZE` argument");
    return false;
  }
  bool ok = true;
  std::map<ir::Label, long long> merged = sizes;
  for (const ast::ScheduleArg& a : ctx.stmt.args) {
    if (a.name.empty() || !a.has_value || !a.split_name.empty()) {
      ctx.diags.error("sizes-bad-argument", a.loc,
                      "in " + stmt_text(ctx.stmt) + ": `" + prim + "` arguments are " + usage);
      ok = false;
      continue;
    }
    ir::Label l = schedule_label(ctx, a, "dimension");
    if (!l || !check(a)) {
      ok = false;
      continue;
    }
    auto it = merged.find(l);
    if (it != merged.end() && it->second != a.value) {
      ctx.diags.error("size-repeated", a.loc,
                      "in " + stmt_text(ctx.stmt) + ": `" + a.name + "` already has " + what + " " +
                          std::to_string(it->second) + "; give each dimension one " + what);
      ok = false;
      continue;
    }
    merged[l] = a.value;
  }
  if (ok) sizes = merged;
  return ok;
}

std::string stmt_text(const ast::ScheduleStmt& stmt) {
  return "`" + stmt.func.text + "." + stmt.primitive.text + "(...)`";
}

ir::Labels definition_labels(const ir::Program& program, const ir::Symbol* func) {
  auto it = program.funcs.find(func);
  if (it == program.funcs.end()) return {};
  const ir::FuncDef& def = it->second;
  // Cached per definition: the explorer asks for the same Func's labels for every schedule.
  struct Entry {
    std::weak_ptr<const ir::Expr> value;
    ir::Labels dims, labels;
  };
  thread_local std::map<const ir::Expr*, Entry> cache;
  if (def.value) {
    auto hit = cache.find(def.value.get());
    if (hit != cache.end() && hit->second.value.lock() == def.value && hit->second.dims == def.dims)
      return hit->second.labels;
  }
  ir::Labels labels = def.dims;
  struct Collect : ir::IRVisitor {
    ir::Labels* out;
    void visit(const ir::Reduce& e) override {
      if (!ir::contains(*out, e.rvar)) out->push_back(e.rvar);
      ir::IRVisitor::visit(e);
    }
    void visit(const ir::Dot& e) override {
      if (!ir::contains(*out, e.rvar)) out->push_back(e.rvar);
      ir::IRVisitor::visit(e);
    }
  } collect;
  collect.out = &labels;
  if (def.value) {
    def.value->accept(collect);
    if (cache.size() > 256) cache.clear();
    cache[def.value.get()] = Entry{def.value, def.dims, labels};
  }
  return labels;
}

ir::Labels schedulable_labels(const ir::Program& program, const FuncSchedule& fs) {
  ir::Labels labels = definition_labels(program, fs.func);
  for (const ir::Symbol* f : fs.fused)
    labels = ir::union_labels(labels, definition_labels(program, f));
  return labels;
}

ir::Label schedule_label(PrimitiveContext& ctx, const ast::ScheduleArg& arg, const char* what) {
  ir::Labels allowed = schedulable_labels(ctx.program, ctx.target);
  for (ir::Label l : allowed)
    if (l->name == arg.name) return l;
  std::string dims;
  for (ir::Label l : allowed)
    dims += (dims.empty() ? "" : ", ") + l->name;
  ctx.diags.error("unknown-label", arg.loc,
                  "in " + stmt_text(ctx.stmt) + ": `" + arg.name + "` is not a " + what + " of `" +
                      ctx.func->name + "` (it has " + dims + ")");
  return nullptr;
}

static std::string closest_primitive(const std::string& name) {
  std::string best;
  size_t best_distance = 4; // farther than this is no suggestion
  for (const Primitive& p : primitive_table()) {
    size_t d = edit_distance(name, p.name);
    if (d < best_distance) {
      best_distance = d;
      best = p.name;
    }
  }
  return best;
}

/// Once every fusion is in: which Funcs each Func computes in its own kernel (those fused into
/// it, directly or through a chain) and what it then depends on. Both follow from the set of
/// fusions alone, whatever order they were applied in.
static void settle_fusions(const ir::Program& program, Schedule& schedule) {
  // f is computed in g's kernel when g is an ancestor of f in the forest of fusions (an edge from
  // each fused Func to the Func it is fused into). Euler-tour intervals answer that in O(1), so
  // long chains of fusions stay linear.
  std::map<const ir::Symbol*, std::vector<const ir::Symbol*>> fused_into;
  for (const auto& [f, fs] : schedule.funcs)
    if (fs.fuse_at) fused_into[fs.fuse_at->into].push_back(f);
  std::map<const ir::Symbol*, std::pair<int, int>> span;
  int clock = 0;
  for (const auto& [root, fs] : schedule.funcs) {
    if (fs.fuse_at) continue;
    std::vector<std::pair<const ir::Symbol*, size_t>> stack{{root, 0}};
    span[root].first = clock++;
    while (!stack.empty()) {
      auto& [f, next] = stack.back();
      const auto& kids = fused_into[f];
      if (next < kids.size()) {
        const ir::Symbol* kid = kids[next++];
        span[kid].first = clock++;
        stack.push_back({kid, 0});
      } else {
        span[f].second = clock++;
        stack.pop_back();
      }
    }
  }
  auto computed_in = [&](const ir::Symbol* f, const ir::Symbol* g) {
    auto fi = span.find(f), gi = span.find(g);
    if (fi == span.end() || gi == span.end() || f == g) return false;
    return gi->second.first < fi->second.first && fi->second.second < gi->second.second;
  };
  for (const auto& [g, def] : program.funcs) {
    std::vector<const ir::Symbol*> fused, deps;
    std::set<const ir::Symbol*> seen;
    std::function<void(const ir::Symbol*)> walk = [&](const ir::Symbol* f) {
      for (const ir::Symbol* d : program.def(f).deps) {
        if (!seen.insert(d).second) continue;
        if (computed_in(d, g)) {
          fused.push_back(d);
          walk(d);
        } else {
          deps.push_back(d);
        }
      }
    };
    walk(g);
    if (fused.empty() && !schedule.funcs.count(g)) continue;
    schedule.of(g).fused = fused;
    schedule.deps[g] = deps;
  }
}

void apply_schedule(const std::vector<ast::ScheduleStmt>& stmts, const ir::Program& program,
                    Schedule& schedule, DiagnosticEngine& diags) {
  std::vector<const ast::ScheduleStmt*> pointers;
  pointers.reserve(stmts.size());
  for (const ast::ScheduleStmt& s : stmts)
    pointers.push_back(&s);
  apply_schedule(pointers, program, schedule, diags);
}

namespace {

std::set<const ir::Symbol*> kernel_funcs(const Schedule& schedule, const ir::Program& program);

/// A Func fused into another, with no kernel of its own, keeps only its fusion: the canonical
/// text prints nothing else of it (canonical_text), so nothing else may change the code (its
/// own block of an RVar would otherwise split a reduction that fusion inlines, adding a
/// kernel parameter nobody reads).
void keep_only_fusion(Schedule& schedule, const ir::Program& program) {
  std::set<const ir::Symbol*> with_kernel = kernel_funcs(schedule, program);
  for (auto& [f, fs] : schedule.funcs) {
    if (!fs.fuse_at || with_kernel.count(f)) continue;
    FuncSchedule kept;
    kept.func = fs.func;
    kept.fuse_at = fs.fuse_at;
    kept.fused = fs.fused;
    kept.store_in = fs.store_in;
    for (const char* p : {"fuse_at", "store_in"})
      if (auto it = fs.where.find(p); it != fs.where.end()) kept.where.insert(*it);
    fs = std::move(kept);
  }
}

} // namespace

void apply_schedule(const std::vector<const ast::ScheduleStmt*>& stmts, const ir::Program& program,
                    Schedule& schedule, DiagnosticEngine& diags) {
  // fuse_at first: fusion changes dependencies and which labels the consumer's schedule may
  // name. A fusion can depend on another (e into attention is legal once sm, which reads e,
  // is fused into attention), so fusions apply in dependency order, not statement order: the
  // canonical text sorts statements by Func name and must mean the same schedule.
  std::vector<const ast::ScheduleStmt*> ordered, pending;
  for (const ast::ScheduleStmt* stmt : stmts)
    if (stmt->primitive.text == "fuse_at") pending.push_back(stmt);
  std::map<const ir::Symbol*, std::vector<const ir::Symbol*>> deps;
  if (!pending.empty())
    for (const auto& [f, def] : program.funcs)
      deps[f] = def.deps;
  for (bool progress = true; progress && !pending.empty();) {
    progress = false;
    for (auto it = pending.begin(); it != pending.end();) {
      const ast::ScheduleStmt& st = **it;
      const ir::Symbol* f = program.find(st.func.text);
      const ir::Symbol* g = st.args.empty() ? nullptr : program.find(st.args[0].name);
      if (f && g && deps.count(g) && deps.count(f) && ir::contains(deps[g], f)) {
        std::vector<const ir::Symbol*> updated;
        for (const ir::Symbol* d : deps[g])
          if (d != f) updated.push_back(d);
        for (const ir::Symbol* d : deps[f])
          if (!ir::contains(updated, d)) updated.push_back(d);
        deps[g] = updated;
        ordered.push_back(*it);
        it = pending.erase(it);
        progress = true;
      } else {
        ++it;
      }
    }
  }
  ordered.insert(ordered.end(), pending.begin(), pending.end()); // these report their errors
  size_t fusions = ordered.size();
  for (const ast::ScheduleStmt* stmt : stmts)
    if (stmt->primitive.text != "fuse_at") ordered.push_back(stmt);
  for (size_t n = 0; n < ordered.size(); ++n) {
    if (n == fusions) settle_fusions(program, schedule);
    const ast::ScheduleStmt* stmt_ptr = ordered[n];
    const ast::ScheduleStmt& stmt = *stmt_ptr;
    const ir::Symbol* f = program.find(stmt.func.text);
    if (!f || f->kind != ir::SymbolKind::Func) {
      diags.error("unknown-func", stmt.func.loc,
                  "in " + stmt_text(stmt) + ": `" + stmt.func.text + "` is " +
                      (f ? std::string("not a Func") : "not declared") +
                      "; scheduling primitives apply to Funcs");
      continue;
    }
    if (!program.funcs.count(f)) continue; // its definition has errors, already reported
    std::string prim = stmt.primitive.text == "compile_to_kernel" ? "compile" : stmt.primitive.text;
    const Primitive* p = nullptr;
    for (const Primitive& cand : primitive_table())
      if (prim == cand.name) p = &cand;
    if (!p) {
      std::string hint = closest_primitive(prim);
      diags.error("unknown-primitive", stmt.primitive.loc,
                  "unknown scheduling primitive `" + stmt.primitive.text + "`" +
                      (hint.empty() ? "; the primitives are " + primitive_names()
                                    : "; did you mean `" + hint + "`?"));
      continue;
    }
    PrimitiveContext ctx{program, schedule, diags, stmt, f, schedule.of(f)};
    if (p->apply(ctx)) ctx.target.where[p->name] = stmt.loc;
  }
  if (fusions == ordered.size()) settle_fusions(program, schedule);
  for (auto& [f, fs] : schedule.funcs)
    for (const Primitive& p : primitive_table())
      if (p.validate && fs.where.count(p.name)) p.validate(fs, program, diags);
  settle_stores(program, schedule, diags);
  keep_only_fusion(schedule, program);
}

namespace {

/// Funcs that get a kernel of their own: the compiled ones and, transitively, the Funcs they
/// read after fusion. With no compile statement every Func counts.
std::set<const ir::Symbol*> kernel_funcs(const Schedule& schedule, const ir::Program& program) {
  std::set<const ir::Symbol*> out;
  if (schedule.compiled.empty()) {
    for (const auto& [f, def] : program.funcs)
      out.insert(f);
    return out;
  }
  std::vector<const ir::Symbol*> work = schedule.compiled;
  while (!work.empty()) {
    const ir::Symbol* f = work.back();
    work.pop_back();
    if (!out.insert(f).second || !program.funcs.count(f)) continue;
    for (const ir::Symbol* d : schedule.deps_of(program, f))
      work.push_back(d);
  }
  return out;
}

/// fuse_at in canonical form. Where the producer is computed inline (every dimension inside
/// the fuse level fully tensorized in the consumer, or the consumer itself fused), the level
/// does not change the kernel: print the innermost legal one.
std::string fuse_at_text(const FuncSchedule& fs, const Schedule& schedule,
                         const ir::Program& program) {
  const ir::Symbol* g = fs.fuse_at->into;
  const ir::Labels& fdims = program.def(fs.func).dims;
  const ir::Labels& gdims = program.def(g).dims;
  const FuncSchedule& gs = schedule.of(g);
  size_t pos = std::find(fdims.begin(), fdims.end(), fs.fuse_at->at) - fdims.begin();
  bool inline_fusion = gs.fuse_at.has_value();
  if (!inline_fusion) {
    inline_fusion = true;
    for (size_t i = pos + 1; i < fdims.size(); ++i)
      inline_fusion &= gs.fully_tensorized(fdims[i]);
  }
  size_t level = pos;
  if (inline_fusion)
    for (size_t i = pos + 1; i < fdims.size() && i < gdims.size() && fdims[i] == gdims[i]; ++i)
      level = i;
  return g->name + "," + fdims[level]->name;
}

} // namespace

std::string canonical_text(const Schedule& schedule, const ir::Program& program) {
  std::vector<const ir::Symbol*> funcs;
  for (const auto& [f, fs] : schedule.funcs)
    funcs.push_back(f);
  std::sort(funcs.begin(), funcs.end(),
            [](const ir::Symbol* a, const ir::Symbol* b) { return a->name < b->name; });
  std::set<const ir::Symbol*> with_kernel = kernel_funcs(schedule, program);
  std::string out;
  for (const ir::Symbol* f : funcs) {
    const FuncSchedule& fs = schedule.of(f);
    // A Func fused into another with no kernel of its own: only its fuse_at matters.
    bool only_fusion = fs.fuse_at && !with_kernel.count(f);
    for (const Primitive& p : primitive_table()) {
      std::string name = p.name;
      if (name == "compile" || (only_fusion && name != "fuse_at" && name != "store_in")) continue;
      std::optional<std::string> args = name == "fuse_at" && fs.fuse_at
                                            ? fuse_at_text(fs, schedule, program)
                                            : p.print(fs, program);
      if (!args) continue;
      if (!out.empty()) out += ";";
      out += f->name + "." + p.name + "(" + *args + ")";
    }
  }
  return out;
}

} // namespace dtc
