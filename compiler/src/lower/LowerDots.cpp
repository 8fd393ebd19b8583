// Stage 8 of lowering a Func: rdot on the tensor cores. rdot(a, b, r) becomes tl.dot when r and
// both other labels are tensorized: operand tiles loaded straight in [i, r] and [r, j] order
// (two inputs in their own dtype, computed operands in the inputs' dtype under the default
// precision), an accumulator carried through r's loop unless r is one whole tile, and the
// relayout of input operands (k-contiguous copies) recorded for the wrapper. Before the body is
// built (plan_loop_tiles), a label that only such products reduce over, with input tiles for
// operands, leaves the layout's axes for its loop tiles: the products are then 2-D to the
// store, which Triton's warp specialization (warp_specialize, the product's loop) needs.
#include "lower/LowerState.h"

#include "lower/Names.h"
#include <functional>

namespace dtc::lowering {
namespace {

struct DotAxes {
  Label i, j; // result rows and columns
};

// rdot(a, b, r) maps to tl.dot when r and both other labels are tensorized, a varies along
// {i, r} and b along {r, j}. Anything else runs as a multiply-and-sum reduction.
std::optional<DotAxes> dot_axes(const LowerState& s, const ir::Dot& d) {
  // Labels without a tensor axis, or with an axis of one (`block(b:1)`), are one index in each
  // program instance: a batch, a head.
  auto tiled = [&](const ir::Labels& dims) {
    ir::Labels out;
    for (Label l : dims)
      if (s.layout.has_tile(l) && !s.layout.width_of_axis(l).is_one()) out.push_back(l);
    return out;
  };
  ir::Labels a = tiled(d.a->dims), b = tiled(d.b->dims);
  if (!s.tensorized(d.rvar) || a.size() != 2 || b.size() != 2) return std::nullopt;
  if (!ir::contains(a, d.rvar) || !ir::contains(b, d.rvar)) return std::nullopt;
  Label i = a[0] == d.rvar ? a[1] : a[0];
  Label j = b[0] == d.rvar ? b[1] : b[0];
  if (i == j || i == d.rvar || j == d.rvar || !s.tensorized(i) || !s.tensorized(j))
    return std::nullopt;
  if (s.layout.axis_of(i) < 0 || s.layout.axis_of(j) < 0) return std::nullopt;
  return DotAxes{i, j};
}

/// The first input tensor read by rdot `d`, else by the kernel's definition; null if none.
const ir::Symbol* first_input(const LowerState& s, const ir::Dot& d) {
  struct Find : ir::IRVisitor {
    const ir::Symbol* found = nullptr;
    void visit(const ir::Access& e) override {
      if (!found && e.tensor->kind == ir::SymbolKind::In && !e.tensor->is_int) found = e.tensor;
      ir::IRVisitor::visit(e);
    }
  } find;
  d.accept(find);
  if (!find.found) s.def.value->accept(find);
  return find.found;
}

/// relayout(auto) copies float32 tl.dot inputs of at least this many elements
/// (schedule/Relayout.cpp says why).
constexpr long long kRelayoutMinElements = 65536;

/// The `input_precision` tl.dot is given: none for TF32, Triton's default.
std::string precision(const LowerState& s) {
  if (!s.fs.precision || *s.fs.precision == "tf32") return "";
  return *s.fs.precision;
}

// A layout-shaped operand varying along {p, q} as a 2-D [p, q] tensor.
Value as_matrix(const LowerState& s, Value value, Label p, Label q) {
  kir::Extent wp = s.layout.width_of_axis(p), wq = s.layout.width_of_axis(q);
  bool in_order = s.layout.axis_of(p) < s.layout.axis_of(q);
  if (s.layout.axes.size() == 2) return in_order ? value : kir::trans(value);
  Value m = kir::reshape(value, in_order ? kir::Shape{wp, wq} : kir::Shape{wq, wp});
  return in_order ? m : kir::trans(m);
}

void check_dot_sizes(LowerState& s, const ir::Dot& d, const DotAxes& ax) {
  for (Label l : {ax.i, ax.j, d.rvar}) {
    kir::Extent w = s.layout.width_of_axis(l);
    if (w.param.empty() && w.n < 16)
      s.diags.error("dot-tensor-too-small",
                    s.fs.where.count("tensorize") ? s.fs.where.at("tensorize") : d.loc,
                    "in `" + s.func->name + "`: rdot over `" + d.rvar->name +
                        "` runs on tl.dot, "
                        "which needs tensors of at least 16 along each dimension, but `" +
                        l->name + "` has " + std::to_string(w.n) +
                        "; raise its tensor size (or block size) to 16 or more");
  }
}

/// Whether operand `e` is an input's tile, loaded straight from memory.
bool input_tile(const ir::ExprPtr& e) {
  auto* access = e->as<ir::Access>();
  return access && access->tensor->kind == ir::SymbolKind::In && !access->tensor->is_int &&
         access->plain();
}

/// Whether rdot `d` runs on tl.dot with both operands input tiles.
bool on_input_tiles(const LowerState& s, const ir::Dot& d) {
  return input_tile(d.a) && input_tile(d.b) && !s.is_split(d.rvar) && dot_axes(s, d).has_value();
}

/// The labels the values of an expression vary along, except the reduction labels of products
/// on input tiles (on_input_tiles), inside whose operands no value of the layout is made.
struct LabelsOfValues : ir::IRVisitor {
  LabelsOfValues(const LowerState& state, bool tiles) : s(state), loop_tiles(tiles) {}
  const LowerState& s;
  bool loop_tiles; // whether a product on input tiles may keep its reduction label off the axes
  std::set<Label> varying;  // labels some value varies along
  std::set<Label> products; // reduction labels of products on input tiles
  void note(const ir::Expr& e) { varying.insert(e.dims.begin(), e.dims.end()); }
  void visit(const ir::Const& e) override { note(e); }
  void visit(const ir::ScalarIn& e) override { note(e); }
  void visit(const ir::Len& e) override { note(e); }
  void visit(const ir::ProgramId& e) override { note(e); }
  void visit(const ir::LabelValue& e) override { note(e); }
  void visit(const ir::Access& e) override {
    note(e);
    ir::IRVisitor::visit(e);
  }
  void visit(const ir::Unary& e) override {
    note(e);
    ir::IRVisitor::visit(e);
  }
  void visit(const ir::Binary& e) override {
    note(e);
    ir::IRVisitor::visit(e);
  }
  void visit(const ir::Call& e) override {
    note(e);
    ir::IRVisitor::visit(e);
  }
  void visit(const ir::Reduce& e) override {
    note(e);
    ir::IRVisitor::visit(e);
  }
  void visit(const ir::Reshape& e) override {
    note(e);
    ir::IRVisitor::visit(e);
  }
  void visit(const ir::Dot& d) override {
    note(d);
    if (!loop_tiles || !on_input_tiles(s, d)) return ir::IRVisitor::visit(d);
    products.insert(d.rvar);
    for (const ir::ExprPtr& operand : {d.a, d.b})
      for (Label l : operand->dims)
        if (l != d.rvar) varying.insert(l);
  }
};

/// warp_specialize(r): the loop of product `d` over r is specialized under the wrapper's flags
/// (both operands through tensor descriptors, 16-bit floats), where Triton can do it; else the
/// reason it cannot, which lowering reports if no loop is specialized.
void warp_specialize(LowerState& s, const ir::Dot& d, const DotOnCores& o, kir::Stmt& loop) {
  DTC_ASSERT(loop.kind == kir::StmtKind::For, "a product's loop expected");
  const std::string r = d.rvar->name;
  if (!s.layout.loop_only(d.rvar)) {
    const ir::ExprPtr computed = !input_tile(o.lhs) ? o.lhs : !input_tile(o.rhs) ? o.rhs : nullptr;
    s.warp_specialize_refused =
        (computed
             ? "the product's operand " + ir::to_dt(*computed) + " is computed in the kernel"
             : "`" + r + "` indexes values of the kernel besides the operands of " + ir::to_dt(d)) +
        "; Triton specializes a product of two input tiles whose result the kernel uses as a "
        "matrix";
    return;
  }
  // The tile's rows and columns as tl.dot sees them (literals: the operands are descriptor
  // tiles, checked below).
  const kir::Extent rows = s.layout.width_of_axis(o.i), cols = s.layout.width_of_axis(o.j);
  if (rows.param.empty() && rows.n < 64) {
    s.warp_specialize_refused =
        "the product's tiles have " + std::to_string(rows.n) + " rows (`" + o.i->name +
        "`), and Triton specializes products on the H100's warpgroup instructions, which take "
        "64 rows or more (on fewer it leaves the loop as it is)";
    return;
  }
  if (rows.param.empty() && rows.n < 16 * s.fs.warps()) {
    s.warp_specialize_refused = "the product's tiles have " + std::to_string(rows.n) + " rows (`" +
                                o.i->name + "`), and " + std::to_string(s.fs.warps()) +
                                " warps multiply tiles of " + std::to_string(16 * s.fs.warps()) +
                                " rows or more (16 a warp); use " +
                                std::to_string(16 * s.fs.warps()) + " rows or `num_warps(4)`";
    return;
  }
  if (rows.param.empty() && cols.param.empty() && rows.n == 64 && cols.n == 256) {
    s.warp_specialize_refused = "Triton 3.6 does not compile a warp-specialized product of 64 by "
                                "256 tiles (`" +
                                o.i->name + "` by `" + o.j->name +
                                "`); use 128 rows or at most 128 columns";
    return;
  }
  Value flag;
  for (const ir::ExprPtr& operand : {o.lhs, o.rhs}) {
    const auto& access = *operand->as<ir::Access>();
    if (access.index.size() != 2) {
      s.warp_specialize_refused = "`" + access.tensor->name + "` has " +
                                  std::to_string(access.index.size()) +
                                  " dimensions, and Triton specializes products of 2-D "
                                  "descriptors' tiles";
      return;
    }
    if (!descriptor_qualifies(s, access)) {
      s.warp_specialize_refused = "`" + access.tensor->name +
                                  "` is not read through a tensor descriptor (name it in `tma`, "
                                  "in tiles of 16 to 256 along each dimension)";
      return;
    }
    flag = kir::and_(flag, s.ref(s.tma_flag(access.tensor)));
    flag = kir::and_(flag, s.ref(s.half_flag(access.tensor)));
  }
  // Only where Triton's warp specialization is known to be right (not on Hopper: see
  // _dt_warp_specialize); elsewhere the loop runs as it is.
  loop.warp_specialize = kir::and_(flag, s.ref(s.warp_specialize_flag()));
  s.warp_specialized = true;
}

} // namespace

void plan_loop_tiles(LowerState& s) {
  // The online loop (LowerOnline.cpp) keeps every label on an axis.
  if (s.online) return;
  LabelsOfValues labels(s, /*tiles=*/true);
  s.def.value->accept(labels);
  // What else the kernel computes: fused producers, and Funcs it stores besides its own. A
  // producer computed into a temporary (LowerProducers.cpp) is computed on the kernel's axes,
  // over every one of its dimensions and reduction labels, a constant's too (`f0[m, k] = 1`
  // fused into `rdot(A[m, k], B[k, n], k) + f0[m, n]` fills its temporary along k).
  LabelsOfValues temporaries(s, /*tiles=*/false);
  for (const auto& [f, at] : s.materialized) {
    const ir::FuncDef& fd = s.prog.def(f);
    fd.value->accept(temporaries);
    temporaries.varying.insert(fd.dims.begin(), fd.dims.end());
    std::function<void(const ir::Expr&)> reductions = [&](const ir::Expr& e) {
      if (const auto* r = e.as<ir::Reduce>()) temporaries.varying.insert(r->rvar);
      if (const auto* d = e.as<ir::Dot>()) temporaries.varying.insert(d->rvar);
      for (const ir::Expr* c : ir::children(e))
        reductions(*c);
    };
    reductions(*fd.value);
  }
  labels.varying.insert(temporaries.varying.begin(), temporaries.varying.end());
  for (const ir::Symbol* f : s.stored)
    s.prog.def(f).value->accept(labels);
  std::vector<Axis> kept;
  for (const Axis& a : s.layout.axes) {
    bool loop_only = labels.products.count(a.label) && !labels.varying.count(a.label) &&
                     !ir::contains(s.def.dims, a.label);
    (loop_only ? s.layout.loop_tiles : kept).push_back(a);
  }
  s.layout.axes = std::move(kept);
}

bool on_tensor_cores(const LowerState& s, const ir::Dot& d) {
  return dot_axes(s, d).has_value();
}

std::optional<DotOnCores> orient_dot(LowerState& s, const ir::Dot& d) {
  DotAxes ax = *dot_axes(s, d);
  // tl.dot yields an [i, j] matrix; the layout may hold j before i (`c[n, m] = rdot(A[m, k],
  // B[k, n], k)`). Then compute the transposed product b^T a^T, whose operands load in the
  // order tl.dot wants at no cost, instead of transposing the result.
  DotOnCores o{ax.i, ax.j, d.a, d.b};
  if (s.layout.axis_of(o.i) > s.layout.axis_of(o.j)) {
    std::swap(o.lhs, o.rhs);
    std::swap(o.i, o.j);
  }
  check_dot_sizes(s, d, {o.i, o.j});
  if (s.diags.has_errors()) return std::nullopt;
  s.kernel.dot_precision = s.fs.precision.value_or("tf32");
  return o;
}

Value dot_step(LowerState& s, const ir::Dot& d, const DotOnCores& o, Body& inner, Value acc) {
  Label r = d.rvar;
  // A copy: lowering the operands below may push bindings of r (a nested rdot over r) and
  // move this vector.
  const Value mask = s.bind[r].back().mask;
  // Two input tensors go to tl.dot in their own dtype (float16 on the tensor cores); anything
  // computed is float32, and tl.dot needs both operands in one dtype. An integer input is a
  // whole number, converted to a number like any computed operand (tl.dot takes no int64).
  auto is_input = [](const ir::ExprPtr& e) {
    auto* access = e->as<ir::Access>();
    return access && access->tensor->kind == ir::SymbolKind::In && !access->tensor->is_int;
  };
  bool native = is_input(d.a) && is_input(d.b);
  // Operands computed in the kernel take the inputs' dtype under the default precision: with
  // float16/bfloat16 inputs the product runs on 16-bit tensor cores, as for two inputs, not in
  // TF32; with float32 inputs the cast is a no-op. `precision(ieee)` and `tf32x3` keep them in
  // float32.
  std::string narrow;
  if (!native && s.kernel.dot_precision == "tf32")
    if (const ir::Symbol* in = first_input(s, d); in) narrow = s.ptr_of(in);
  auto operand = [&](const ir::ExprPtr& e, Label p, Label q) {
    Value v;
    auto* input = e->as<ir::Access>();
    if (input && (input->tensor->kind != ir::SymbolKind::In || input->tensor->is_int))
      input = nullptr;
    if (!native && input) {
      // An input beside a computed operand: its tile straight from memory, in the operand dtype.
      if (Value tile = load_tile(s, *input, p, q, inner))
        return s.let(inner, s.fresh("dot_" + s.py(input->tensor)),
                     narrow.empty() ? kir::cast(tile, kir::Scalar::F32)
                                    : kir::cast(tile, kir::Scalar::Elem, narrow));
    }
    if (native) {
      auto* access = e->as<ir::Access>();
      std::string relayout = s.fs.relayout.value_or("auto");
      if (s.kernel.dot_precision != "ieee" && access->index.size() == 2 && relayout != "none") {
        s.kernel.k_contiguous_min_elements = relayout == "auto" ? kRelayoutMinElements : 0;
        size_t axis = access->index[0] == r ? 0 : 1;
        std::pair<std::string, size_t> need{s.py(access->tensor), axis};
        auto& list = s.kernel.k_contiguous_inputs;
        if (std::find(list.begin(), list.end(), need) == list.end()) list.push_back(need);
      }
      if (Value tile = load_tile(s, *access, p, q, inner)) return tile;
      v = load(s, *access, inner, /*native=*/true); // masked with other=0 already
    } else {
      v = number(s, *e, inner);
      if (mask) v = kir::select(mask, v, kir::float_imm(0.0));
      if (!narrow.empty()) v = kir::cast(v, kir::Scalar::Elem, narrow);
    }
    auto* access = e->as<ir::Access>();
    std::string name = s.fresh(access ? "dot_" + s.py(access->tensor) : std::string("dot_operand"));
    return s.let(inner, name, as_matrix(s, v, p, q));
  };
  Value a = operand(o.lhs, o.i, r);
  Value b = operand(o.rhs, r, o.j);
  return kir::dot(a, b, acc, precision(s));
}

Value dot_matrix(const LowerState& s, Value v, const ir::Labels& dims, Label i, Label j) {
  auto width = [&](Label l) {
    return ir::contains(dims, l) ? s.layout.width_of_axis(l) : kir::Extent{};
  };
  if (s.layout.axes.size() == 2) return v; // [i, j] already, i first
  return kir::reshape(v, {width(i), width(j)});
}

Value lower_dot(LowerState& s, const ir::Dot& d, Body& body) {
  std::optional<DotOnCores> o = orient_dot(s, d);
  if (!o) return kir::float_imm(0.0);
  Label r = d.rvar;
  body.push_back(kir::Stmt::comment("rdot over " + r->name + " on tl.dot: " + ir::to_dt(d)));
  std::string prefix = reduction_prefix(s, r);
  bool full_r = s.whole_tile(d, r);
  kir::Extent wi = s.layout.width_of_axis(o->i), wj = s.layout.width_of_axis(o->j);
  std::string acc_name = s.fresh(prefix + s.py(r) + "_acc");
  Value acc;
  if (!full_r) acc = s.let(body, acc_name, kir::full({wi, wj}, 0.0));
  Body* inner = emit_dim(s, r, body, loop_prefix(s, r, prefix), !s.splits(d));
  if (!full_r && s.fs.warp_specialize == r) warp_specialize(s, d, *o, *body.back());
  // Values computed inside a loop are not visible after it; without a loop they are.
  if (!full_r) s.cache.emplace_back();
  Value product = dot_step(s, d, *o, *inner, acc);
  if (!full_r) s.cache.pop_back();
  std::string result = s.fresh(prefix + s.py(r) + "_dot");
  kir::Shape shape = s.layout.shape_of({o->i, o->j});
  // In the layout's shape; a layout of the two axes (the reduction a loop tile) is the
  // product's own.
  auto in_layout = [&](Value v) {
    return shape == kir::Shape{wi, wj} ? v : kir::reshape(v, shape);
  };
  Value out;
  if (full_r) {
    out = s.let(body, result, in_layout(product));
  } else {
    s.let(*inner, acc_name, product);
    out = s.let(body, result, in_layout(s.ref(acc_name)));
  }
  s.bind[r].pop_back();
  return out;
}

} // namespace dtc::lowering
