#include "lower/LowerFunc.h"

#include "ir/Builtins.h"
#include "ir/IRVisitor.h"
#include "lower/Names.h"

#include <cctype>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

namespace dtc {

long long next_power_of_two(long long v) {
  long long p = 1;
  while (p < v)
    p <<= 1;
  return p;
}

namespace {

using ir::Label;
using kir::ExprPtr;
using kir::Stmt;
using kir::StmtPtr;
using Value = kir::ExprPtr;

// Python's parser allows 200 nested parentheses and Triton's code generator recurses through
// the expression: a value nested deeper than this is bound to a name first.
constexpr int kMaxValueDepth = 12;

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

/// How a dimension label is indexed at the current point of the kernel.
struct Binding {
  ExprPtr idx;  // int64 scalar or layout-shaped tensor
  ExprPtr mask; // null when every index is in range by construction
  // For a tensorized label: the same indices and mask as 1-D vectors, from which tl.dot operands
  // are loaded directly as 2-D tiles.
  ExprPtr vec, vec_mask;
};

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

kir::ReduceOp kernel_op(ir::ReduceOp op) {
  return op == ir::ReduceOp::Sum   ? kir::ReduceOp::Sum
         : op == ir::ReduceOp::Max ? kir::ReduceOp::Max
                                   : kir::ReduceOp::Min;
}

double identity_of(ir::ReduceOp op) {
  return op == ir::ReduceOp::Sum   ? 0.0
         : op == ir::ReduceOp::Max ? -std::numeric_limits<double>::infinity()
                                   : std::numeric_limits<double>::infinity();
}

/// A builtin's Triton form as kernel IR. Most are one call `fn(args)`; the rest are spelled out.
ExprPtr builtin_expr(const Builtin& b, const std::vector<ExprPtr>& a) {
  std::string_view name = b.name;
  if (name == "erfc") return kir::sub(kir::float_imm(1.0), kir::call("tl.erf", {a[0]}));
  if (name == "reciprocal") return kir::binary(kir::BinOp::Div, kir::float_imm(1.0), a[0]);
  if (name == "square") return kir::mul(a[0], a[0]);
  if (name == "relu") return kir::call("tl.maximum", {a[0], kir::float_imm(0.0)});
  if (name == "where") {
    ExprPtr cond = a[0]->type.scalar == kir::Scalar::I1
                       ? a[0]
                       : kir::binary(kir::BinOp::Ne, a[0], kir::float_imm(0.0));
    return kir::select(cond, a[1], a[2]);
  }
  // The remaining patterns are `fn({0}, {1}, ...)`.
  std::string pattern = b.triton;
  std::string fn = pattern.substr(0, pattern.find('('));
  std::string expected = fn + "(";
  for (size_t i = 0; i < a.size(); ++i)
    expected += (i ? ", {" : "{") + std::to_string(i) + "}";
  DTC_ASSERT(pattern == expected + ")", "builtin " + std::string(name) + " has no kernel IR form");
  return kir::call(fn, a);
}

class FuncLowering {
public:
  FuncLowering(const ir::Program& p, const KernelPlan& plan, const ir::Symbol* f,
               DiagnosticEngine& d)
      : prog_(p), fs_(plan.of(f)), split_(plan.split_of(f)), materialized_(plan.materialized_of(f)),
        func_(f), def_(p.def(f)), diags_(d) {}

  kir::Kernel run() {
    kernel_.name = names::kernel(func_);
    kernel_.num_warps = fs_.warps();
    kernel_.num_stages = fs_.stages();
    kernel_.doc = func_->name + dims_text(def_.dims) + " = " + ir::to_dt(*def_.value);
    check_supported();
    plan_layout();
    add_params();
    std::vector<StmtPtr>* body = &kernel_.body;
    emit_program_mapping(*body);
    emit_aranges(*body);
    body = emit_output_loops(*body);
    Value v = numeric(lower(*def_.value, *body));
    bool scalar_store = true;
    for (Label l : def_.dims)
      scalar_store &= !tensorized(l);
    // With no tensorized output dimension the value is a [1, ..., 1] tensor; store a scalar. A
    // value of constants and scalar inputs is one already (a Python number has no shape).
    Value value =
        scalar_store && !axes_.empty() && !is_scalar_value(*def_.value) ? kir::reshape(v, {}) : v;
    if (!scalar_store) value = broadcast(value, *def_.value, def_.dims);
    Value stored = let(*body, func_->py_name, value);
    StmtPtr store = Stmt::store(kir::add(ptr_var(func_), offset_expr(func_, def_.dims)), stored,
                                mask_of(def_.dims));
    if (split_ && !split_->part) {
      // atomic(k): combine this block's partial result into the output.
      ir::ReduceOp op = split_->op;
      store->atomic = op == ir::ReduceOp::Sum   ? kir::Atomic::Add
                      : op == ir::ReduceOp::Max ? kir::Atomic::Max
                                                : kir::Atomic::Min;
      kernel_.output_init = ir::python_float(identity_of(op));
    }
    body->push_back(std::move(store));
    kernel_.index_slack = index_slack();
    return std::move(kernel_);
  }

private:
  static std::string dims_text(const ir::Labels& dims) {
    std::string s = "[";
    for (size_t i = 0; i < dims.size(); ++i)
      s += (i ? ", " : "") + dims[i]->name;
    return s + "]";
  }

  // SplitReductions leaves no blocked reduction label but the one it records.
  void check_supported() {
    for (Label l : schedulable_labels(prog_, fs_))
      DTC_ASSERT(ir::contains(def_.dims, l) || !fs_.block_of(l) || is_split(l),
                 "blocked reduction label reached lowering unsplit");
  }

  // ---- names and their types ----------------------------------------------------------------

  /// A reference to a bound name (a parameter or a local), typed as last bound.
  Value ref(const std::string& name) const {
    auto it = types_.find(name);
    DTC_ASSERT(it != types_.end(), "kernel name " + name + " read before it is bound");
    return kir::var(name, it->second);
  }

  /// Appends `name = value` to `body` and returns a reference to `name`, which fresh() then
  /// never hands out: a load named after an input (`xi_pid`) must not rebind a map variable.
  Value let(std::vector<StmtPtr>& body, const std::string& name, Value value) {
    used_.insert(name);
    types_[name] = value->type;
    body.push_back(Stmt::assign(name, std::move(value)));
    return ref(name);
  }

