// Online softmax: checking and recording the one-pass form (OnlineSoftmax.h).
#include "lower/OnlineSoftmax.h"

#include "ir/IRVisitor.h"

#include <functional>
#include <limits>

namespace dtc {

const OnlineGroup::Member* OnlineGroup::member(const ir::Expr& e) const {
  if (!e.as<ir::Reduce>() && !e.as<ir::Dot>()) return nullptr;
  const ir::Label r = e.as<ir::Reduce>() ? e.as<ir::Reduce>()->rvar : e.as<ir::Dot>()->rvar;
  if (r != rvar) return nullptr;
  std::string key = ir::to_dt(e);
  for (const Member& m : members)
    if (m.key == key) return &m;
  return nullptr;
}

namespace {

using ir::Label;

Label rvar_of(const ir::Expr& e) {
  if (auto* r = e.as<ir::Reduce>()) return r->rvar;
  if (auto* d = e.as<ir::Dot>()) return d->rvar;
  return nullptr;
}

bool is_sum(const ir::Expr& e) {
  auto* r = e.as<ir::Reduce>();
  return e.as<ir::Dot>() || (r && r->op == ir::ReduceOp::Sum);
}

/// The reductions over `l` anywhere in `e`.
std::vector<const ir::Expr*> reductions_over(const ir::Expr& e, Label l) {
  std::vector<const ir::Expr*> out;
  std::function<void(const ir::Expr&)> walk = [&](const ir::Expr& x) {
    if (rvar_of(x) == l) out.push_back(&x);
    for (const ir::Expr* c : ir::children(x))
      walk(*c);
  };
  walk(e);
  return out;
}

/// A summand as a product: each factor, and whether it divides.
struct Factor {
  ir::ExprPtr e;
  bool divides = false;
};

void factors(const ir::ExprPtr& e, bool divides, std::vector<Factor>& out) {
  if (auto* b = e->as<ir::Binary>(); b && !b->is_int()) {
    if (b->op == ir::BinOp::Mul) {
      factors(b->a, divides, out);
      factors(b->b, divides, out);
      return;
    }
    if (b->op == ir::BinOp::Div) {
      factors(b->a, divides, out);
      factors(b->b, !divides, out);
      return;
    }
  }
  // Label alignment already broadcasts: a reshape changes no value.
  if (auto* r = e->as<ir::Reshape>()) return factors(r->a, divides, out);
  out.push_back({e, divides});
}

/// The factors of sum `m`'s summand (an rdot's two operands multiply).
std::vector<Factor> summand_factors(const ir::Expr& m) {
  std::vector<Factor> fs;
  if (auto* d = m.as<ir::Dot>()) {
    factors(d->a, false, fs);
    factors(d->b, false, fs);
  } else {
    factors(m.as<ir::Reduce>()->a, false, fs);
  }
  return fs;
}

/// The product of `fs` (1 when there are none).
ir::ExprPtr product(const std::vector<Factor>& fs, Loc loc) {
  ir::ExprPtr num;
  for (const Factor& f : fs)
    if (!f.divides)
      num = num ? std::make_shared<ir::Binary>(loc, ir::BinOp::Mul, num, f.e,
                                               ir::union_labels(num->dims, f.e->dims))
                : f.e;
  if (!num) num = std::make_shared<ir::Const>(loc, 1.0, false);
  for (const Factor& f : fs)
    if (f.divides)
      num = std::make_shared<ir::Binary>(loc, ir::BinOp::Div, num, f.e,
                                         ir::union_labels(num->dims, f.e->dims));
  return num;
}

/// Takes factors that do not vary along `l` and hold a reduction over `l` out of the sums over
/// `l`: rdot(e / s, V, l) becomes rdot(e, V, l) / s, so that the sum no longer needs s, a total
/// over `l`, before its first step.
class TakeOutTotals : public ir::IRMutator {
public:
  explicit TakeOutTotals(Label l) : l_(l) {}
  using ir::IRMutator::visit;

private:
  bool total(const Factor& f) const {
    return !ir::contains(f.e->dims, l_) && !reductions_over(*f.e, l_).empty();
  }
  /// Splits `fs` into the factors kept in the sum and those taken out.
  bool split(std::vector<Factor>& fs, std::vector<Factor>& out) const {
    std::vector<Factor> kept;
    for (const Factor& f : fs)
      (total(f) ? out : kept).push_back(f);
    fs = kept;
    return !out.empty();
  }
  /// The sum, `taken` out of it, as the sum itself is over no `l` at all: 0 (a softmax's
  /// denominator is 0 there, and 0 / 0 is not the empty sum).
  ir::ExprPtr outside(std::vector<Factor> taken, ir::ExprPtr sum) const {
    Loc loc = sum->loc;
    taken.insert(taken.begin(), {std::move(sum), false});
    ir::ExprPtr value = product(taken, loc);
    auto some =
        std::make_shared<ir::Binary>(loc, ir::BinOp::Gt, std::make_shared<ir::Len>(loc, l_),
                                     std::make_shared<ir::Const>(loc, 0.0, true), ir::Labels{});
    ir::Labels dims = value->dims;
    return std::make_shared<ir::Call>(
        loc, "where",
        std::vector<ir::ExprPtr>{some, value, std::make_shared<ir::Const>(loc, 0.0, false)}, dims);
  }
  ir::ExprPtr visit(const ir::Reduce& e, const ir::ExprPtr& self) override {
    ir::ExprPtr m = ir::IRMutator::visit(e, self);
    auto& r = static_cast<const ir::Reduce&>(*m);
    if (r.rvar != l_ || r.op != ir::ReduceOp::Sum) return m;
    std::vector<Factor> fs, out;
    factors(r.a, false, fs);
    if (!split(fs, out)) return m;
    ir::ExprPtr a = product(fs, r.a->loc);
    ir::Labels dims;
    for (Label d : a->dims)
      if (d != l_) dims.push_back(d);
    return outside(out, std::make_shared<ir::Reduce>(r.loc, r.op, a, r.rvar, dims));
  }
  ir::ExprPtr visit(const ir::Dot& e, const ir::ExprPtr& self) override {
    ir::ExprPtr m = ir::IRMutator::visit(e, self);
    auto& d = static_cast<const ir::Dot&>(*m);
    if (d.rvar != l_) return m;
    std::vector<Factor> fa, fb, out;
    factors(d.a, false, fa);
    factors(d.b, false, fb);
    bool took = split(fa, out);
    took |= split(fb, out);
    if (!took) return m;
    ir::ExprPtr a = product(fa, d.a->loc), b = product(fb, d.b->loc);
    ir::Labels dims;
    for (Label x : ir::union_labels(a->dims, b->dims))
      if (x != l_) dims.push_back(x);
    return outside(out, std::make_shared<ir::Dot>(d.loc, a, b, d.rvar, dims));
  }
  Label l_;
};

/// The reductions of `e` outside any other reduction.
void outermost_reductions(const ir::Expr& e, std::vector<const ir::Expr*>& out) {
  if (rvar_of(e)) {
    out.push_back(&e);
    return;
  }
  for (const ir::Expr* c : ir::children(e))
    outermost_reductions(*c, out);
}

/// `e` without reshapes around it.
const ir::Expr& bare(const ir::Expr& e) {
  const ir::Expr* x = &e;
  while (auto* r = x->as<ir::Reshape>())
    x = r->a.get();
  return *x;
}

class Checker {
public:
  Checker(const ir::Symbol* f, Label l, Loc where, const Materialized& temporaries,
          DiagnosticEngine& diags)
      : f_(f), l_(l), where_(where), temporaries_(temporaries), diags_(diags) {}

