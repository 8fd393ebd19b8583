// Stage 6 of lowering a Func: expressions. Each DT expression becomes a typed kernel IR value
// at the current bindings of its labels: loads (cached per loop level and index), arithmetic in
// float32, builtins as intrinsics; reductions go to LowerReductions.cpp and rdot on the
// tensor cores to LowerDots.cpp.
#include "ir/Builtins.h"
#include "lower/LowerState.h"
#include "lower/Names.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dtc::lowering {

namespace {

using kir::ExprPtr;

// Python's parser allows 200 nested parentheses and Triton's code generator recurses through
// the expression: a value nested deeper than this is bound to a name first.
constexpr int kMaxValueDepth = 12;

kir::BinOp kernel_op(ir::BinOp op) {
  switch (op) {
  case ir::BinOp::Add:
    return kir::BinOp::Add;
  case ir::BinOp::Sub:
    return kir::BinOp::Sub;
  case ir::BinOp::Mul:
    return kir::BinOp::Mul;
  case ir::BinOp::Div:
    return kir::BinOp::Div;
  case ir::BinOp::IntDiv:
    return kir::BinOp::FloorDiv; // printed `//`: on integers Triton rounds toward zero, as DT
  case ir::BinOp::Mod:
    return kir::BinOp::Mod;
  case ir::BinOp::Lt:
    return kir::BinOp::Lt;
  case ir::BinOp::Le:
    return kir::BinOp::Le;
  case ir::BinOp::Gt:
    return kir::BinOp::Gt;
  case ir::BinOp::Ge:
    return kir::BinOp::Ge;
  case ir::BinOp::Eq:
    return kir::BinOp::Eq;
  case ir::BinOp::Ne:
    return kir::BinOp::Ne;
  }
  throw InternalError("kernel_op: unknown operator");
}

/// A builtin as kernel IR: most are one intrinsic call; the rest are other nodes.
ExprPtr builtin_expr(const Builtin& b, const std::vector<ExprPtr>& a) {
  std::string_view name = b.name;
  if (name == "reciprocal") return kir::binary(kir::BinOp::Div, kir::float_imm(1.0), a[0]);
  if (name == "square") return kir::mul(a[0], a[0]);
  // NaN-propagating, as torch.maximum, torch.relu and torch.clamp are.
  if (name == "maximum") return kir::maximum(a[0], a[1]);
  if (name == "minimum") return kir::minimum(a[0], a[1]);
  if (name == "relu") return kir::maximum(a[0], kir::float_imm(0.0));
  if (name == "clamp") return kir::minimum(kir::maximum(a[0], a[1]), a[2]);
  if (name == "where") {
    ExprPtr cond = a[0]->type.scalar == kir::Scalar::I1
                       ? a[0]
                       : kir::binary(kir::BinOp::Ne, a[0], kir::float_imm(0.0));
    return kir::select(cond, a[1], a[2]);
  }
  std::optional<kir::Intrinsic> fn = kir::intrinsic_named(name);
  DTC_ASSERT(fn, "builtin " + std::string(name) + " has no kernel IR form");
  return kir::call(*fn, a);
}

int access_patterns(const LowerState& s, const ir::Symbol* t) {
  struct Count : ir::IRVisitor {
    const ir::Symbol* t;
    std::set<std::string> seen;
    void visit(const ir::Access& e) override {
      if (e.tensor == t) seen.insert(ir::to_dt(e));
      ir::IRVisitor::visit(e);
    }
  } c;
  c.t = t;
  s.for_each_value(c);
  return static_cast<int>(c.seen.size());
}

// Binds a value nested too deeply for Python and Triton's code generator to a name.
Value shallow(LowerState& s, Value v, Body& body) {
  if (v->depth <= kMaxValueDepth) return v;
  return s.let(body, s.fresh("v"), v);
}

Value integer_power(LowerState& s, const ir::Expr& base_expr, int n, Body& body) {
  if (n == 0) return kir::float_imm(1.0);
  Value base = number(s, base_expr, body);
  // A literal base: the power is a literal too (IEEE pow: 0^-1 is inf, not Python's error).
  if (base->kind == kir::ExprKind::Float) return kir::float_imm(std::pow(base->value_float, n));
  // Under the interpreter a scalar may be a Python float, whose `1.0 / 0.0` raises.
  if (n < 0 && is_scalar_value(base_expr)) base = kir::cast(base, kir::Scalar::F32);
  if (base->kind != kir::ExprKind::Var) base = s.let(body, s.fresh("pow_base"), base);
  auto power = [&](Value x) {
    Value product = x;
    for (int i = 1; i < std::abs(n); ++i)
      product = kir::mul(product, x);
    return product;
  };
  Value product = power(base);
  if (n > 0) return product;
  if (n == -1) return kir::binary(kir::BinOp::Div, kir::float_imm(1.0), base);
  // 1 / v^|n|, or (1 / v)^|n| where v^|n| overflows but v^n does not (1e20^-2 is 1e-40, not
  // 1 / inf): the infinity of an infinite base gives a zero of the right sign either way.
  Value inverse =
      s.let(body, s.fresh("pow_inverse"), kir::binary(kir::BinOp::Div, kir::float_imm(1.0), base));
  Value overflows = kir::binary(kir::BinOp::Eq, builtin_expr(*find_builtin("abs"), {product}),
                                kir::float_imm(std::numeric_limits<double>::infinity()));
  return kir::select(overflows, power(inverse),
                     kir::binary(kir::BinOp::Div, kir::float_imm(1.0), product));
}

/// Whether 1 / e, rounded to float32, is finite and normal or e is 0: a constant whose
/// reciprocal is a normal float, a size, or the square root of either. A product by that
/// reciprocal then gives x / e within an ulp and a half, with the same infinities and NaNs.
bool reciprocal_is_safe(const ir::Expr& e) {
  if (auto* c = e.as<ir::Const>())
    return std::isfinite(c->value) && std::fabs(c->value) >= 0x1p-125 &&
           std::fabs(c->value) <= 0x1p125;
  if (e.as<ir::Len>()) return true;
  if (auto* c = e.as<ir::Call>(); c && c->fn == "sqrt" && c->args.size() == 1) {
    const ir::Expr& a = *c->args[0];
    auto* k = a.as<ir::Const>();
    return a.as<ir::Len>() || (k && k->value > 0 && reciprocal_is_safe(a));
  }
  return false;
}

Value binary(LowerState& s, const ir::Binary& b, Body& body) {
  // Whole numbers compute as the kernel's integers (`//` and `%` round toward zero).
  if (b.is_int() || (ir::is_comparison(b.op) &&
                     ir::combined_type({b.a.get(), b.b.get()}) == ir::ValueType::Int)) {
    Value x = whole(s, *b.a, body), y = whole(s, *b.b, body);
    // A scalar dividend may be a Python int (a loop's index, a size or an integer scalar under
    // the interpreter, a size of 1 that Triton specializes), whose `//` and `%` round toward
    // -inf; an int64 scalar tensor rounds toward zero, as DT and the GPU do.
    if ((b.op == ir::BinOp::IntDiv || b.op == ir::BinOp::Mod) && x->type.shape.empty() &&
        x->type.scalar != kir::Scalar::I64)
      x = kir::cast(x, kir::Scalar::I64);
    return shallow(s, kir::binary(kernel_op(b.op), x, y), body);
  }
  Value x = number(s, *b.a, body), y = number(s, *b.b, body);
  // `%` is C's fmod and `/` IEEE division, as on the GPU; under the interpreter a scalar
  // operand is a Python float, whose `%` is Python's (the sign of the divisor) and whose `/ 0`
  // raises. A float32 tensor computes both as the GPU does.
  // A comparison of scalars likewise: a Python bool cannot be converted to 0 or 1 with .to().
  if ((b.op == ir::BinOp::Mod || b.op == ir::BinOp::Div ||
       (ir::is_comparison(b.op) && b.b->dims.empty())) &&
      b.a->dims.empty())
    x = kir::cast(x, kir::Scalar::F32);
  // A tile divided by a scale (`qk / sqrt(len(k))`): Triton's float32 `/` is a reciprocal and
  // a product per element on the GPU (div.full), and the reciprocal runs on the units that
  // exponentials need; one correctly rounded reciprocal, hoisted, and a product instead.
  if (b.op == ir::BinOp::Div && !b.a->dims.empty() && b.b->dims.empty() &&
      reciprocal_is_safe(*b.b)) {
    // A constant's reciprocal is folded here, rounded to float32 as tl.div_rn would round it.
    if (auto* c = b.b->as<ir::Const>())
      return shallow(s, kir::mul(x, kir::float_imm(1.0f / static_cast<float>(c->value))), body);
    if (!y->type.is_float()) y = kir::cast(y, kir::Scalar::F32);
    // One name per divisor, however often the quotient is lowered (online loops lower a
    // summand once per reduction that reads it).
    std::string key = "inverse:" + kir::print(*y);
    std::optional<Value> inverse = s.cached(key);
    if (!inverse) {
      inverse = s.let(body, s.fresh("inverse"),
                      kir::call(kir::Intrinsic::DivRn, {kir::float_imm(1.0), y}));
      if (!s.cache.empty()) s.cache.back()[key] = *inverse;
    }
    return shallow(s, kir::mul(x, *inverse), body);
  }
  return shallow(s, kir::binary(kernel_op(b.op), x, y), body);
}

Value call(LowerState& s, const ir::Call& c, Body& body) {
  const Builtin* b = find_builtin(c.fn);
  DTC_ASSERT(b, "unknown builtin survived checking");
  if (c.fn == "pow") {
    if (auto* k = c.args[1]->as<ir::Const>()) {
      double n = k->value;
      if (n == std::floor(n) && std::fabs(n) <= 8)
        return integer_power(s, *c.args[0], int(n), body);
      // A non-integer constant: no sign to work out, NaN for a negative base.
      if (std::isfinite(n) && n != std::floor(n)) {
        Value base = number(s, *c.args[0], body);
        if (n == 0.5) return shallow(s, kir::call(kir::Intrinsic::PowHalf, {base}), body);
        return shallow(s, kir::call(kir::Intrinsic::PowFrac, {base, kir::float_imm(n)}), body);
      }
    }
  }
  // exp(x - max) in the online loop, whose running maximum is kept in base 2 (LowerOnline.cpp).
  if (c.fn == "exp" && s.base2_max)
    if (auto* d = c.args[0]->as<ir::Binary>(); d && d->op == ir::BinOp::Sub) {
      const ir::Expr* m = d->b.get();
      while (auto* r = m->as<ir::Reshape>())
        m = r->a.get();
      if (s.reduction_key(*m) == s.reduction_key(*s.base2_max)) {
        Value x = kir::mul(number(s, *d->a, body), kir::float_imm(kLog2E));
        return shallow(s, kir::call(kir::Intrinsic::Exp2, {kir::sub(x, number(s, *d->b, body))}),
                       body);
      }
    }
  // A condition known to hold on every lane here (the causal mask before the diagonal).
  if (c.fn == "where" && !s.known_true.empty() && ir::to_dt(*c.args[0]) == s.known_true)
    return c.is_int() ? whole(s, *c.args[1], body) : number(s, *c.args[1], body);
  std::vector<Value> args;
  for (const ir::ExprPtr& a : c.args) {
    // where's condition stays a condition; every other argument is a number, or a whole number
    // where the result is one.
    if (c.fn == "where" && &a == &c.args.front())
      args.push_back(lower_expr(s, *a, body));
    else
      args.push_back(c.is_int() ? whole(s, *a, body) : number(s, *a, body));
  }
  return shallow(s, builtin_expr(*b, args), body);
}

} // namespace