  /// `v` in the kernel's index type (kir::kIndexParam), which the wrapper picks per call:
  /// int32 where every index fits (cheaper address arithmetic), else int64; always int64 under
  /// `index(int64)`.
  Value index(Value v) {
    if (fs_.index == "int64") return kir::cast(std::move(v), kir::Scalar::I64);
    if (!types_.count(kir::kIndexParam))
      add_param(kir::kIndexParam, arg(kir::LaunchArg::Kind::Index), int_type(),
                /*constexpr_=*/true);
    return kir::cast(std::move(v), kir::Scalar::Index);
  }

  // The largest literal tile or block width times the largest map split factor.
  long long index_slack() const {
    long long width = 1, factor = 1;
    for (const Axis& a : axes_)
      width = std::max(width, a.width.param.empty() ? a.width.n : 1);
    for (Label l : labels_) {
      if (auto b = fs_.block_of(l)) width = std::max(width, next_power_of_two(*b));
      width = std::max(width, fs_.tensor_of(l));
    }
    for (const MapLevel& lv : map_levels(fs_, prog_))
      factor = std::max(factor, lv.factor);
    return width * factor;
  }

  static kir::Type int_type(kir::Scalar s = kir::Scalar::Int) {
    kir::Type t;
    t.scalar = s;
    return t;
  }

  // ---- layout -------------------------------------------------------------------------------

  struct Axis {
    Label label;
    kir::Extent width; // a literal or a constexpr parameter
  };

  // The blocked reduction label of a split reduction: reduced over its block only.
  bool is_split(Label l) const { return split_ && split_->rvar == l; }
  // Only the definition's top-level reduction is split; a nested reduction over the same label
  // (a fused softmax denominator inside attention's rdot) still covers the whole dimension.
  bool splits(const ir::Expr& e) const { return split_ && &e == def_.value.get(); }
  bool is_part(Label l) const { return split_ && split_->part == l; }

  bool tensorized(Label l) const { return fs_.fully_tensorized(l) || fs_.tensor_of(l) > 1; }

  kir::Extent width_of(Label l) {
    if (fs_.fully_tensorized(l)) {
      if (auto b = fs_.block_of(l)) return {next_power_of_two(*b), ""};
      tiles_.push_back(l);
      return {0, names::tile(l)};
    }
    return {fs_.tensor_of(l), ""};
  }

  void plan_layout() {
    struct DotLabels : ir::IRVisitor {
      std::set<Label>* out;
      void visit(const ir::Dot& d) override {
        out->insert(d.rvar);
        for (Label l : d.a->dims)
          out->insert(l);
        for (Label l : d.b->dims)
          out->insert(l);
        ir::IRVisitor::visit(d);
      }
    } dots;
    dots.out = &dot_labels_;
    def_.value->accept(dots);
    for (Label l : schedulable_labels(prog_, fs_)) {
      if (!tensorized(l)) continue;
      axes_.push_back({l, width_of(l)});
    }
  }

  int axis_of(Label l) const {
    for (size_t i = 0; i < axes_.size(); ++i)
      if (axes_[i].label == l) return static_cast<int>(i);
    return -1;
  }

  // The shape of a value varying along `dims`: the tile width on their axes, 1 elsewhere.
  kir::Shape shape_of(const ir::Labels& dims) const {
    kir::Shape s;
    for (const Axis& a : axes_)
      s.push_back(ir::contains(dims, a.label) ? a.width : kir::Extent{});
    return s;
  }

  Value extent_value(const kir::Extent& x) const {
    return x.param.empty() ? kir::int_imm(x.n) : ref(x.param);
  }

  // ---- parameters ---------------------------------------------------------------------------

  struct Collect : ir::IRVisitor {
    std::vector<const ir::Symbol*> tensors, scalars;
    ir::Labels labels;
    void visit(const ir::Access& e) override {
      if (!std::count(tensors.begin(), tensors.end(), e.tensor)) tensors.push_back(e.tensor);
      labels = ir::union_labels(labels, e.index);
    }
    void visit(const ir::ScalarIn& e) override {
      if (!std::count(scalars.begin(), scalars.end(), e.symbol)) scalars.push_back(e.symbol);
    }
    void visit(const ir::Len& e) override { labels = ir::union_labels(labels, {e.label}); }
  };

  static kir::LaunchArg arg(kir::LaunchArg::Kind kind, const std::string& name = "",
                            size_t axis = 0, size_t rank = 0, long long least = 1) {
    kir::LaunchArg a;
    a.kind = kind;
    a.name = name;
    a.axis = axis;
    a.rank = rank;
    a.least = least;
    return a;
  }

  void add_param(const std::string& name, kir::LaunchArg launch, kir::Type type,
                 bool constexpr_ = false) {
    kernel_.params.push_back({name, constexpr_, type});
    types_[name] = type;
    launch.param = name;
    kernel_.launch.push_back(std::move(launch));
  }

  void add_tensor_params(const ir::Symbol* t, size_t rank) {
    add_tensor_params(names::ptr(t), t->py_name, rank,
                      [&](size_t i) { return names::stride(t, i); });
  }
  // `float32`: the tensor is a float32 temporary, not of the inputs' dtype.
  void add_tensor_params(const std::string& ptr, const std::string& tensor, size_t rank,
                         const std::function<std::string(size_t)>& stride_param,
                         bool float32 = false) {
    kir::Type pointer;
    pointer.scalar = kir::Scalar::Ptr;
    if (!float32) pointer.elem_of = ptr;
    add_param(ptr, arg(kir::LaunchArg::Kind::Tensor, tensor), pointer);
    for (size_t i = 0; i < rank; ++i)
      add_param(stride_param(i), arg(kir::LaunchArg::Kind::Stride, tensor, i, rank), int_type());
  }