  /// The group of the reductions over `l` in `values`, or nullopt after reporting why there is
  /// none.
  std::optional<OnlineGroup> group(const std::vector<const ir::Expr*>& values) {
    OnlineGroup g;
    g.rvar = l_;
    std::vector<const ir::Expr*> tops;
    for (const ir::Expr* v : values)
      outermost_reductions(*v, tops);
    // A reduction over l inside a reduction over another label needs its own loop over l for
    // every step of the outer one.
    for (const ir::Expr* t : tops)
      if (rvar_of(*t) != l_)
        for (const ir::Expr* inner : reductions_over(*t, l_))
          return fail(*inner, "is inside `" + ir::to_dt(*t) + "`, a reduction over `" +
                                  rvar_of(*t)->name + "`, which would repeat the loop over `" +
                                  l_->name + "` at every step of its own");
    std::vector<const ir::Expr*> members;
    for (const ir::Expr* t : tops)
      if (rvar_of(*t) == l_) members.push_back(t);
    if (members.empty())
      return fail("`" + f_->name + "`'s kernel computes no reduction over `" + l_->name +
                  "`; fuse the Funcs of the softmax into it (`fuse_at`) so that its kernel "
                  "reduces over `" +
                  l_->name + "`");
    // The running maximum: the rmax over l that the sums read.
    const ir::Expr* max = nullptr;
    for (const ir::Expr* m : members)
      for (const ir::Expr* inner : inner_reductions(*m)) {
        auto* r = inner->as<ir::Reduce>();
        if (!r || r->op != ir::ReduceOp::Max)
          return fail(*inner, "is read inside `" + ir::to_dt(*m) +
                                  "`, which then needs that total over `" + l_->name +
                                  "` before its first step");
        if (!is_sum(*m))
          return fail(*inner, "is read inside `" + ir::to_dt(*m) +
                                  "`, a maximum or minimum, which no rescaling keeps; only a sum "
                                  "may read the running maximum, through exp(x - maximum)");
        if (max && ir::to_dt(*max) != ir::to_dt(*inner))
          return fail(*inner, "is a second maximum read inside the sums over `" + l_->name +
                                  "` (the first is `" + ir::to_dt(*max) +
                                  "`); one running maximum rescales them");
        max = inner;
      }
    if (!max)
      for (const ir::Expr* m : members)
        if (auto* r = m->as<ir::Reduce>(); r && r->op == ir::ReduceOp::Max) max = m;
    if (!max && !temporaries_.empty()) {
      // Fused, but computed into a temporary at a level of their own: not in this loop.
      std::string names;
      for (const auto& [t, at] : temporaries_)
        names +=
            std::string(names.empty() ? "" : ", ") + "`" + t->name + "` (at `" + at->name + "`)";
      return fail("`" + f_->name + "`'s kernel computes " + names +
                  (temporaries_.size() > 1 ? " into temporaries" : " into a temporary") +
                  ", one iteration of a level at a time, so its loop over `" + l_->name +
                  "` takes no maximum to rescale by; fuse them at `" + f_->name +
                  "`'s innermost blocked dimension, or make the dimensions inside that level "
                  "whole tiles (or blocks of one), so that they are computed inline");
    }
    if (!max)
      return fail("`" + f_->name + "`'s kernel takes no maximum over `" + l_->name +
                  "` to rescale by; write the softmax the stable way, exp(x - rmax(x, " + l_->name +
                  ")), and fuse it into `" + f_->name + "`");
    if (!reductions_over(*max->as<ir::Reduce>()->a, l_).empty())
      return fail(*max, "reads another reduction over `" + l_->name +
                            "`, whose total it would need before its first step");
    g.max = max;
    add(g, max, false);
    for (const ir::Expr* m : members) {
      bool reads_max = !inner_reductions(*m).empty();
      if (reads_max && !rescalable(*m, ir::to_dt(*max), ir::to_dt(*max->as<ir::Reduce>()->a)))
        return std::nullopt;
      add(g, m, reads_max);
    }
    g.causal = causal_label(g);
    if (g.causal)
      g.causal_condition = ir::to_dt(*g.max->as<ir::Reduce>()->a->as<ir::Call>()->args[0]);
    return g;
  }

private:
  /// `m` when the maximum's operand is `where(l <= m, x, -inf)` (or `l < m`, `m >= l`,
  /// `m > l`) and every other member is a sum reading it as exp(that - max): then keys past a
  /// block's last `m` give -inf scores and add exp(-inf) = 0 to every sum.
  Label causal_label(const OnlineGroup& g) const {
    const ir::Expr& x = *g.max->as<ir::Reduce>()->a;
    auto* w = x.as<ir::Call>();
    if (!w || w->fn != "where" || !minus_inf(*w->args[2])) return nullptr;
    auto* c = w->args[0]->as<ir::Binary>();
    if (!c) return nullptr;
    auto* a = c->a->as<ir::LabelValue>();
    auto* b = c->b->as<ir::LabelValue>();
    if (!a || !b) return nullptr;
    Label m = nullptr;
    if ((c->op == ir::BinOp::Le || c->op == ir::BinOp::Lt) && a->label == l_) m = b->label;
    if ((c->op == ir::BinOp::Ge || c->op == ir::BinOp::Gt) && b->label == l_) m = a->label;
    if (!m || m == l_) return nullptr;
    std::string scores = ir::to_dt(x);
    for (const OnlineGroup::Member& member : g.members) {
      if (member.e == g.max) continue;
      if (!member.rescaled || !reads_exp_of(*member.e, scores)) return nullptr;
    }
    return m;
  }
  static bool minus_inf(const ir::Expr& e) {
    if (auto* c = e.as<ir::Const>()) return c->value == -std::numeric_limits<double>::infinity();
    auto* u = e.as<ir::Unary>();
    auto* c = u && u->op == ir::UnOp::Neg ? u->a->as<ir::Const>() : nullptr;
    return c && c->value == std::numeric_limits<double>::infinity();
  }
  /// Whether sum `m`'s summand has the factor exp(scores - max).
  bool reads_exp_of(const ir::Expr& m, const std::string& scores) const {
    std::vector<Factor> fs = summand_factors(m);
    for (const Factor& f : fs) {
      auto* call = f.e->as<ir::Call>();
      auto* sub = call && call->fn == "exp" ? call->args[0]->as<ir::Binary>() : nullptr;
      if (sub && sub->op == ir::BinOp::Sub && ir::to_dt(*sub->a) == scores) return true;
    }
    return false;
  }