/// Whether `e` is built of constants, scalar inputs, sizes and program ids only: a number, or
/// a scalar of the kernel, never a tensor (there is nothing to reshape).
bool is_scalar_value(const ir::Expr& e) {
  if (e.as<ir::Const>() || e.as<ir::ScalarIn>() || e.as<ir::Len>() || e.as<ir::ProgramId>())
    return true;
  if (const auto* u = e.as<ir::Unary>()) return is_scalar_value(*u->a);
  if (const auto* b = e.as<ir::Binary>()) return is_scalar_value(*b->a) && is_scalar_value(*b->b);
  if (const auto* c = e.as<ir::Call>()) {
    for (const ir::ExprPtr& a : c->args)
      if (!is_scalar_value(*a)) return false;
    return true;
  }
  return false; // an access, a reduction, a dot: tensors
}

// Under `tma(t)`, the [p, q] tile of input access `e` as its tensor descriptor's block at the
// tiles' origins (transposed where the tensor is [q, p]), or `pointers` where the wrapper finds
// the tensor does not qualify; `pointers` alone where the access does not make a TMA box: the
// tile's labels must be the access's last two (a tensor of 2 to 5 dimensions, the others read at
// one index each: a batch, a head), their widths literals of 16 to 256 or tile parameters, which
// the wrapper checks per call.
bool descriptor_qualifies(const LowerState& s, const ir::Access& e) {
  const std::vector<const ir::Symbol*>& tma = s.fs.tma;
  size_t rank = e.index.size();
  if (std::find(tma.begin(), tma.end(), e.tensor) == tma.end() || rank < 2 || rank > 5 ||
      !e.plain())
    return false;
  for (size_t i = 0; i < rank; ++i) {
    Label l = e.index[i];
    for (size_t j = 0; j < i; ++j)
      if (e.index[j] == l) return false; // a diagonal
    if (i + 2 < rank) {
      // One index: no axis in the values, or an axis of one element.
      int axis = s.layout.axis_of(l);
      if (s.layout.loop_only(l) || (axis >= 0 && !s.layout.width_of_axis(l).is_one())) return false;
      continue;
    }
    if (!s.layout.has_tile(l)) return false;
    // A width that is a parameter (a whole dimension) is bounded per call (LaunchArg::boxes).
    kir::Extent w = s.layout.width_of_axis(l);
    if (w.param.empty() && (w.n < 16 || w.n > 256)) return false;
  }
  return true;
}