  void add_params() {
    Collect c;
    for_each_value(c);
    // Inputs in declaration order, then the Funcs this kernel reads, then the output.
    for (const ir::Symbol* in : prog_.inputs) {
      if (std::count(c.tensors.begin(), c.tensors.end(), in)) add_tensor_params(in, rank_of(in));
      if (std::count(c.scalars.begin(), c.scalars.end(), in))
        add_param(in->py_name, arg(kir::LaunchArg::Kind::Scalar, in->py_name),
                  int_type(kir::Scalar::F32));
    }
    for (const ir::Symbol* t : c.tensors) {
      if (t->kind != ir::SymbolKind::Func) continue;
      size_t rank = prog_.def(t).dims.size();
      if (!materialized(t)) {
        // Computed by a kernel of its own into a float32 tensor (ModulePrinter.cpp).
        add_tensor_params(
            names::ptr(t), t->py_name, rank, [&](size_t i) { return names::stride(t, i); },
            /*float32=*/true);
        continue;
      }
      std::string base = tensor_base(t);
      add_tensor_params(
          base + "_ptr", base, rank, [&](size_t i) { return base + "_stride" + std::to_string(i); },
          /*float32=*/true);
      kir::Temporary scratch{base, {}};
      for (Label l : prog_.def(t).dims)
        scratch.sizes.push_back(l->py_name);
      kernel_.scratch.push_back(std::move(scratch));
    }
    add_tensor_params(func_, def_.dims.size());
    labels_ = ir::union_labels(def_.dims, schedulable_labels(prog_, fs_));
    labels_ = ir::union_labels(labels_, c.labels);
    for (Label l : labels_)
      if (!is_part(l))
        add_param(names::size(l), arg(kir::LaunchArg::Kind::Size, l->py_name), int_type());
    // tl.dot needs at least 16 along each dimension; masks cover the difference. An empty
    // dimension still needs a one-lane tile (tl.arange(0, 0) is invalid); its mask is all
    // false, so an empty reduction yields its identity.
    for (Label l : tiles_)
      add_param(names::tile(l),
                arg(kir::LaunchArg::Kind::Tile, l->py_name, 0, 0, dot_labels_.count(l) ? 16 : 1),
                int_type(), true);
  }

  // Visits the kernel's value and the values of the Funcs it computes into temporaries.
  void for_each_value(ir::IRVisitor& v) const {
    def_.value->accept(v);
    for (const auto& [f, at] : materialized_)
      prog_.def(f).value->accept(v);
  }

  size_t rank_of(const ir::Symbol* in) const {
    struct Rank : ir::IRVisitor {
      const ir::Symbol* t;
      size_t rank = 0;
      void visit(const ir::Access& e) override {
        if (e.tensor == t) rank = e.index.size();
      }
    } r;
    r.t = in;
    for_each_value(r);
    return r.rank;
  }

  // ---- program instances --------------------------------------------------------------------

  void emit_program_mapping(std::vector<StmtPtr>& body) {
    std::vector<MapLevel> levels = map_levels(fs_, prog_);
    if (levels.empty()) return; // one program instance
    body.push_back(Stmt::comment("program instance -> output block (map)"));
    Value pid = let(body, "pid", index(kir::program_id(0)));
    std::map<Label, Value> blocks_var;
    for (Label l : labels_) {
      auto b = fs_.block_of(l);
      if (!b) continue;
      Value size = ref(names::size(l));
      blocks_var[l] =
          let(body, l->py_name + "_blocks",
              *b == 1 ? size
                      : kir::binary(kir::BinOp::FloorDiv, kir::add(size, kir::int_imm(*b - 1)),
                                    kir::int_imm(*b)));
    }
    // Extents of each level, in kernel code and in wrapper code.
    std::map<std::string, long long> split_factor; // ID -> factor
    for (const MapLevel& lv : levels)
      if (lv.factor) split_factor[lv.split_id] = lv.factor;
    std::vector<Value> extent(levels.size());
    std::vector<kir::GridFactor> grid(levels.size());
    for (size_t i = 0; i < levels.size(); ++i) {
      const MapLevel& lv = levels[i];
      if (lv.is_split_inner) {
        extent[i] = kir::int_imm(split_factor[lv.name]);
        grid[i] = {"", split_factor[lv.name]};
      } else {
        long long b = *fs_.block_of(lv.dim);
        // ceil(ceil(size / b) / factor) = ceil(size / (b * factor)) for positive integers.
        grid[i] = {lv.dim->py_name, lv.factor ? b * lv.factor : b};
        if (lv.factor) {
          extent[i] = kir::binary(kir::BinOp::FloorDiv,
                                  kir::add(blocks_var[lv.dim], kir::int_imm(lv.factor - 1)),
                                  kir::int_imm(lv.factor));
        } else {
          extent[i] = blocks_var[lv.dim];
        }
      }
    }
    // Innermost level varies fastest.
    Value stride;
    std::map<std::string, Value> pid_of; // level name -> variable
    for (size_t k = levels.size(); k-- > 0;) {
      const MapLevel& lv = levels[k];
      bool simple = !lv.factor && !lv.is_split_inner;
      std::string var = simple ? lv.dim->py_name + "_block" : lv.name + "_pid";
      Value value = stride ? kir::binary(kir::BinOp::FloorDiv, pid, stride) : pid;
      if (k > 0) value = kir::binary(kir::BinOp::Mod, value, extent[k]);
      pid_of[lv.name] = let(body, var, value);
      stride = stride ? kir::mul(stride, extent[k]) : extent[k];
    }
    // Split dimensions: block index = outer * factor + inner, recursively.
    std::function<Value(const std::string&)> block_index = [&](const std::string& name) {
      for (const MapLevel& lv : levels)
        if (lv.name == name && lv.factor)
          return kir::add(kir::mul(pid_of[name], kir::int_imm(lv.factor)),
                          block_index(lv.split_id));
      return pid_of[name];
    };
    for (const MapLevel& lv : levels)
      if (lv.factor && !lv.is_split_inner)
        let(body, lv.dim->py_name + "_block", block_index(lv.name));
    kernel_.grid = std::move(grid);
    for (Label l : labels_) {
      auto b = fs_.block_of(l);
      if (!b) continue;
      Value block = ref(l->py_name + "_block");
      Value start =
          let(body, l->py_name + "_start", *b == 1 ? block : kir::mul(block, kir::int_imm(*b)));
      let(body, l->py_name + "_end",
          kir::call("tl.minimum", {kir::add(start, kir::int_imm(*b)), ref(names::size(l))}));
    }
  }

  void emit_aranges(std::vector<StmtPtr>& body) {
    if (axes_.empty()) return;
    body.push_back(Stmt::comment("tensor axes: " + axes_text()));
    for (size_t i = 0; i < axes_.size(); ++i) {
      Value range = kir::arange(axes_[i].width);
      if (axes_.size() > 1 && dot_labels_.count(axes_[i].label))
        let(body, axes_[i].label->py_name + "_range", index(range));
      if (axes_.size() > 1) {
        std::vector<bool> keep(axes_.size(), false);
        keep[i] = true;
        range = kir::expand(range, keep);
      }
      let(body, axes_[i].label->py_name + "_arange", index(range));
    }
  }

