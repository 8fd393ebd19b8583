// Stage 9 of lowering a Func: online(l), the reductions over l of OnlineSoftmax.h in one loop.
//
//   l_max = -inf; sum_i = 0; ...
//   for each tile of l:
//     l_max_new = maximum(l_max, max of the tile of X log2(e))
//     l_max_safe = where(l_max_new == -inf, 0, l_max_new)   # rows all -inf so far
//     l_alpha = exp2(l_max - l_max_safe)
//     sum_i = sum_i * l_alpha + sum of the tile of the summand, read with l_max_safe for the max
//     (an rdot on tl.dot: acc = tl.dot(p, V, acc * l_alpha))
//     l_max = l_max_new
//
// after which each sum is the plain one: sum over l of exp(Y - max) G, max the final maximum.
// The maximum is kept in base 2, of the scores times log2(e), and the summands' exp(Y - max) are
// exp2(Y log2(e) - max): the multiplication by log2(e) that exp makes anyway then folds into
// the scores' scale (FoldScaleConstants.h), as a hand-written FlashAttention folds it. After the
// loop the maximum is max ln(2) again for whatever reads it. (Scores past 2.3e38, float32's
// largest over log2(e), overflow to inf in base 2: the sums are then NaN.)
// Rows whose values are all -inf give sums of 0 (and 0 / 0 = NaN, as softmax gives); a NaN or
// +inf maximum makes every rescaled sum NaN, as in the plain form. Under a causal mask
// (OnlineGroup::causal) the loop stops after the block's last query: the keys past it are not
// read, as FlashAttention does not read them.
#include "lower/LowerState.h"
#include "lower/Names.h"

#include <algorithm>
#include <limits>

namespace dtc::lowering {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kLn2 = 0.6931471805599453;

/// warp_specialize(l) of the online loop `loop` over l: on Hopper the loop runs as a Gluon
/// kernel (kir/OnlinePartitions.h) where its tiles come through tensor descriptors in 16-bit
/// floats, the wrapper's flags of every tensor read through one; on later GPUs Triton
/// specializes it (`_dt_warp_specialize`). Else the reason it cannot be, for lowering to report.
void warp_specialize(LowerState& s, kir::Stmt& loop) {
  DTC_ASSERT(loop.kind == kir::StmtKind::For, "the online loop expected");
  if (s.tma_flags.empty()) {
    s.warp_specialize_refused = "no tile of the online loop is read through a tensor "
                                "descriptor (name its inputs in `tma`)";
    return;
  }
  std::vector<std::string> flags;
  for (const auto& [tensor, flag] : s.tma_flags) {
    flags.push_back(flag);
    flags.push_back(s.half_flag(tensor));
  }
  std::sort(flags.begin(), flags.end()); // one order: the symbols' map is keyed by address
  Value cond;
  for (const std::string& f : flags)
    cond = kir::and_(cond, s.ref(f));
  loop.warp_specialize = kir::and_(cond, s.ref(s.warp_specialize_flag()));
  s.warp_specialized = true;
}

/// The dimensions of every member.
ir::Labels group_dims(const OnlineGroup& g) {
  ir::Labels dims;
  for (const OnlineGroup::Member& m : g.members)
    dims = ir::union_labels(dims, m.e->dims);
  return dims;
}

/// `v`, varying along `dims`, masked to `identity` outside l's range and spread over l's tile
/// when l is tensorized (a value constant along l counts once per element of the tile).
Value spread(LowerState& s, Value v, const ir::Labels& dims, Label l, double identity) {
  const Value mask = s.bind[l].back().mask;
  if (mask) return kir::select(mask, v, kir::float_imm(identity));
  if (s.tensorized(l) && !ir::contains(dims, l))
    return kir::add(v, kir::full(s.layout.shape_of(ir::union_labels(dims, {l})), 0.0));
  return v;
}

/// One tile's reduction over l (nothing to reduce when l is not tensorized).
Value tile_reduce(LowerState& s, kir::ReduceOp op, Value v, Label l) {
  int ax = s.layout.axis_of(l);
  return ax < 0 ? v : kir::reduce(op, v, ax);
}

struct Running {
  const OnlineGroup::Member* member;
  std::string name; // the accumulator
  std::optional<DotOnCores> dot;
};

} // namespace

