// Size inference for a wrapper (WrapperSignature.h).
#include "codegen/WrapperSignature.h"

#include "codegen/PythonText.h"
#include "ir/IRVisitor.h"

#include <algorithm>
#include <functional>
#include <set>

namespace dtc {

std::vector<const ir::Symbol*> reference_order(const ModuleInput& module, const ir::Symbol* f) {
  std::vector<const ir::Symbol*> order;
  std::set<const ir::Symbol*> seen;
  std::function<void(const ir::Symbol*)> visit = [&](const ir::Symbol* g) {
    if (!seen.insert(g).second) return;
    for (const ir::Symbol* d : module.reference_defs.at(g).deps)
      visit(d);
    order.push_back(g);
  };
  visit(f);
  for (const ir::Symbol* g : module.plan->of(f).stored) // outputs f's wrapper returns too
    visit(g);
  return order;
}

ir::Labels reduction_labels(const ir::FuncDef& def) {
  struct Collect : ir::IRVisitor {
    ir::Labels out;
    void visit(const ir::Reduce& e) override {
      out = ir::union_labels(out, {e.rvar});
      ir::IRVisitor::visit(e);
    }
    void visit(const ir::Dot& e) override {
      out = ir::union_labels(out, {e.rvar});
      ir::IRVisitor::visit(e);
    }
  } c;
  def.value->accept(c);
  return c.out;
}

namespace {

// Groups the labels whose sizes must agree. Reading `t[k, x]` for `t[x, y]` ties k to x and x
// to y; two labels indexing one input dimension are tied too. The written algorithm (what the
// reference evaluates) and the kernels' (what the wrapper launches) both contribute uses.
void tie_labels(const ModuleInput& module, const CompiledFunc& c, WrapperSignature& sig) {
  const ir::Program& prog = *module.program;
  std::map<ir::Label, ir::Label> parent;
  std::function<ir::Label(ir::Label)> root = [&](ir::Label l) {
    auto it = parent.find(l);
    return it == parent.end() ? l : (it->second = root(it->second));
  };
  auto join = [&](ir::Label a, ir::Label b) {
    a = root(a), b = root(b);
    if (a == b) return;
    if (a->order > b->order) std::swap(a, b);
    parent[b] = a;
  };
  struct Reads : ir::IRVisitor {
    std::vector<const ir::Access*> funcs, inputs;
    void visit(const ir::Access& e) override {
      (e.tensor->kind == ir::SymbolKind::Func ? funcs : inputs).push_back(&e);
      ir::IRVisitor::visit(e);
    }
  } reads;
  for (const ir::Symbol* g : reference_order(module, c.func))
    module.reference_defs.at(g).value->accept(reads);
  for (const ir::Symbol* k : c.kernel_funcs) {
    prog.def(k).value->accept(reads);
    for (const auto& [m, at] : module.plan->materialized_of(k))
      prog.def(m).value->accept(reads);
  }
  std::vector<std::pair<const ir::Access*, size_t>> ties;
  for (const ir::Access* a : reads.funcs) {
    const ir::Labels& dims = module.reference_defs.count(a->tensor)
                                 ? module.reference_defs.at(a->tensor).dims
                                 : prog.def(a->tensor).dims;
    for (size_t i = 0; i < a->index.size() && i < dims.size(); ++i)
      if (a->index[i] != dims[i]) {
        join(a->index[i], dims[i]);
        ties.push_back({a, i});
      }
  }
  std::map<std::pair<const ir::Symbol*, size_t>, ir::Label> first_user;
  std::map<ir::Label, std::vector<std::pair<ir::Label, std::pair<const ir::Symbol*, size_t>>>>
      uses_of_class;
  for (const ir::Access* a : reads.inputs)
    for (size_t i = 0; i < a->index.size(); ++i) {
      std::pair<const ir::Symbol*, size_t> use{a->tensor, i};
      auto [it, fresh] = first_user.emplace(use, a->index[i]);
      if (!fresh) join(it->second, a->index[i]);
    }
  // Each class is named by its first label in the signature; its uses cover all its labels.
  std::map<ir::Label, ir::Label> class_root; // UF root -> signature root
  for (ir::Label l : sig.labels) {
    auto [it, fresh] = class_root.emplace(root(l), l);
    if (!fresh) sig.tied[l] = it->second;
    sig.group_labels[it->second].push_back(l);
  }
  std::set<std::pair<const ir::Symbol*, size_t>> seen;
  for (const ir::Access* a : reads.inputs)
    for (size_t i = 0; i < a->index.size(); ++i) {
      auto it = class_root.find(root(a->index[i]));
      if (it == class_root.end() || !seen.insert({a->tensor, i}).second) continue;
      sig.group_uses[it->second].push_back({a->tensor, i});
      ir::Label named = ir::contains(sig.labels, a->index[i]) ? a->index[i] : it->second;
      sig.use_labels[it->second].push_back(named);
    }
  for (const auto& [a, i] : ties) {
    auto it = class_root.find(root(a->index[i]));
    if (it == class_root.end()) continue;
    std::string& why = sig.why[it->second];
    const ir::Labels& dims = module.reference_defs.count(a->tensor)
                                 ? module.reference_defs.at(a->tensor).dims
                                 : prog.def(a->tensor).dims;
    std::string reason = ir::to_dt(*a) + " reading " + a->tensor->name + shape_text(dims);
    if (why.find(reason) == std::string::npos) why += (why.empty() ? "tied by " : ", ") + reason;
  }
}

} // namespace

WrapperSignature wrapper_signature(const ModuleInput& module, const CompiledFunc& c) {
  const ir::Program& prog = *module.program;
  WrapperSignature sig;
  struct Collect : ir::IRVisitor {
    WrapperSignature* sig;
    std::set<const ir::Symbol*> used;
    void visit(const ir::Access& e) override {
      if (e.tensor->kind != ir::SymbolKind::In) return;
      ir::IRVisitor::visit(e);
      used.insert(e.tensor);
      if (!sig->first_shape.count(e.tensor)) sig->first_shape[e.tensor] = e.index;
      for (size_t i = 0; i < e.index.size(); ++i) {
        auto& u = sig->uses[e.index[i]];
        std::pair<const ir::Symbol*, size_t> use{e.tensor, i};
        if (std::find(u.begin(), u.end(), use) == u.end()) u.push_back(use);
      }
    }
    void visit(const ir::ScalarIn& e) override { used.insert(e.symbol); }
  } collect;
  collect.sig = &sig;
  for (const ir::Symbol* f : c.kernel_funcs) {
    prog.def(f).value->accept(collect);
    for (const auto& [m, at] : module.plan->materialized_of(f))
      prog.def(m).value->accept(collect);
    for (const ir::Symbol* g : module.plan->of(f).stored)
      prog.def(g).value->accept(collect);
    sig.labels = ir::union_labels(sig.labels, prog.def(f).dims);
    sig.labels = ir::union_labels(sig.labels, definition_labels(prog, f));
  }
  for (const auto& [l, u] : sig.uses)
    sig.labels = ir::union_labels(sig.labels, {l});
  // The reference evaluates the algorithm as written, and a kernel may loop over the labels
  // of Funcs inlined into it (`t[x, y]` read as `t[k, x]`): their sizes are needed too.
  // `len(y)` needs y's size even when nothing else uses y.
  struct Lens : ir::IRVisitor {
    ir::Labels out;
    void visit(const ir::Len& e) override { out = ir::union_labels(out, {e.label}); }
  } lens;
  for (const ir::Symbol* g : reference_order(module, c.func)) {
    const ir::FuncDef& written = module.reference_defs.at(g);
    sig.labels = ir::union_labels(sig.labels, written.dims);
    sig.labels = ir::union_labels(sig.labels, reduction_labels(written));
    written.value->accept(lens);
  }
  for (const ir::Symbol* k : c.kernel_funcs) {
    prog.def(k).value->accept(lens);
    for (const auto& [m, at] : module.plan->materialized_of(k))
      prog.def(m).value->accept(lens);
    for (const ir::Symbol* g : module.plan->of(k).stored)
      prog.def(g).value->accept(lens);
  }
  sig.labels = ir::union_labels(sig.labels, lens.out);
  for (const ir::Symbol* k : c.kernel_funcs)
    sig.labels =
        ir::union_labels(sig.labels, schedulable_labels(prog, module.plan->schedule.of(k)));
  // Sizes the compiler derives (split reductions) are computed, not passed.
  ir::Labels given;
  for (ir::Label l : sig.labels) {
    if (prog.derived_sizes.count(l))
      sig.derived.push_back(l);
    else
      given.push_back(l);
  }
  sig.labels = given;
  // Order labels by declaration for a stable keyword list.
  std::sort(sig.labels.begin(), sig.labels.end(),
            [](ir::Label a, ir::Label b) { return a->order < b->order; });
  for (const ir::Symbol* in : prog.inputs)
    if (collect.used.count(in)) sig.inputs.push_back(in);
  tie_labels(module, c, sig);
  return sig;
}

} // namespace dtc