  std::string axes_text() const {
    std::string s;
    for (const Axis& a : axes_)
      s += (s.empty() ? "" : ", ") + a.label->name + ":" +
           (a.width.param.empty() ? std::to_string(a.width.n) : a.width.param);
    return s;
  }

  Value start_of(Label l) const {
    return fs_.block_of(l) ? ref(l->py_name + "_start") : kir::int_imm(0);
  }
  Value end_of(Label l) const {
    return fs_.block_of(l) ? ref(l->py_name + "_end") : ref(names::size(l));
  }

  // Emits the loop (or whole-tile index) of one dimension; returns the body to continue in.
  // `whole` walks the entire dimension (a reduction), ignoring the dimension's block.
  std::vector<StmtPtr>* emit_dim(Label l, std::vector<StmtPtr>& body, const std::string& prefix,
                                 bool whole) {
    std::string base = prefix + l->py_name;
    Binding b;
    if (is_part(l)) {
      // One partial result per block of the split reduction label.
      // A map split can run past the last block; those instances must not write.
      std::string k = split_->rvar->py_name;
      b.idx = ref(k + "_block");
      b.mask = kir::lt(b.idx, ref(k + "_blocks"));
      bind_[l].push_back(b);
      return &body;
    }
    std::vector<StmtPtr>* inner = &body;
    bool blocked = fs_.block_of(l).has_value() && !whole;
    Value start = whole ? kir::int_imm(0) : start_of(l);
    Value end = whole ? ref(names::size(l)) : end_of(l);
    bool no_loop = fs_.fully_tensorized(l) && (blocked || !fs_.block_of(l));
    Value iter;
    if (no_loop) {
      Value arange = ref(l->py_name + "_arange");
      b.idx = blocked ? let(body, base + "_idx", kir::add(start, arange)) : arange;
    } else {
      // A whole-dimension walk of a blocked, fully tensorized label steps by its tile width.
      Value step = fs_.fully_tensorized(l) ? extent_value(axes_[axis_of(l)].width)
                                           : kir::int_imm(fs_.tensor_of(l));
      // An earlier loop of this name (a reduction computed before this dimension's loop) may
      // have stepped through another integer type; Triton would take the name, bound before
      // this loop and again by it, for a loop-carried value of one type.
      kir::Type type = kir::loop_var_type(*start, *end, *step);
      std::string var = base + "_iter";
      if (auto it = types_.find(var); it != types_.end() && !(it->second == type)) var = fresh(var);
      StmtPtr loop = Stmt::loop(var, start, end, step);
      used_.insert(var);
      types_[var] = type;
      iter = ref(var);
      inner = &loop->body;
      body.push_back(std::move(loop));
      if (tensorized(l))
        b.idx = let(*inner, base + "_idx", kir::add(iter, ref(l->py_name + "_arange")));
      else if (blocked)
        b.idx = iter; // int64 already: it starts at the int64 block start
      else
        b.idx = let(*inner, base + "_idx", index(iter));
    }
    if (tensorized(l)) {
      b.mask = let(*inner, base + "_mask", kir::lt(b.idx, end));
      if (axes_.size() > 1 && dot_labels_.count(l)) {
        // 1-D twins for tl.dot operand tiles (dead-code elimination drops them if unused).
        Value range = ref(l->py_name + "_range");
        Value origin = no_loop ? (blocked ? start : nullptr) : iter;
        b.vec = let(*inner, base + "_vec", origin ? kir::add(origin, range) : range);
        b.vec_mask = let(*inner, base + "_vec_mask", kir::lt(b.vec, end));
      } else if (axes_.size() == 1) {
        b.vec = b.idx;
        b.vec_mask = b.mask;
      }
    }
    bind_[l].push_back(b);
    return inner;
  }

  kir::Extent width_of_axis(Label l) const {
    int ax = axis_of(l);
    DTC_ASSERT(ax >= 0, "tensorized label without an axis");
    return axes_[ax].width;
  }