bool in_online_loop(const LowerState& s, const ir::Expr& e) {
  return s.online && s.online->member(e);
}

bool online_ready(const LowerState& s) {
  for (Label d : group_dims(*s.online))
    if (!s.bind.count(d) || s.bind.at(d).empty()) return false;
  return true;
}

bool lower_online(LowerState& s, Body& body) {
  if (s.online_done || !online_ready(s)) return false;
  s.online_done = true;
  const OnlineGroup& g = *s.online;
  Label l = g.rvar;
  body.push_back(kir::Stmt::comment("online over " + l->name + ": " +
                                    std::to_string(g.members.size()) +
                                    " reductions in one loop, rescaled by the running maximum"));
  std::string prefix = reduction_prefix(s, l);
  std::string base = prefix + s.py(l);
  // The running maximum and each accumulator, before the loop.
  std::string max_name = s.fresh(base + "_max");
  s.let(body, max_name, kir::full(s.layout.shape_of(g.max->dims), -kInf));
  std::vector<Running> running;
  for (const OnlineGroup::Member& m : g.members) {
    if (m.e == g.max || m.key == ir::to_dt(*g.max)) continue;
    Running r{&m, s.fresh(base + "_acc"), std::nullopt};
    double identity = 0.0;
    if (auto* red = m.e->as<ir::Reduce>()) identity = identity_of(red->op);
    if (auto* d = m.e->as<ir::Dot>(); d && on_tensor_cores(s, *d)) {
      r.dot = orient_dot(s, *d);
      if (!r.dot) return true; // reported
      s.let(body, r.name,
            kir::full({s.layout.width_of_axis(r.dot->i), s.layout.width_of_axis(r.dot->j)}, 0.0));
    } else {
      s.let(body, r.name,
            s.layout.axes.empty() ? kir::float_imm(identity)
                                  : kir::full(s.layout.shape_of(m.e->dims), identity));
    }
    running.push_back(std::move(r));
  }
  // Under a causal mask the keys past the block's last query add nothing: stop there.
  Value stop;
  if (g.causal && s.fs.block_of(g.causal) && ir::contains(s.def.dims, g.causal))
    stop = s.let(body, s.fresh(base + "_stop"),
                 kir::minimum(s.ref(s.py(g.causal) + "_end"), s.ref(s.py.size(l))));
  // And the key tiles wholly before the block's first query are seen by every query of the
  // block: a first loop computes their scores without the mask.
  Value diagonal;
  const int ax = s.layout.axis_of(l);
  const bool literal_step = ax < 0 || s.layout.axes[ax].width.param.empty();
  if (stop && literal_step && !s.fs.block_of(l)) {
    Value step = ax < 0 ? kir::int_imm(1) : kir::int_imm(s.layout.axes[ax].width.n);
    Value first = s.ref(s.py(g.causal) + "_start");
    diagonal =
        s.let(body, s.fresh(base + "_diagonal"),
              kir::minimum(kir::mul(kir::binary(kir::BinOp::FloorDiv, first, step), step), stop));
  }
  // One loop over l from `from` (0 when null) to `to` (the end when null).
  auto loop = [&](Value from, Value to, const std::string& loop_pre) {
    Body* inner = emit_dim(s, l, body, loop_pre, true, to, from);
    s.cache.emplace_back();
    // The tile's maximum, and the running maximum with it.
    const auto& mx = *g.max->as<ir::Reduce>();
    Value x =
        spread(s, kir::mul(number(s, *mx.a, *inner), kir::float_imm(kLog2E)), mx.a->dims, l, -kInf);
    Value tile_max = tile_reduce(s, kir::ReduceOp::Max, x, l);
    Value max_new =
        s.let(*inner, s.fresh(base + "_max_new"), kir::maximum(s.ref(max_name), tile_max));
    Value safe = s.let(*inner, s.fresh(base + "_max_safe"),
                       kir::select(kir::binary(kir::BinOp::Eq, max_new, kir::float_imm(-kInf)),
                                   kir::float_imm(0.0), max_new));
    Value alpha = s.let(*inner, s.fresh(base + "_alpha"),
                        kir::call(kir::Intrinsic::Exp2, {kir::sub(s.ref(max_name), safe)}));
    // Inside the loop the summands read the maximum so far, in base 2.
    s.cache.back()[s.reduction_key(*g.max)] = safe;
    s.base2_max = g.max;
    for (Running& r : running) {
      const ir::Expr& e = *r.member->e;
      Value acc = s.ref(r.name);
      if (r.dot) {
        const auto& d = *e.as<ir::Dot>();
        if (r.member->rescaled)
          acc = kir::mul(acc, dot_matrix(s, alpha, g.max->dims, r.dot->i, r.dot->j));
        s.let(*inner, r.name, dot_step(s, d, *r.dot, *inner, acc));
        continue;
      }
      Value v;
      ir::ReduceOp op = ir::ReduceOp::Sum;
      if (auto* d = e.as<ir::Dot>()) {
        v = kir::mul(number(s, *d->a, *inner), number(s, *d->b, *inner));
        v = spread(s, v, ir::union_labels(d->a->dims, d->b->dims), l, 0.0);
      } else {
        const auto& red = *e.as<ir::Reduce>();
        op = red.op;
        v = spread(s, number(s, *red.a, *inner), red.a->dims, l, identity_of(op));
      }
      Value tile = tile_reduce(s, kernel_op(op), v, l);
      Value next = op == ir::ReduceOp::Sum
                       ? kir::add(r.member->rescaled ? kir::mul(acc, alpha) : acc, tile)
                   : op == ir::ReduceOp::Max ? kir::maximum(acc, tile)
                                             : kir::minimum(acc, tile);
      s.let(*inner, r.name, next);
    }
    s.let(*inner, max_name, max_new);
    s.base2_max = nullptr;
    s.cache.pop_back();
    s.bind[l].pop_back();
  };
  const std::string loop_pre = loop_prefix(s, l, prefix);
  if (diagonal) {
    s.known_true = g.causal_condition;
    loop(nullptr, diagonal, loop_pre);
    if (s.fs.warp_specialize == l) warp_specialize(s, *body.back());
    s.known_true.clear();
    loop(diagonal, stop, loop_prefix(s, l, prefix));
    if (s.fs.warp_specialize == l) warp_specialize(s, *body.back());
  } else {
    loop(nullptr, stop, loop_pre);
    if (s.fs.warp_specialize == l) warp_specialize(s, *body.back());
  }
  // After the loop: each reduction's value, for every use at this level and inside it. Where
  // every score was -inf the plain sums are NaN (exp(-inf - -inf)); here they are 0: make them
  // NaN, unless there was no score at all (an empty sum is 0).
  s.cache.back()[s.reduction_key(*g.max)] =
      s.let(body, s.fresh(base + "_max_e"), kir::mul(s.ref(max_name), kir::float_imm(kLn2)));
  Value none = kir::and_(kir::binary(kir::BinOp::Eq, s.ref(max_name), kir::float_imm(-kInf)),
                         kir::lt(kir::int_imm(0), s.ref(s.py.size(l))));
  for (const Running& r : running) {
    Value v = s.ref(r.name);
    if (r.dot) v = kir::reshape(v, s.layout.shape_of({r.dot->i, r.dot->j}));
    if (r.member->rescaled)
      v = kir::select(none, kir::float_imm(std::numeric_limits<double>::quiet_NaN()), v);
    if (r.dot || r.member->rescaled) v = s.let(body, s.fresh(base + "_sum"), v);
    s.cache.back()[s.reduction_key(*r.member->e)] = v;
  }
  return true;
}

} // namespace dtc::lowering
