// Stage 5 of lowering a Func: fused producers computed into temporaries. A Func fused at a loop
// level of its consumer whose inner dimensions are not all one tile (KernelPlan::materialized)
// is computed, for the current iteration of that level, into a global temporary `<f>_fuse`,
// then read back by the consumer after a barrier.
#include "lower/LowerState.h"

#include "lower/Names.h"
#include <functional>

#include <algorithm>

namespace dtc::lowering {
namespace {

// Dimensions of a materialized Func that this kernel reads beyond its own block: those indexed
// by a label that an enclosing reduction binds, or by a label other than the dimension's own
// (`t[x, z]` for t[x, y]). The temporary must hold them whole.
std::set<Label> read_across(const LowerState& s, const ir::Symbol* f) {
  std::set<Label> out;
  const ir::Labels& fdims = s.prog.def(f).dims;
  ir::for_each_access(*s.def.value, [&](const ir::Access& a, const ir::Labels& bound) {
    if (a.tensor != f) return;
    for (size_t i = 0; i < a.index.size(); ++i)
      if (ir::contains(bound, a.index[i]) || a.index[i] != fdims[i]) out.insert(fdims[i]);
  });
  return out;
}

// Computes a Func fused at level `at` into its temporary, for the current iteration of `at`.
void materialize(LowerState& s, const ir::Symbol* f, Label at, Body& body) {
  const ir::FuncDef& fd = s.prog.def(f);
  body.push_back(kir::Stmt::comment(f->name + " fused at " + at->name + ": computed into " +
                                    s.tensor_base(f) + " for this " + at->name +
                                    ", read back below"));
  size_t pos = std::find(fd.dims.begin(), fd.dims.end(), at) - fd.dims.begin();
  Body* cur = &body;
  std::vector<Label> pushed;
  s.cache.emplace_back();
  std::set<Label> whole = read_across(s, f);
  // Its reductions run once per iteration of the outermost level binding their labels, as the
  // kernel's own do: softmax's row max in `e = exp(A - rmax(A))` once per row, not per tile.
  ir::Labels bound(fd.dims.begin(), fd.dims.begin() + static_cast<std::ptrdiff_t>(pos) + 1);
  hoist(s, bound, *cur, *fd.value);
  for (size_t i = pos + 1; i < fd.dims.size(); ++i) {
    Label l = fd.dims[i];
    cur = emit_dim(s, l, *cur, "", !ir::contains(s.def.dims, l) || whole.count(l));
    pushed.push_back(l);
    bound.push_back(l);
    hoist(s, bound, *cur, *fd.value);
  }
  Value v = number(s, *fd.value, *cur);
  bool scalar = true;
  for (Label l : fd.dims)
    scalar &= !s.bind[l].back().mask;
  Value value =
      scalar && !s.layout.axes.empty() && !is_scalar_value(*fd.value) ? kir::reshape(v, {}) : v;
  if (!scalar) value = broadcast(s, value, *fd.value, fd.dims);
  // Its own name, reserved: reading the temporary back names a tile of another shape.
  Value stored = s.let(*cur, s.fresh(s.py(f)), value);
  cur->push_back(kir::Stmt::store(kir::add(s.ptr_var(f), s.offset_expr(f, fd.dims)), stored,
                                  s.mask_of(fd.dims)));
  if (std::find(s.stored.begin(), s.stored.end(), f) != s.stored.end()) {
    store_output(s, f, stored, *cur); // the same values, to the wrapper's output too
    s.stores_done.insert(f);
  }
  s.cache.pop_back();
  for (Label l : pushed)
    s.bind[l].pop_back();
  // The values are read back by other threads of this program instance.
  body.push_back(kir::Stmt::barrier());
}

} // namespace

void materialize_at(LowerState& s, Label at, Body& body) {
  for (const auto& [f, level] : s.materialized)
    if (level == at) materialize(s, f, at, body);
}

void store_output(LowerState& s, const ir::Symbol* g, Value value, Body& body) {
  const ir::Labels& dims = s.prog.def(g).dims;
  Value offset;
  for (size_t i = 0; i < dims.size(); ++i) {
    Value term = kir::mul(s.bind[dims[i]].back().idx, s.ref(s.py.stride(g, i)));
    offset = offset ? kir::add(offset, term) : term;
  }
  body.push_back(kir::Stmt::store(kir::add(s.ref(s.py.ptr(g)), offset), value, s.mask_of(dims)));
}

void store_outputs(LowerState& s, const ir::Labels& bound, Body& body) {
  for (const ir::Symbol* g : s.stored) {
    const ir::FuncDef& gd = s.prog.def(g);
    if (s.stores_done.count(g) || s.materialized_here(g)) continue;
    bool ready = true;
    for (Label l : gd.dims)
      ready &= ir::contains(bound, l);
    hoist(s, bound, body, *gd.value);
    // A value read from the online loop waits for it: the loop runs where all its labels are.
    if (s.online && !s.online_done && !online_ready(s)) {
      std::function<bool(const ir::Expr&)> reads = [&](const ir::Expr& x) {
        if (in_online_loop(s, x)) return true;
        for (const ir::Expr* c : ir::children(x))
          if (reads(*c)) return true;
        return false;
      };
      ready &= !reads(*gd.value);
    }
    if (!ready) continue;
    s.stores_done.insert(g);
    Value v = number(s, *gd.value, body);
    bool scalar = true;
    for (Label l : gd.dims)
      scalar &= !s.tensorized(l);
    Value value =
        scalar && !s.layout.axes.empty() && !is_scalar_value(*gd.value) ? kir::reshape(v, {}) : v;
    if (!scalar) value = broadcast(s, value, *gd.value, gd.dims);
    store_output(s, g, s.let(body, s.fresh(s.py(g)), value), body);
  }
}

} // namespace dtc::lowering