  std::vector<StmtPtr>* emit_output_loops(std::vector<StmtPtr>& body) {
    // One value-cache scope per loop level: what is computed at a level is reused inside it.
    std::vector<StmtPtr>* cur = &body;
    ir::Labels bound;
    cache_.emplace_back();
    hoist(bound, *cur, *def_.value);
    for (Label l : def_.dims) {
      cur = emit_dim(l, *cur, "", false);
      bound.push_back(l);
      cache_.emplace_back();
      materialize_at(l, *cur);
      hoist(bound, *cur, *def_.value);
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
  void hoist(const ir::Labels& bound, std::vector<StmtPtr>& body, const ir::Expr& root) {
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
          if (!rvar || hoisted_.count(&e)) return;
          std::vector<std::pair<Label, const ir::Expr*>> borrowed;
          for (Label l : e.dims) {
            auto it = std::find_if(enclosing.rbegin(), enclosing.rend(),
                                   [&](const Enclosing& x) { return x.rvar == l; });
            if (it == enclosing.rend()) {
              if (!ir::contains(bound, l)) return;
              continue;
            }
            if (!tensorized(l) || !whole_tile(*it->e, l) || (bind_.count(l) && !bind_[l].empty()))
              return;
            borrowed.push_back({l, it->e});
          }
          for (const auto& [l, outer] : borrowed)
            emit_dim(l, body, loop_prefix(l, reduction_prefix(l)), !splits(*outer));
          hoisted_[&e] = lower(e, body);
          for (const auto& [l, outer] : borrowed)
            bind_[l].pop_back();
        };
    walk(root, {});
  }

  // ---- memory accesses ----------------------------------------------------------------------

  // A Func computed into a global temporary by this kernel (partial fusion) is `<f>_fuse`.
  bool materialized(const ir::Symbol* t) const {
    for (const auto& [f, at] : materialized_)
      if (f == t) return true;
    return false;
  }
  std::string tensor_base(const ir::Symbol* t) const {
    return materialized(t) ? t->py_name + "_fuse" : t->py_name;
  }
  std::string ptr_of(const ir::Symbol* t) const { return tensor_base(t) + "_ptr"; }
  Value ptr_var(const ir::Symbol* t) const { return ref(ptr_of(t)); }
  Value stride_var(const ir::Symbol* t, size_t i) const {
    return ref(tensor_base(t) + "_stride" + std::to_string(i));
  }

  Value offset_expr(const ir::Symbol* t, const ir::Labels& index) {
    Value s;
    for (size_t i = 0; i < index.size(); ++i) {
      Value term = kir::mul(bind_[index[i]].back().idx, stride_var(t, i));
      s = s ? kir::add(s, term) : term;
    }
    return s;
  }

  // Computes a Func fused at level `at` into its temporary, for the current iteration of `at`.
  void materialize(const ir::Symbol* f, Label at, std::vector<StmtPtr>& body) {
    const ir::FuncDef& fd = prog_.def(f);
    body.push_back(Stmt::comment(f->name + " fused at " + at->name + ": computed into " +
                                 tensor_base(f) + " for this " + at->name + ", read back below"));
    size_t pos = std::find(fd.dims.begin(), fd.dims.end(), at) - fd.dims.begin();
    std::vector<StmtPtr>* cur = &body;
    std::vector<Label> pushed;
    cache_.emplace_back();
    std::set<Label> whole = read_across(f);
    // Its reductions run once per iteration of the outermost level binding their labels, as the
    // kernel's own do: softmax's row max in `e = exp(A - rmax(A))` once per row, not per tile.
    ir::Labels bound(fd.dims.begin(), fd.dims.begin() + static_cast<std::ptrdiff_t>(pos) + 1);
    hoist(bound, *cur, *fd.value);
    for (size_t i = pos + 1; i < fd.dims.size(); ++i) {
      Label l = fd.dims[i];
      cur = emit_dim(l, *cur, "", !ir::contains(def_.dims, l) || whole.count(l));
      pushed.push_back(l);
      bound.push_back(l);
      hoist(bound, *cur, *fd.value);
    }
    Value v = numeric(lower(*fd.value, *cur));
    bool scalar = true;
    for (Label l : fd.dims)
      scalar &= !bind_[l].back().mask;
    Value value = scalar && !axes_.empty() && !is_scalar_value(*fd.value) ? kir::reshape(v, {}) : v;
    if (!scalar) value = broadcast(value, *fd.value, fd.dims);
    // Its own name, reserved: reading the temporary back names a tile of another shape.
    Value stored = let(*cur, fresh(f->py_name), value);
    cur->push_back(
        Stmt::store(kir::add(ptr_var(f), offset_expr(f, fd.dims)), stored, mask_of(fd.dims)));
    cache_.pop_back();
    for (Label l : pushed)
      bind_[l].pop_back();
    // The values are read back by other threads of this program instance.
    body.push_back(Stmt::barrier());
  }

  // Dimensions of a materialized Func that this kernel reads beyond its own block: those indexed
  // by a label that an enclosing reduction binds, or by a label other than the dimension's own
  // (`t[x, z]` for t[x, y]). The temporary must hold them whole.
  std::set<Label> read_across(const ir::Symbol* f) const {
    std::set<Label> out;
    const ir::Labels& fdims = prog_.def(f).dims;
    ir::for_each_access(*def_.value, [&](const ir::Access& a, const ir::Labels& bound) {
      if (a.tensor != f) return;
      for (size_t i = 0; i < a.index.size(); ++i)
        if (ir::contains(bound, a.index[i]) || a.index[i] != fdims[i]) out.insert(fdims[i]);
    });
    return out;
  }

  void materialize_at(Label at, std::vector<StmtPtr>& body) {
    for (const auto& [f, level] : materialized_)
      if (level == at) materialize(f, at, body);
  }

  Value mask_of(const ir::Labels& labels) {
    Value m;
    for (Label l : labels)
      m = kir::and_(m, bind_[l].back().mask);
    return m;
  }

  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int i = 2; used_.count(name) || is_param(name); ++i)
      name = base + "_" + std::to_string(i);
    used_.insert(name);
    return name;
  }
  bool is_param(const std::string& name) const {
    for (const kir::Param& p : kernel_.params)
      if (p.name == name) return true;
    return name == func_->py_name || name == "pid";
  }

  // Where a label is indexed now, as a key part: the name bound to its index.
  std::string index_key(Label l) { return kir::print(*bind_[l].back().idx); }

  // A reduction computes the same value wherever its free labels are indexed the same way.
  std::string reduction_key(const ir::Expr& e) {
    std::string key = "reduction:" + ir::to_dt(e);
    for (Label l : e.dims)
      key += "," + l->name + "=" + index_key(l);
    return key;
  }

  std::optional<Value> cached(const std::string& key) const {
    for (auto it = cache_.rbegin(); it != cache_.rend(); ++it)
      if (auto hit = it->find(key); hit != it->end()) return hit->second;
    return std::nullopt;
  }

  // Loads a 2-D input access straight into a [p, q] tile from the labels' 1-D index vectors, as
  // tl.dot wants it, instead of loading in the kernel's layout and reshaping. Null if the
  // bindings have no vectors.
  Value load_tile(const ir::Access& e, Label p, Label q, std::vector<StmtPtr>& body) {
    const Binding& bp = bind_[p].back();
    const Binding& bq = bind_[q].back();
    if (!bp.vec || !bq.vec || e.index.size() != 2) return nullptr;
    size_t pos_p = e.index[0] == p ? 0 : 1, pos_q = 1 - pos_p;
    auto column = [](Value v) { return kir::expand(v, {true, false}); };
    auto row = [](Value v) { return kir::expand(v, {false, true}); };
    Value addr =
        kir::add(kir::add(ptr_var(e.tensor), kir::mul(column(bp.vec), stride_var(e.tensor, pos_p))),
                 kir::mul(row(bq.vec), stride_var(e.tensor, pos_q)));
    Value mask = kir::and_(column(bp.vec_mask), row(bq.vec_mask));
    return let(body, fresh(e.tensor->py_name + "_tile"), kir::load(addr, mask));
  }

  Value load(const ir::Access& e, std::vector<StmtPtr>& body, bool native = false) {
    std::string key = e.tensor->py_name + (native ? "#native" : "");
    for (Label l : e.index)
      key += "," + index_key(l);
    if (auto hit = cached(key)) return *hit;
    bool single_pattern = access_patterns(e.tensor) == 1;
    std::string base = e.tensor->py_name;
    if (!single_pattern)
      for (Label l : e.index)
        base += "_" + l->py_name;
    std::string name = fresh(native ? base + "_tile" : base);
    Value value =
        kir::load(kir::add(ptr_var(e.tensor), offset_expr(e.tensor, e.index)), mask_of(e.index));
    // Inputs may be float16/bfloat16: compute in float32.
    // tl.dot takes them as they are and accumulates in float32.
    if (e.tensor->kind == ir::SymbolKind::In && !native) value = kir::cast(value, kir::Scalar::F32);
    Value v = let(body, name, value);
    cache_.back()[key] = v;
    return v;
  }