Value descriptor_tile(LowerState& s, const ir::Access& e, Label q, Value pointers) {
  if (!descriptor_qualifies(s, e)) return pointers;
  size_t rank = e.index.size();
  kir::Shape block;
  std::vector<Value> offsets;
  for (size_t i = 0; i < rank; ++i) {
    Label l = e.index[i];
    const Binding& b = s.bind[l].back();
    if (i + 2 < rank) {
      block.push_back(kir::Extent{1, ""});
      Value idx = s.layout.axis_of(l) >= 0 ? kir::reshape(b.idx, {}) : b.idx;
      offsets.push_back(kir::cast(idx, kir::Scalar::I32));
      continue;
    }
    block.push_back(s.layout.width_of_axis(l));
    offsets.push_back(s.tile_origin(l));
  }
  Value desc = s.descriptor(e.tensor, e.index, block);
  for (const kir::Extent& w : block)
    if (!w.param.empty()) s.bound_box(s.tma_flag(e.tensor), w.param);
  s.tma_used.insert(e.tensor);
  return kir::desc_load(desc, offsets, /*transposed=*/e.index[rank - 2] == q, pointers,
                        s.tma_flag(e.tensor));
}

// Loads a 2-D input access straight into a [p, q] tile from the labels' 1-D index vectors, as
// tl.dot wants it, instead of loading in the kernel's layout and reshaping. Null if the
// bindings have no vectors.
Value load_tile(LowerState& s, const ir::Access& e, Label p, Label q, Body& body) {
  const Binding& bp = s.bind[p].back();
  const Binding& bq = s.bind[q].back();
  if (!bp.vec || !bq.vec || !e.plain()) return nullptr;
  auto column = [](Value v) { return kir::expand(v, {true, false}); };
  auto row = [](Value v) { return kir::expand(v, {false, true}); };
  // The tile's two dimensions, and any others (a batch, a head) at one index each.
  Value addr = s.ptr_var(e.tensor), mask;
  int seen_p = 0, seen_q = 0;
  for (size_t i = 0; i < e.index.size(); ++i) {
    Label l = e.index[i];
    if (l == p || l == q) {
      const Binding& b = l == p ? bp : bq;
      (l == p ? seen_p : seen_q)++;
      Value v = l == p ? column(b.vec) : row(b.vec);
      addr = kir::add(addr, kir::mul(v, s.stride_var(e.tensor, i)));
      mask = kir::and_(mask, l == p ? column(b.vec_mask) : row(b.vec_mask));
      continue;
    }
    int axis = s.layout.axis_of(l);
    if (axis >= 0 && !s.layout.width_of_axis(l).is_one()) return nullptr;
    // One index: a scalar, or a tile of one element made one.
    const Binding& b = s.bind[l].back();
    auto one = [&](Value v) { return axis >= 0 && v ? kir::reshape(v, {}) : v; };
    addr = kir::add(addr, kir::mul(one(b.idx), s.stride_var(e.tensor, i)));
    mask = kir::and_(mask, one(b.mask));
  }
  if (seen_p != 1 || seen_q != 1) return nullptr;
  return s.let(body, s.fresh(s.py(e.tensor) + "_tile"),
               descriptor_tile(s, e, q, kir::load(addr, mask)));
}

