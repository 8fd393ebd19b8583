// Stage 4 of lowering a Func: the loop nest. Each dimension is a loop over its block (or its
// whole extent, for a reduction) stepping by its tensor width, or one whole tile with no loop;
// emitting it binds the label to its index and mask (LowerState::bind). At each level of the
// output loops, the fused producers of that level (LowerProducers.cpp) and every reduction
// whose labels are bound there are computed, once per iteration of that level.
#include "lower/LowerState.h"
#include "lower/Names.h"

#include <algorithm>
#include <functional>

namespace dtc::lowering {
namespace {

Value start_of(const LowerState& s, Label l) {
  return s.fs.block_of(l) ? s.ref(s.py(l) + "_start") : kir::int_imm(0);
}
Value end_of(const LowerState& s, Label l) {
  return s.fs.block_of(l) ? s.ref(s.py(l) + "_end") : s.ref(s.py.size(l));
}

/// The output blocks of `l` that the program instances take together: instances past the last
/// block (a `map` split's) compute nothing, so every instance has a full block only when the
/// size is a multiple of the block times the split factors.
long long blocks_per_turn(const LowerState& s, Label l) {
  long long f = 1;
  for (const MapLevel& lv : map_levels(s.fs, s.prog))
    if (lv.dim == l && lv.factor) f *= lv.factor;
  return f;
}

/// Which sizes of `l` make every tile of this walk full (LowerState::even_mask's modulus), or
/// -1 when none does (a block that is not a whole number of tiles). `width` is the tile's.
long long full_tiles_modulus(const LowerState& s, Label l, bool no_loop, bool blocked,
                             const kir::Extent& width) {
  auto b = s.fs.block_of(l);
  if (no_loop && !blocked) return 0; // one tile of the tile parameter's width
  if (!width.param.empty()) return -1;
  if (no_loop) return width.n == *b ? *b * blocks_per_turn(s, l) : -1;
  if (blocked && *b % width.n != 0) return -1;
  return width.n;
}

} // namespace

// Emits the loop (or whole-tile index) of one dimension; returns the body to continue in.
// `whole` walks the entire dimension (a reduction), ignoring the dimension's block.
Body* emit_dim(LowerState& s, Label l, Body& body, const std::string& prefix, bool whole,
               Value stop, Value from) {
  std::string base = prefix + s.py(l);
  Binding b;
  if (s.is_part(l)) {
    // One partial result per block of the split reduction label.
    // A map split can run past the last block; those instances must not write.
    std::string k = s.py(s.split->rvar);
    b.idx = s.ref(k + "_block");
    b.mask = kir::lt(b.idx, s.ref(k + "_blocks"));
    s.bind[l].push_back(b);
    return &body;
  }
  Body* inner = &body;
  bool blocked = s.fs.block_of(l).has_value() && !whole;
  Value start = from ? from : whole ? kir::int_imm(0) : start_of(s, l);
  Value end = whole ? s.ref(s.py.size(l)) : end_of(s, l);
  bool no_loop = s.fs.fully_tensorized(l) && (blocked || !s.fs.block_of(l));
  // A loop tile (KernelLayout::loop_tiles) has only its 1-D index vector, bound below.
  const bool loop_only = s.layout.loop_only(l);
  Value iter;
  if (no_loop) {
    if (!loop_only) {
      Value arange = s.ref(s.py(l) + "_arange");
      b.idx = blocked ? s.let(body, base + "_idx", kir::add(start, arange)) : arange;
    }
  } else {
    // A whole-dimension walk of a blocked, fully tensorized label steps by its tile width.
    Value step = s.fs.fully_tensorized(l) ? s.extent_value(s.layout.width_of_axis(l))
                                          : kir::int_imm(s.fs.tensor_of(l));
    // An earlier loop of this name (a reduction computed before this dimension's loop) may
    // have stepped through another integer type; Triton would take the name, bound before
    // this loop and again by it, for a loop-carried value of one type.
    Value last = stop ? stop : end;
    kir::Type type = kir::loop_var_type(*start, *last, *step);
    std::string var = base + "_iter";
    if (auto it = s.types.find(var); it != s.types.end() && !(it->second == type))
      var = s.fresh(var);
    kir::StmtPtr loop = kir::Stmt::loop(var, start, last, step);
    s.used.insert(var);
    s.types[var] = type;
    iter = s.ref(var);
    inner = &loop->body;
    body.push_back(std::move(loop));
    if (loop_only)
      ; // its vector, below
    else if (s.tensorized(l))
      b.idx = s.let(*inner, base + "_idx", kir::add(iter, s.ref(s.py(l) + "_arange")));
    else if (blocked)
      b.idx = iter; // int64 already: it starts at the int64 block start
    else
      b.idx = s.let(*inner, base + "_idx", s.index(iter));
  }
  if (s.tensorized(l)) {
    long long modulus = full_tiles_modulus(s, l, no_loop, blocked, s.layout.width_of_axis(l));
    // A whole tile's mask is bound once where it is first needed: a reduction over the label
    // and the output's own dimension share it (FoldTiedReductions.h), and a name bound once
    // can be hoisted out of the loops around it.
    if (!loop_only) { // a loop tile's mask is its vector's, below
      std::string key = "mask:" + base + "," + kir::print(*b.idx) + "<" + kir::print(*end);
      std::optional<Value> hit;
      if (no_loop && !blocked) hit = s.cached(key);
      if (hit) {
        b.mask = *hit;
      } else {
        Value in_range = kir::lt(b.idx, end);
        if (modulus >= 0) in_range = s.even_mask(l, in_range, modulus);
        b.mask = s.let(*inner, base + "_mask", in_range);
        if (no_loop && !blocked) s.cache.back()[key] = b.mask;
      }
    }
    Value origin = no_loop ? (blocked ? start : nullptr) : iter;
    b.origin = origin;
    if (loop_only || (s.layout.axes.size() > 1 && s.layout.dot_labels.count(l))) {
      // 1-D twins for tl.dot operand tiles (dead-code elimination drops them if unused).
      // A whole tile's vector is the range itself: loads of the same tile at two places (the
      // two loops of a causal online kernel) are then one expression, which CSE merges.
      Value range = s.ref(s.py(l) + "_range");
      b.vec = origin ? s.let(*inner, base + "_vec", kir::add(origin, range)) : range;
      Value in_range = kir::lt(b.vec, end);
      if (modulus >= 0) in_range = s.even_mask(l, in_range, modulus);
      b.vec_mask = s.let(*inner, base + "_vec_mask", in_range);
      if (loop_only) {
        b.idx = b.vec;
        b.mask = b.vec_mask;
      }
    } else if (s.layout.axes.size() == 1) {
      b.vec = b.idx;
      b.vec_mask = b.mask;
    }
  }
  s.bind[l].push_back(b);
  return inner;
}

Body* emit_output_loops(LowerState& s, Body& body) {
  // One value-cache scope per loop level: what is computed at a level is reused inside it.
  Body* cur = &body;
  ir::Labels bound;
  s.cache.emplace_back();
  hoist(s, bound, *cur, *s.def.value);
  for (Label l : s.def.dims) {
    cur = emit_dim(s, l, *cur, "", false);
    bound.push_back(l);
    s.cache.emplace_back();
    materialize_at(s, l, *cur);
    hoist(s, bound, *cur, *s.def.value);
    store_outputs(s, bound, *cur);
  }
  return cur;
}

// Computes, at the current loop level, every reduction of `root` (the kernel's value, or a
// materialized producer's) whose dimensions are all bound here
// (innermost first), so it runs once per iteration of this level rather than per element of
// the inner loops. A reduction that varies along the label of an enclosing reduction is
// hoisted too when that enclosing reduction takes its label as one whole tile (no loop): the
// label is bound here for it, as the enclosing reduction will bind it, so that 2mm's first
// product, `rdot(A[m, k], B[k, l], k)` inside `rdot(..., C[l, n], l)` with `l` whole, is
// computed once per `m` block instead of once per `n` tile. Reductions inside a looping
// enclosing reduction stay put.
void hoist(LowerState& s, const ir::Labels& bound, Body& body, const ir::Expr& root) {
  struct Enclosing {
    Label rvar;
    const ir::Expr* e;
  };
  std::function<void(const ir::Expr&, const std::vector<Enclosing>&)> walk =
      [&](const ir::Expr& e, const std::vector<Enclosing>& enclosing) {
        Label rvar = nullptr;
        if (auto* r = e.as<ir::Reduce>()) rvar = r->rvar;
        if (auto* d = e.as<ir::Dot>()) rvar = d->rvar;
        std::vector<Enclosing> deeper = enclosing;
        if (rvar) deeper.push_back({rvar, &e});
        for (const ir::Expr* k : ir::children(e))
          walk(*k, deeper);
        if (!rvar || s.hoisted.count(&e)) return;
        // The online loop computes its reductions together, where all their labels are bound.
        if (in_online_loop(s, e) && !online_ready(s)) return;
        std::vector<std::pair<Label, const ir::Expr*>> borrowed;
        for (Label l : e.dims) {
          auto it = std::find_if(enclosing.rbegin(), enclosing.rend(),
                                 [&](const Enclosing& x) { return x.rvar == l; });
          if (it == enclosing.rend()) {
            if (!ir::contains(bound, l)) return;
            continue;
          }
          if (!s.tensorized(l) || !s.whole_tile(*it->e, l) ||
              (s.bind.count(l) && !s.bind[l].empty()))
            return;
          borrowed.push_back({l, it->e});
        }
        for (const auto& [l, outer] : borrowed)
          emit_dim(s, l, body, loop_prefix(s, l, reduction_prefix(s, l)), !s.splits(*outer));
        s.hoisted[&e] = lower_expr(s, e, body);
        for (const auto& [l, outer] : borrowed)
          s.bind[l].pop_back();
      };
  walk(root, {});
}

// A reduction over a label that also names a bound dimension shadows it: its names get
// `<label>_red_`.
std::string reduction_prefix(LowerState& s, Label r) {
  return s.bind.count(r) && !s.bind[r].empty() ? s.py(r) + "_red_" : "";
}

// A prefix under which this reduction's loop variables are unused (`r2_`, `r3_`, ...), so a
// second reduction over the same label in one kernel gets its own names; reserves them.
std::string loop_prefix(LowerState& s, Label r, const std::string& prefix) {
  std::string p = prefix;
  for (int n = 2; s.used.count(p + s.py(r) + "_iter") || s.used.count(p + s.py(r) + "_idx"); ++n)
    p = prefix + "r" + std::to_string(n) + "_";
  s.used.insert(p + s.py(r) + "_iter");
  s.used.insert(p + s.py(r) + "_idx");
  return p;
}

} // namespace dtc::lowering