  /// The reductions over l inside `m`.
  std::vector<const ir::Expr*> inner_reductions(const ir::Expr& m) const {
    std::vector<const ir::Expr*> out;
    for (const ir::Expr* c : ir::children(m))
      for (const ir::Expr* r : reductions_over(*c, l_))
        out.push_back(r);
    return out;
  }

  /// Whether sum `m` reads the maximum as one factor exp(x - max) of its summand, x the
  /// maximum's own operand: then every term is at most 1 and the terms of the tiles before the
  /// first finite maximum are 0, which rescaling keeps exact.
  bool rescalable(const ir::Expr& m, const std::string& max, const std::string& x) {
    std::vector<Factor> fs = summand_factors(m);
    int found = 0;
    for (const Factor& f : fs) {
      if (reductions_over(*f.e, l_).empty()) continue;
      auto* call = f.e->as<ir::Call>();
      auto* sub = call && call->fn == "exp" ? call->args[0]->as<ir::Binary>() : nullptr;
      bool form = sub && sub->op == ir::BinOp::Sub && !f.divides &&
                  ir::to_dt(bare(*sub->b)) == max && reductions_over(*sub->a, l_).empty();
      if (!form) {
        fail(*f.e, std::string(f.divides ? "divides" : "multiplies") + " the summand of `" +
                       ir::to_dt(m) + "` and reads the maximum other than as exp(x - " + max +
                       "), so its sum cannot be rescaled as the maximum grows");
        return false;
      }
      if (ir::to_dt(*sub->a) != x) {
        fail(*sub->a, "is what the terms of `" + ir::to_dt(m) +
                          "` exponentiate less the maximum, but the maximum is of `" + x +
                          "`: a term could then exceed the running maximum and overflow before "
                          "it is rescaled; take the maximum of the same scores");
        return false;
      }
      ++found;
    }
    if (found > 1) {
      fail(m, "reads the maximum in " + std::to_string(found) +
                  " factors of its summand; write them as one exp(x - " + max + ")");
      return false;
    }
    return true;
  }