// Whether whole number `e` is never negative: built of labels' positions, sizes and
// non-negative literals by `+`, `*`, `//` and `%`.
bool never_negative(const ir::Expr& e) {
  if (e.as<ir::LabelValue>() || e.as<ir::Len>()) return true;
  if (const auto* c = e.as<ir::Const>()) return c->value >= 0;
  if (const auto* b = e.as<ir::Binary>())
    return (b->op == ir::BinOp::Add || b->op == ir::BinOp::Mul || b->op == ir::BinOp::IntDiv ||
            b->op == ir::BinOp::Mod) &&
           never_negative(*b->a) && never_negative(*b->b);
  return false;
}

// Whether whole number `e` is below the size of `l`: `l` itself less something never negative.
bool below_size_of(const ir::Expr& e, Label l) {
  if (const auto* v = e.as<ir::LabelValue>()) return v->label == l;
  if (const auto* b = e.as<ir::Binary>())
    return b->op == ir::BinOp::Sub && below_size_of(*b->a, l) && never_negative(*b->b);
  return false;
}

// The index and the in-range condition (null: always in range) of each dimension of `e`: a
// label's binding, or a computed position, which reads 0 outside `[0, size)` of its label.
std::vector<std::pair<Value, Value>> positions(LowerState& s, const ir::Access& e, Body& body) {
  std::vector<std::pair<Value, Value>> out;
  for (size_t i = 0; i < e.index.size(); ++i) {
    const ir::Expr* p = e.position(i);
    if (!p) {
      out.push_back({s.bind[e.index[i]].back().idx, nullptr});
      continue;
    }
    // One position, wherever it is read again under the same bindings, is one value: the
    // loads it keys are then found in the cache too.
    std::string key = "position:" + ir::to_dt(*p);
    for (Label l : p->dims)
      key += "," + l->name + "=" + s.index_key(l);
    Value v;
    if (auto hit = s.cached(key)) {
      v = *hit;
    } else {
      // In int64: a shift can take an index past what the wrapper's choice of int32 allows
      // for (up to twice a dimension's size), and the mask must see the true position.
      s.wide_whole = true;
      v = whole(s, *p, body);
      s.wide_whole = false;
      if (v->kind != kir::ExprKind::Var && v->kind != kir::ExprKind::Int)
        v = s.let(body, s.fresh(s.py(e.tensor) + "_pos" + std::to_string(i)), v);
      s.cache.back()[key] = v;
    }
    Value in_range;
    if (!never_negative(*p)) in_range = kir::binary(kir::BinOp::Ge, v, kir::int_imm(0));
    if (!below_size_of(*p, e.index[i]))
      in_range = kir::and_(in_range, kir::lt(v, s.ref(s.py.size(e.index[i]))));
    out.push_back({v, in_range});
  }
  return out;
}