  int access_patterns(const ir::Symbol* t) {
    struct Count : ir::IRVisitor {
      const ir::Symbol* t;
      std::set<std::vector<Label>> seen;
      void visit(const ir::Access& e) override {
        if (e.tensor == t) seen.insert(e.index);
      }
    } c;
    c.t = t;
    for_each_value(c);
    return static_cast<int>(c.seen.size());
  }

  // ---- expressions --------------------------------------------------------------------------

  Value lower(const ir::Expr& e, std::vector<StmtPtr>& body) {
    switch (e.kind) {
    case ir::ExprKind::Const:
      return kir::float_imm(static_cast<const ir::Const&>(e).value);
    case ir::ExprKind::ScalarIn:
      return ref(static_cast<const ir::ScalarIn&>(e).symbol->py_name);
    case ir::ExprKind::Len:
      // A size is an integer argument; DT values are floating point (the reference computes
      // with it as a float too), so `sqrt(len(x) * len(x))` and `len(x) % 3` work as floats.
      return kir::cast(ref(names::size(static_cast<const ir::Len&>(e).label)), kir::Scalar::F32);
    case ir::ExprKind::ProgramId:
      return kir::program_id(static_cast<const ir::ProgramId&>(e).axis);
    case ir::ExprKind::Access:
      return load(static_cast<const ir::Access&>(e), body);
    case ir::ExprKind::Unary: {
      auto& u = static_cast<const ir::Unary&>(e);
      Value a = numeric(lower(*u.a, body));
      if (u.op == ir::UnOp::Plus) return a;
      return shallow(kir::neg(a), body);
    }
    case ir::ExprKind::Binary:
      return binary(static_cast<const ir::Binary&>(e), body);
    case ir::ExprKind::Call:
      return call(static_cast<const ir::Call&>(e), body);
    case ir::ExprKind::Reduce: {
      if (auto it = hoisted_.find(&e); it != hoisted_.end()) return it->second;
      if (auto hit = cached(reduction_key(e))) return *hit;
      auto& r = static_cast<const ir::Reduce&>(e);
      Value v = reduce(r.op, {r.a}, r.rvar, e, body);
      cache_.back()[reduction_key(e)] = v;
      return v;
    }
    case ir::ExprKind::Dot: {
      if (auto it = hoisted_.find(&e); it != hoisted_.end()) return it->second;
      if (auto hit = cached(reduction_key(e))) return *hit;
      auto& d = static_cast<const ir::Dot&>(e);
      Value v =
          dot_axes(d) ? matmul(d, body) : reduce(ir::ReduceOp::Sum, {d.a, d.b}, d.rvar, e, body);
      cache_.back()[reduction_key(e)] = v;
      return v;
    }
    case ir::ExprKind::Reshape:
      // Label alignment already broadcasts: reshape changes no value.
      return lower(*static_cast<const ir::Reshape&>(e).a, body);
    }
    throw InternalError("lower: unknown expression kind");
  }

  Value binary(const ir::Binary& b, std::vector<StmtPtr>& body) {
    Value x = numeric(lower(*b.a, body)), y = numeric(lower(*b.b, body));
    // `%` is C's fmod and `/` IEEE division, as on the GPU; under the interpreter a scalar
    // operand is a Python float, whose `%` is Python's (the sign of the divisor) and whose `/ 0`
    // raises. A float32 tensor computes both as the GPU does.
    // A comparison of scalars likewise: a Python bool cannot be converted to 0 or 1 with .to().
    if ((b.op == ir::BinOp::Mod || b.op == ir::BinOp::Div ||
         (ir::is_comparison(b.op) && b.b->dims.empty())) &&
        b.a->dims.empty())
      x = kir::cast(x, kir::Scalar::F32);
    return shallow(kir::binary(kernel_op(b.op), x, y), body);
  }

  Value call(const ir::Call& c, std::vector<StmtPtr>& body) {
    const Builtin* b = find_builtin(c.fn);
    DTC_ASSERT(b, "unknown builtin survived checking");
    if (c.fn == "pow") {
      if (auto* k = c.args[1]->as<ir::Const>()) {
        double n = k->value;
        if (n == std::floor(n) && std::fabs(n) <= 8) return integer_power(*c.args[0], int(n), body);
        // A non-integer constant: no sign to work out, NaN for a negative base.
        if (std::isfinite(n) && n != std::floor(n)) {
          Value base = numeric(lower(*c.args[0], body));
          if (n == 0.5) return shallow(kir::call("tl.sqrt", {base}), body);
          kernel_.helpers.insert("_dt_pow_frac");
          return shallow(kir::call("_dt_pow_frac", {base, kir::float_imm(n)}), body);
        }
      }
    }
    std::vector<Value> args;
    for (const ir::ExprPtr& a : c.args) {
      Value v = lower(*a, body);
      // where's condition stays a condition; every other argument is a number.
      if (!(c.fn == "where" && &a == &c.args.front())) v = numeric(v);
      args.push_back(v);
    }
    if (b->helper) kernel_.helpers.insert(b->helper);
    return shallow(builtin_expr(*b, args), body);
  }

  // A comparison counts as 0 or 1 where a number is wanted (Triton cannot negate or reduce an
  // int1 tensor).
  static Value numeric(Value v) {
    if (v->type.scalar != kir::Scalar::I1) return v;
    return kir::cast(v, kir::Scalar::F32);
  }

  // A value stored over tensorized dimensions it does not vary along (`f[u] = rsum(A[n], n)`
  // with u tensorized) is broadcast to the tile first: an atomic store does not broadcast (and
  // the interpreter's atomics mishandle tl.broadcast_to's stride-0 view, so add zeros).
  Value broadcast(Value value, const ir::Expr& e, const ir::Labels& dims) {
    for (Label l : dims)
      if (tensorized(l) && axis_of(l) >= 0 && !ir::contains(e.dims, l))
        return kir::add(value, kir::full(shape_of(dims), 0.0));
    return value;
  }

  // Binds a value nested too deeply for Python and Triton's code generator to a name.
  Value shallow(Value v, std::vector<StmtPtr>& body) {
    if (v->depth <= kMaxValueDepth) return v;
    return let(body, fresh("v"), v);
  }