  static void add(OnlineGroup& g, const ir::Expr* e, bool rescaled) {
    std::string key = ir::to_dt(*e);
    for (const OnlineGroup::Member& m : g.members)
      if (m.key == key) return;
    g.members.push_back({e, key, rescaled});
  }

  std::nullopt_t fail(const std::string& why) {
    diags_.error("online-form", where_, "in `" + f_->name + ".online(" + l_->name + ")`: " + why);
    return std::nullopt;
  }
  std::nullopt_t fail(const ir::Expr& culprit, const std::string& why) {
    diags_.error("online-form", culprit.loc,
                 "`" + ir::to_dt(culprit) + "` " + why + "; `" + f_->name +
                     "` cannot be computed online over `" + l_->name + "`");
    diags_.note(where_, "online(" + l_->name + ") is asked here");
    return std::nullopt;
  }

  const ir::Symbol* f_;
  Label l_;
  Loc where_;
  const Materialized& temporaries_;
  DiagnosticEngine& diags_;
};

} // namespace

void plan_online(ir::Program& program, KernelPlan& plan, DiagnosticEngine& diags) {
  for (auto& [f, fs] : plan.schedule.funcs) {
    if (!fs.online || !program.funcs.count(f)) continue;
    Label l = *fs.online;
    TakeOutTotals take(l);
    std::vector<const ir::Expr*> values;
    ir::FuncDef& def = program.funcs.at(f);
    def.value = take.mutate(def.value);
    values.push_back(def.value.get());
    for (const ir::Symbol* g : fs.stored) {
      ir::FuncDef& gd = program.funcs.at(g);
      gd.value = take.mutate(gd.value);
      values.push_back(gd.value.get());
    }
    Checker check(f, l, fs.where.at("online"), plan.materialized_of(f), diags);
    if (auto group = check.group(values)) plan.online[f] = std::move(*group);
  }
}

} // namespace dtc