Value load(LowerState& s, const ir::Access& e, Body& body, bool native) {
  std::string key_prefix = s.py(e.tensor) + (native ? "#native" : "");
  std::string key = key_prefix;
  std::vector<std::pair<Value, Value>> at;
  if (e.plain()) {
    for (Label l : e.index)
      key += "," + s.index_key(l);
  } else {
    at = positions(s, e, body);
    for (const auto& [v, in_range] : at)
      key += "," + kir::print(*v);
  }
  if (auto hit = s.cached(key)) return *hit;
  bool single_pattern = access_patterns(s, e.tensor) == 1;
  std::string base = s.py(e.tensor);
  if (!single_pattern)
    for (Label l : e.index)
      base += "_" + s.py(l);
  std::string name = s.fresh(native ? base + "_tile" : base);
  Value value;
  if (e.plain()) {
    value = kir::load(kir::add(s.ptr_var(e.tensor), s.offset_expr(e.tensor, e.index)),
                      s.mask_of(e.index));
  } else {
    Value offset, mask = s.mask_of(e.dims);
    for (size_t i = 0; i < at.size(); ++i) {
      Value term = kir::mul(at[i].first, s.stride_var(e.tensor, i));
      offset = offset ? kir::add(offset, term) : term;
      mask = kir::and_(mask, at[i].second);
    }
    value = kir::load(kir::add(s.ptr_var(e.tensor), offset), mask);
  }
  // Inputs may be float16/bfloat16: compute in float32. Integer inputs (int8 to int64) are
  // whole numbers in int64. tl.dot takes its operands as they are and accumulates in float32.
  if (e.tensor->kind == ir::SymbolKind::In && e.tensor->is_int)
    value = kir::cast(value, kir::Scalar::I64);
  else if (e.tensor->kind == ir::SymbolKind::In && !native)
    value = kir::cast(value, kir::Scalar::F32);
  Value v = s.let(body, name, value);
  s.cache.back()[key] = v;
  return v;
}