  Value integer_power(const ir::Expr& base_expr, int n, std::vector<StmtPtr>& body) {
    if (n == 0) return kir::float_imm(1.0);
    Value base = numeric(lower(base_expr, body));
    if (base->kind != kir::ExprKind::Var && base->kind != kir::ExprKind::Float)
      base = let(body, fresh("pow_base"), base);
    Value product = base;
    for (int i = 1; i < std::abs(n); ++i)
      product = kir::mul(product, base);
    if (n < 0) return kir::binary(kir::BinOp::Div, kir::float_imm(1.0), product);
    return product;
  }

  // ---- rdot as tl.dot ------------------------------------------------------------------------

  struct DotAxes {
    Label i, j; // result rows and columns
  };

  // rdot(a, b, r) maps to tl.dot when r and both other labels are tensorized, a varies along
  // {i, r} and b along {r, j}. Anything else runs as a multiply-and-sum reduction.
  std::optional<DotAxes> dot_axes(const ir::Dot& d) const {
    if (!tensorized(d.rvar) || d.a->dims.size() != 2 || d.b->dims.size() != 2) return std::nullopt;
    if (!ir::contains(d.a->dims, d.rvar) || !ir::contains(d.b->dims, d.rvar)) return std::nullopt;
    Label i = d.a->dims[0] == d.rvar ? d.a->dims[1] : d.a->dims[0];
    Label j = d.b->dims[0] == d.rvar ? d.b->dims[1] : d.b->dims[0];
    if (i == j || i == d.rvar || j == d.rvar || !tensorized(i) || !tensorized(j))
      return std::nullopt;
    if (axis_of(i) < 0 || axis_of(j) < 0) return std::nullopt;
    return DotAxes{i, j};
  }

  /// The first input tensor read by rdot `d`, else by the kernel's definition; null if none.
  const ir::Symbol* first_input(const ir::Dot& d) const {
    struct Find : ir::IRVisitor {
      const ir::Symbol* found = nullptr;
      void visit(const ir::Access& e) override {
        if (!found && e.tensor->kind == ir::SymbolKind::In) found = e.tensor;
      }
    } find;
    d.accept(find);
    if (!find.found) def_.value->accept(find);
    return find.found;
  }

  /// relayout(auto) copies float32 tl.dot inputs of at least this many elements
  /// (schedule/Relayout.cpp says why).
  static constexpr long long kRelayoutMinElements = 65536;

  /// The `input_precision` tl.dot is given: none for TF32, Triton's default.
  std::string precision() const {
    if (!fs_.precision || *fs_.precision == "tf32") return "";
    return *fs_.precision;
  }

  // A layout-shaped operand varying along {p, q} as a 2-D [p, q] tensor.
  Value as_matrix(Value value, Label p, Label q) const {
    kir::Extent wp = width_of_axis(p), wq = width_of_axis(q);
    bool in_order = axis_of(p) < axis_of(q);
    if (axes_.size() == 2) return in_order ? value : kir::trans(value);
    Value m = kir::reshape(value, in_order ? kir::Shape{wp, wq} : kir::Shape{wq, wp});
    return in_order ? m : kir::trans(m);
  }

  void check_dot_sizes(const ir::Dot& d, const DotAxes& ax) {
    for (Label l : {ax.i, ax.j, d.rvar}) {
      kir::Extent w = width_of_axis(l);
      if (w.param.empty() && w.n < 16)
        diags_.error("dot-tensor-too-small",
                     fs_.where.count("tensorize") ? fs_.where.at("tensorize") : d.loc,
                     "in `" + func_->name + "`: rdot over `" + d.rvar->name +
                         "` runs on tl.dot, "
                         "which needs tensors of at least 16 along each dimension, but `" +
                         l->name + "` has " + std::to_string(w.n) +
                         "; raise its tensor size (or block size) to 16 or more");
    }
  }

  // A reduction over a label that also names a bound dimension shadows it: its names get
  // `<label>_red_`.
  std::string reduction_prefix(Label r) {
    return bind_.count(r) && !bind_[r].empty() ? r->py_name + "_red_" : "";
  }

  // A prefix under which this reduction's loop variables are unused (`r2_`, `r3_`, ...), so a
  // second reduction over the same label in one kernel gets its own names; reserves them.
  std::string loop_prefix(Label r, const std::string& prefix) {
    std::string p = prefix;
    for (int n = 2; used_.count(p + r->py_name + "_iter") || used_.count(p + r->py_name + "_idx");
         ++n)
      p = prefix + "r" + std::to_string(n) + "_";
    used_.insert(p + r->py_name + "_iter");
    used_.insert(p + r->py_name + "_idx");
    return p;
  }

  // Whether reduction `e` over `r` takes its whole extent as one tile (no loop).
  bool whole_tile(const ir::Expr& e, Label r) const {
    return fs_.fully_tensorized(r) && (!fs_.block_of(r) || splits(e));
  }