// ---- expressions --------------------------------------------------------------------------

Value lower_expr(LowerState& s, const ir::Expr& e, Body& body) {
  switch (e.kind) {
  case ir::ExprKind::Const:
    return kir::float_imm(static_cast<const ir::Const&>(e).value);
  case ir::ExprKind::ScalarIn:
    return s.ref(s.py(static_cast<const ir::ScalarIn&>(e).symbol));
  case ir::ExprKind::Len: {
    // A size is a whole number: an integer argument (converted where a number is wanted).
    Value size = s.ref(s.py.size(static_cast<const ir::Len&>(e).label));
    return s.wide_whole ? kir::cast(size, kir::Scalar::I64) : size;
  }
  case ir::ExprKind::ProgramId:
    return kir::program_id(static_cast<const ir::ProgramId&>(e).axis);
  case ir::ExprKind::LabelValue:
    // The label's index where the kernel is: a loop index, or a tile's index tensor.
    if (s.wide_whole)
      return kir::cast(s.bind[static_cast<const ir::LabelValue&>(e).label].back().idx,
                       kir::Scalar::I64);
    return s.bind[static_cast<const ir::LabelValue&>(e).label].back().idx;
  case ir::ExprKind::Access:
    return load(s, static_cast<const ir::Access&>(e), body);
  case ir::ExprKind::Unary: {
    auto& u = static_cast<const ir::Unary&>(e);
    Value a = u.is_int() ? whole(s, *u.a, body) : number(s, *u.a, body);
    if (u.op == ir::UnOp::Plus) return a;
    return shallow(s, kir::neg(a), body);
  }
  case ir::ExprKind::Binary:
    return binary(s, static_cast<const ir::Binary&>(e), body);
  case ir::ExprKind::Call:
    return call(s, static_cast<const ir::Call&>(e), body);
  case ir::ExprKind::Reduce: {
    if (auto it = s.hoisted.find(&e); it != s.hoisted.end()) return it->second;
    if (auto hit = s.cached(s.reduction_key(e))) return *hit;
    if (in_online_loop(s, e) && lower_online(s, body))
      if (auto hit = s.cached(s.reduction_key(e))) return *hit;
    auto& r = static_cast<const ir::Reduce&>(e);
    Value v = lower_reduce(s, r.op, {r.a}, r.rvar, e, body);
    s.cache.back()[s.reduction_key(e)] = v;
    return v;
  }
  case ir::ExprKind::Dot: {
    if (auto it = s.hoisted.find(&e); it != s.hoisted.end()) return it->second;
    if (auto hit = s.cached(s.reduction_key(e))) return *hit;
    if (in_online_loop(s, e) && lower_online(s, body))
      if (auto hit = s.cached(s.reduction_key(e))) return *hit;
    auto& d = static_cast<const ir::Dot&>(e);
    Value v = on_tensor_cores(s, d)
                  ? lower_dot(s, d, body)
                  : lower_reduce(s, ir::ReduceOp::Sum, {d.a, d.b}, d.rvar, e, body);
    s.cache.back()[s.reduction_key(e)] = v;
    return v;
  }
  case ir::ExprKind::Reshape:
    // Label alignment already broadcasts: reshape changes no value.
    return lower_expr(s, *static_cast<const ir::Reshape&>(e).a, body);
  }
  throw InternalError("lower: unknown expression kind");
}

// A comparison counts as 0 or 1 where a number is wanted (Triton cannot negate or reduce an
// int1 tensor).
Value numeric(Value v) {
  if (v->type.scalar != kir::Scalar::I1) return v;
  return kir::cast(v, kir::Scalar::F32);
}

// A whole number where a number is wanted is converted: a literal to a float literal (as it was
// lowered before whole numbers existed), any other to float32.
Value number(LowerState& s, const ir::Expr& e, Body& body) {
  Value v = lower_expr(s, e, body);
  if (!e.is_int()) return numeric(v);
  if (v->kind == kir::ExprKind::Int) return kir::float_imm(static_cast<double>(v->value_int));
  return v->type.is_float() ? v : kir::cast(v, kir::Scalar::F32);
}

// A whole number: literals are lowered as numbers (`1.0`), so one in an integer computation is
// made an integer literal again.
Value whole(LowerState& s, const ir::Expr& e, Body& body) {
  if (const auto* c = e.as<ir::Const>()) return kir::int_imm(static_cast<long long>(c->value));
  return lower_expr(s, e, body);
}

// A value stored over tensorized dimensions it does not vary along (`f[u] = rsum(A[n], n)`
// with u tensorized) is broadcast to the tile first: an atomic store does not broadcast (and
// the interpreter's atomics mishandle tl.broadcast_to's stride-0 view, so add zeros).
Value broadcast(const LowerState& s, Value value, const ir::Expr& e, const ir::Labels& dims) {
  for (Label l : dims)
    if (s.tensorized(l) && s.layout.axis_of(l) >= 0 && !ir::contains(e.dims, l))
      return kir::add(value, kir::full(s.layout.shape_of(dims), 0.0));
  return value;
}

} // namespace dtc::lowering