  Value matmul(const ir::Dot& d, std::vector<StmtPtr>& body) {
    DotAxes ax = *dot_axes(d);
    // tl.dot yields an [i, j] matrix; the layout may hold j before i (`c[n, m] = rdot(A[m, k],
    // B[k, n], k)`). Then compute the transposed product b^T a^T, whose operands load in the
    // order tl.dot wants at no cost, instead of transposing the result.
    ir::ExprPtr lhs = d.a, rhs = d.b;
    if (axis_of(ax.i) > axis_of(ax.j)) {
      std::swap(lhs, rhs);
      std::swap(ax.i, ax.j);
    }
    check_dot_sizes(d, ax);
    if (diags_.has_errors()) return kir::float_imm(0.0);
    kernel_.dot_precision = fs_.precision.value_or("tf32");
    Label r = d.rvar;
    body.push_back(Stmt::comment("rdot over " + r->name + " on tl.dot: " + ir::to_dt(d)));
    std::string prefix = reduction_prefix(r);
    bool full_r = whole_tile(d, r);
    kir::Extent wi = width_of_axis(ax.i), wj = width_of_axis(ax.j);
    std::string acc_name = fresh(prefix + r->py_name + "_acc");
    Value acc;
    if (!full_r) acc = let(body, acc_name, kir::full({wi, wj}, 0.0));
    std::vector<StmtPtr>* inner = emit_dim(r, body, loop_prefix(r, prefix), !splits(d));
    // Values computed inside a loop are not visible after it; without a loop they are.
    if (!full_r) cache_.emplace_back();
    // A copy: lowering the operands below may push bindings of r (a nested rdot over r) and
    // move this vector.
    const Value mask = bind_[r].back().mask;
    // Two input tensors go to tl.dot in their own dtype (float16 on the tensor cores); anything
    // computed is float32, and tl.dot needs both operands in one dtype.
    auto is_input = [](const ir::ExprPtr& e) {
      auto* access = e->as<ir::Access>();
      return access && access->tensor->kind == ir::SymbolKind::In;
    };
    bool native = is_input(d.a) && is_input(d.b);
    // Operands computed in the kernel take the inputs' dtype under the default precision: with
    // float16/bfloat16 inputs the product runs on 16-bit tensor cores, as for two inputs, not in
    // TF32; with float32 inputs the cast is a no-op. `precision(ieee)` and `tf32x3` keep them in
    // float32.
    std::string narrow;
    if (!native && kernel_.dot_precision == "tf32")
      if (const ir::Symbol* in = first_input(d); in) narrow = ptr_of(in);
    auto operand = [&](const ir::ExprPtr& e, Label p, Label q) {
      Value v;
      if (native) {
        auto* access = e->as<ir::Access>();
        std::string relayout = fs_.relayout.value_or("auto");
        if (kernel_.dot_precision != "ieee" && access->index.size() == 2 && relayout != "none") {
          kernel_.k_contiguous_min_elements = relayout == "auto" ? kRelayoutMinElements : 0;
          size_t axis = access->index[0] == r ? 0 : 1;
          std::pair<std::string, size_t> need{access->tensor->py_name, axis};
          auto& list = kernel_.k_contiguous_inputs;
          if (std::find(list.begin(), list.end(), need) == list.end()) list.push_back(need);
        }
        if (Value tile = load_tile(*access, p, q, *inner)) return tile;
        v = load(*access, *inner, /*native=*/true); // masked with other=0 already
      } else {
        v = numeric(lower(*e, *inner));
        if (mask) v = kir::select(mask, v, kir::float_imm(0.0));
        if (!narrow.empty()) v = kir::cast(v, kir::Scalar::Elem, narrow);
      }
      auto* access = e->as<ir::Access>();
      std::string name =
          fresh(access ? "dot_" + access->tensor->py_name : std::string("dot_operand"));
      return let(*inner, name, as_matrix(v, p, q));
    };
    Value a = operand(lhs, ax.i, r);
    Value b = operand(rhs, r, ax.j);
    if (!full_r) cache_.pop_back();
    std::string result = fresh(prefix + r->py_name + "_dot");
    kir::Shape shape = shape_of({ax.i, ax.j});
    Value out;
    if (full_r) {
      out = let(body, result, kir::reshape(kir::dot(a, b, nullptr, precision()), shape));
    } else {
      let(*inner, acc_name, kir::dot(a, b, acc, precision()));
      out = let(body, result, kir::reshape(ref(acc_name), shape));
    }
    bind_[r].pop_back();
    return out;
  }

  Value reduce(ir::ReduceOp op, std::vector<ir::ExprPtr> operands, Label r, const ir::Expr& e,
               std::vector<StmtPtr>& body) {
    const char* what = operands.size() == 2 ? "rdot" : ir::reduce_name(op);
    body.push_back(Stmt::comment(std::string(what) + " over " + r->name + ": " + ir::to_dt(e)));
    std::string prefix = reduction_prefix(r);
    ir::Labels operand_dims;
    for (auto& o : operands)
      operand_dims = ir::union_labels(operand_dims, o->dims);
    // The masked operand always spans a tensorized RVar, even one constant along it.
    if (tensorized(r)) operand_dims = ir::union_labels(operand_dims, {r});
    double identity = identity_of(op);
    std::string acc = fresh(prefix + r->py_name + "_acc");
    bool tensor_r = tensorized(r);
    bool full_r = whole_tile(e, r);
    if (!full_r)
      let(body, acc,
          axes_.empty() ? kir::float_imm(identity) : kir::full(shape_of(operand_dims), identity));
    std::vector<StmtPtr>* inner = emit_dim(r, body, loop_prefix(r, prefix), !splits(e));
    if (!full_r) cache_.emplace_back();
    Value v;
    if (operands.size() == 2) {
      Value a = numeric(lower(*operands[0], *inner)), b = numeric(lower(*operands[1], *inner));
      v = kir::mul(a, b);
    } else {
      v = numeric(lower(*operands[0], *inner));
    }
    if (!full_r) cache_.pop_back();
    const Value mask = bind_[r].back().mask;
    // Masked lanes must not contribute: replace them with the identity.
    Value masked = mask ? kir::select(mask, v, kir::float_imm(identity)) : v;
    std::string result = fresh(prefix + r->py_name + "_" + std::string(what).substr(1));
    int ax = axis_of(r);
    kir::ReduceOp kop = kernel_op(op);
    Value out;
    if (full_r) {
      out = let(body, result, kir::reduce(kop, masked, ax));
    } else {
      Value combined = op == ir::ReduceOp::Sum   ? kir::add(ref(acc), masked)
                       : op == ir::ReduceOp::Max ? kir::call("tl.maximum", {ref(acc), masked})
                                                 : kir::call("tl.minimum", {ref(acc), masked});
      let(*inner, acc, combined);
      out = tensor_r ? let(body, result, kir::reduce(kop, ref(acc), ax)) : ref(acc);
    }
    bind_[r].pop_back();
    return out;
  }

  const ir::Program& prog_;
  const FuncSchedule& fs_;
  const SplitReduction* split_;      // null when the Func's reduction is not split
  const Materialized& materialized_; // producers this kernel computes into temporaries
  const ir::Symbol* func_;
  const ir::FuncDef& def_;
  DiagnosticEngine& diags_;
  kir::Kernel kernel_;
  std::vector<Axis> axes_;
  std::vector<Label> tiles_;
  std::set<Label> dot_labels_;
  ir::Labels labels_;
  std::map<Label, std::vector<Binding>> bind_;
  std::map<const ir::Expr*, Value> hoisted_;
  std::vector<std::map<std::string, Value>> cache_;
  std::set<std::string> used_;
  std::map<std::string, kir::Type> types_; // every bound name's type, as last bound
};

} // namespace

kir::Kernel lower_func(const ir::Program& program, const KernelPlan& plan, const ir::Symbol* func,
                       DiagnosticEngine& diags) {
  return FuncLowering(program, plan, func, diags).run();
}

} // namespace dtc
