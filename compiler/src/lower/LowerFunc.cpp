#include "lower/LowerFunc.h"

#include "ir/Builtins.h"
#include "ir/IRVisitor.h"
#include "lower/Names.h"

#include <cctype>
#include <cmath>
#include <functional>
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
using kir::Stmt;
using kir::StmtPtr;

// Python operator precedence levels used for parenthesizing generated expressions.
enum Prec { kCompare = 1, kAdd = 2, kMul = 3, kUnary = 4, kAtom = 5 };

struct Value {
  std::string text;
  int prec = kAtom;
  bool is_bool = false;
  int depth = 0; // operations nested in `text` (a name or literal is 0)
};

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

std::string paren(const Value& v, int min_prec) {
  return v.prec < min_prec ? "(" + v.text + ")" : v.text;
}

/// How a dimension label is indexed at the current point of the kernel.
struct Binding {
  std::string idx;  // Python expression (int64 scalar or layout-shaped tensor)
  std::string mask; // empty when every index is in range by construction
  // For a tensorized label: the same indices and mask as 1-D vectors, from which tl.dot operands
  // are loaded directly as 2-D tiles.
  std::string vec, vec_mask;
};

class FuncLowering {
public:
  FuncLowering(const ir::Program& p, const Schedule& s, const ir::Symbol* f, DiagnosticEngine& d)
      : prog_(p), sched_(s), fs_(s.of(f)), func_(f), def_(p.def(f)), diags_(d) {}

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
    std::string value = scalar_store && !axes_.empty() && !is_scalar_value(*def_.value)
                            ? "tl.reshape(" + v.text + ", [])"
                            : v.text;
    if (!scalar_store) value = broadcast(value, *def_.value, def_.dims);
    body->push_back(Stmt::assign(func_->py_name, value));
    std::string offsets = offset_expr(func_, def_.dims);
    StmtPtr store =
        Stmt::store(names::ptr(func_) + " + " + offsets, func_->py_name, mask_of(def_.dims));
    if (fs_.split && !fs_.split->part) {
      // atomic(k): combine this block's partial result into the output.
      ir::ReduceOp op = fs_.split->op;
      store->atomic = op == ir::ReduceOp::Sum ? "add" : op == ir::ReduceOp::Max ? "max" : "min";
      kernel_.output_init = op == ir::ReduceOp::Sum   ? "0.0"
                            : op == ir::ReduceOp::Max ? "float(\"-inf\")"
                                                      : "float(\"inf\")";
    }
    body->push_back(std::move(store));
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

  // ---- layout -------------------------------------------------------------------------------

  struct Axis {
    Label label;
    std::string width; // integer literal or a constexpr parameter name
  };

  // The blocked reduction label of a split reduction: reduced over its block only.
  bool is_split(Label l) const { return fs_.split && fs_.split->rvar == l; }
  // Only the definition's top-level reduction is split; a nested reduction over the same label
  // (a fused softmax denominator inside attention's rdot) still covers the whole dimension.
  bool splits(const ir::Expr& e) const { return fs_.split && &e == def_.value.get(); }
  bool is_part(Label l) const { return fs_.split && fs_.split->part == l; }

  bool tensorized(Label l) const { return fs_.fully_tensorized(l) || fs_.tensor_of(l) > 1; }

  std::string width_of(Label l) {
    if (fs_.fully_tensorized(l)) {
      if (auto b = fs_.block_of(l)) return std::to_string(next_power_of_two(*b));
      tiles_.push_back(l);
      return names::tile(l);
    }
    return std::to_string(fs_.tensor_of(l));
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

  // `[:, None]`-style expansion of a 1-D arange to the layout's rank.
  std::string expand(int axis) const {
    if (axes_.size() <= 1) return "";
    std::string s = "[";
    for (size_t i = 0; i < axes_.size(); ++i)
      s += std::string(i ? ", " : "") + (static_cast<int>(i) == axis ? ":" : "None");
    return s + "]";
  }

  // Shape (as a Python list) of a value varying along `dims`.
  std::string shape_of(const ir::Labels& dims) const {
    std::string s = "[";
    for (size_t i = 0; i < axes_.size(); ++i)
      s += std::string(i ? ", " : "") + (ir::contains(dims, axes_[i].label) ? axes_[i].width : "1");
    return s + "]";
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

  void add_param(const std::string& name, const std::string& launch, bool constexpr_ = false) {
    kernel_.params.push_back({name, constexpr_});
    kir::LaunchArg arg;
    arg.param = name;
    arg.value = launch;
    kernel_.launch.push_back(std::move(arg));
  }

  void add_tensor_params(const ir::Symbol* t, size_t rank) {
    add_tensor_params(names::ptr(t), t->py_name, rank,
                      [&](size_t i) { return names::stride(t, i); });
  }
  void add_tensor_params(const std::string& ptr, const std::string& tensor, size_t rank,
                         const std::function<std::string(size_t)>& stride_param) {
    add_param(ptr, tensor);
    for (size_t i = 0; i < rank; ++i) {
      add_param(stride_param(i), tensor + ".stride(" + std::to_string(i) + ")");
      kernel_.launch.back().tensor = tensor;
      kernel_.launch.back().axis = i;
      kernel_.launch.back().rank = rank;
    }
  }

  void add_params() {
    Collect c;
    for_each_value(c);
    // Inputs in declaration order, then the Funcs this kernel reads, then the output.
    for (const ir::Symbol* in : prog_.inputs) {
      if (std::count(c.tensors.begin(), c.tensors.end(), in)) add_tensor_params(in, rank_of(in));
      if (std::count(c.scalars.begin(), c.scalars.end(), in)) add_param(in->py_name, in->py_name);
    }
    for (const ir::Symbol* t : c.tensors) {
      if (t->kind != ir::SymbolKind::Func) continue;
      size_t rank = prog_.def(t).dims.size();
      if (!materialized(t)) {
        add_tensor_params(t, rank);
        continue;
      }
      std::string base = tensor_base(t);
      add_tensor_params(base + "_ptr", base, rank,
                        [&](size_t i) { return base + "_stride" + std::to_string(i); });
      std::string shape = "(";
      for (Label l : prog_.def(t).dims)
        shape += l->py_name + ", ";
      shape = shape.substr(0, shape.size() - 2) + (prog_.def(t).dims.size() == 1 ? ",)" : ")");
      kernel_.scratch.push_back({base, shape});
    }
    add_tensor_params(func_, def_.dims.size());
    labels_ = ir::union_labels(def_.dims, schedulable_labels(prog_, fs_));
    labels_ = ir::union_labels(labels_, c.labels);
    for (Label l : labels_)
      if (!is_part(l)) add_param(names::size(l), l->py_name);
    for (Label l : tiles_)
      add_param(names::tile(l), tile_launch(l), true);
  }

  // Visits the kernel's value and the values of the Funcs it computes into temporaries.
  void for_each_value(ir::IRVisitor& v) const {
    def_.value->accept(v);
    for (const auto& [f, at] : fs_.materialized)
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
    if (levels.empty()) {
      kernel_.grid = "1";
      return;
    }
    body.push_back(Stmt::comment("program instance -> output block (map)"));
    body.push_back(Stmt::assign("pid", "tl.program_id(0).to(tl.int64)"));
    std::map<Label, std::string> blocks_var;
    for (Label l : labels_) {
      auto b = fs_.block_of(l);
      if (!b) continue;
      std::string v = l->py_name + "_blocks";
      blocks_var[l] = v;
      body.push_back(Stmt::assign(v, *b == 1
                                         ? names::size(l)
                                         : "(" + names::size(l) + " + " + std::to_string(*b - 1) +
                                               ") // " + std::to_string(*b)));
    }
    // Extents of each level, in kernel code and in wrapper code.
    std::map<std::string, long long> split_factor; // ID -> factor
    for (const MapLevel& lv : levels)
      if (lv.factor) split_factor[lv.split_id] = lv.factor;
    std::vector<std::string> extent(levels.size()), grid_extent(levels.size());
    for (size_t i = 0; i < levels.size(); ++i) {
      const MapLevel& lv = levels[i];
      if (lv.is_split_inner) {
        extent[i] = grid_extent[i] = std::to_string(split_factor[lv.name]);
      } else {
        long long b = *fs_.block_of(lv.dim);
        std::string grid_blocks = "triton.cdiv(" + lv.dim->py_name + ", " + std::to_string(b) + ")";
        if (lv.factor) {
          std::string f = std::to_string(lv.factor);
          extent[i] =
              "(" + blocks_var[lv.dim] + " + " + std::to_string(lv.factor - 1) + ") // " + f;
          grid_extent[i] = "triton.cdiv(" + grid_blocks + ", " + f + ")";
        } else {
          extent[i] = blocks_var[lv.dim];
          grid_extent[i] = grid_blocks;
        }
      }
    }
    // Innermost level varies fastest.
    std::string stride = "1";
    std::map<std::string, std::string> pid_of; // level name -> variable
    for (size_t k = levels.size(); k-- > 0;) {
      const MapLevel& lv = levels[k];
      bool simple = !lv.factor && !lv.is_split_inner;
      std::string var = simple ? lv.dim->py_name + "_block" : lv.name + "_pid";
      std::string value = stride == "1" ? "pid" : "pid // " + stride_text(stride);
      if (k > 0) value += " % " + stride_text(extent[k]);
      body.push_back(Stmt::assign(var, value));
      pid_of[lv.name] = var;
      stride = stride == "1" ? extent[k] : stride_text(stride) + " * " + stride_text(extent[k]);
    }
    // Split dimensions: block index = outer * factor + inner, recursively.
    std::function<std::string(const std::string&)> block_index = [&](const std::string& name) {
      for (const MapLevel& lv : levels)
        if (lv.name == name && lv.factor)
          return pid_of[name] + " * " + std::to_string(lv.factor) + " + " +
                 block_index(lv.split_id);
      return pid_of[name];
    };
    for (const MapLevel& lv : levels)
      if (lv.factor && !lv.is_split_inner)
        body.push_back(Stmt::assign(lv.dim->py_name + "_block", block_index(lv.name)));
    std::string grid;
    for (const std::string& g : grid_extent)
      grid += (grid.empty() ? "" : " * ") + g;
    kernel_.grid = grid;
    for (Label l : labels_) {
      auto b = fs_.block_of(l);
      if (!b) continue;
      std::string start = l->py_name + "_start";
      body.push_back(
          Stmt::assign(start, l->py_name + "_block" + (*b == 1 ? "" : " * " + std::to_string(*b))));
      body.push_back(Stmt::assign(l->py_name + "_end", "tl.minimum(" + start + " + " +
                                                           std::to_string(*b) + ", " +
                                                           names::size(l) + ")"));
    }
  }

  static std::string stride_text(const std::string& s) {
    return s.find(' ') == std::string::npos ? s : "(" + s + ")";
  }

  void emit_aranges(std::vector<StmtPtr>& body) {
    if (axes_.empty()) return;
    body.push_back(Stmt::comment("tensor axes: " + axes_text()));
    for (size_t i = 0; i < axes_.size(); ++i) {
      std::string range = "tl.arange(0, " + axes_[i].width + ")";
      if (axes_.size() > 1 && dot_labels_.count(axes_[i].label))
        body.push_back(Stmt::assign(axes_[i].label->py_name + "_range", range + ".to(tl.int64)"));
      body.push_back(Stmt::assign(axes_[i].label->py_name + "_arange",
                                  range + expand(int(i)) + ".to(tl.int64)"));
    }
  }

  std::string axes_text() const {
    std::string s;
    for (const Axis& a : axes_)
      s += (s.empty() ? "" : ", ") + a.label->name + ":" + a.width;
    return s;
  }

  std::string start_of(Label l) const {
    return fs_.block_of(l) ? l->py_name + "_start" : std::string("0");
  }
  std::string end_of(Label l) const {
    return fs_.block_of(l) ? l->py_name + "_end" : names::size(l);
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
      std::string k = fs_.split->rvar->py_name;
      bind_[l].push_back({k + "_block", "(" + k + "_block < " + k + "_blocks)", "", ""});
      return &body;
    }
    std::string arange = l->py_name + "_arange";
    std::vector<StmtPtr>* inner = &body;
    bool blocked = fs_.block_of(l).has_value() && !whole;
    std::string start = whole ? "0" : start_of(l);
    std::string end = whole ? names::size(l) : end_of(l);
    bool no_loop = fs_.fully_tensorized(l) && (blocked || !fs_.block_of(l));
    if (no_loop) {
      b.idx = blocked ? base + "_idx" : arange;
      if (blocked) body.push_back(Stmt::assign(b.idx, start + " + " + arange));
    } else {
      // A whole-dimension walk of a blocked, fully tensorized label steps by its tile width.
      std::string step =
          fs_.fully_tensorized(l) ? width_of_axis(l) : std::to_string(fs_.tensor_of(l));
      StmtPtr loop = Stmt::loop(base + "_iter", start, end, step);
      inner = &loop->body;
      body.push_back(std::move(loop));
      if (tensorized(l)) {
        b.idx = base + "_idx";
        inner->push_back(Stmt::assign(b.idx, base + "_iter + " + arange));
      } else if (blocked) {
        b.idx = base + "_iter"; // int64 already: it starts at the int64 block start
      } else {
        b.idx = base + "_idx";
        inner->push_back(Stmt::assign(b.idx, "tl.cast(" + base + "_iter, tl.int64)"));
      }
    }
    if (tensorized(l)) {
      b.mask = base + "_mask";
      inner->push_back(Stmt::assign(b.mask, b.idx + " < " + end));
      if (axes_.size() > 1 && dot_labels_.count(l)) {
        // 1-D twins for tl.dot operand tiles (dead-code elimination drops them if unused).
        std::string range = l->py_name + "_range";
        std::string origin = no_loop ? (blocked ? start : "") : base + "_iter";
        b.vec = base + "_vec";
        b.vec_mask = base + "_vec_mask";
        inner->push_back(Stmt::assign(b.vec, origin.empty() ? range : origin + " + " + range));
        inner->push_back(Stmt::assign(b.vec_mask, b.vec + " < " + end));
      } else if (axes_.size() == 1) {
        b.vec = b.idx;
        b.vec_mask = b.mask;
      }
    }
    bind_[l].push_back(b);
    return inner;
  }

  std::string width_of_axis(Label l) const {
    int ax = axis_of(l);
    DTC_ASSERT(ax >= 0, "tensorized label without an axis");
    return axes_[ax].width;
  }

  std::vector<StmtPtr>* emit_output_loops(std::vector<StmtPtr>& body) {
    // One value-cache scope per loop level: what is computed at a level is reused inside it.
    std::vector<StmtPtr>* cur = &body;
    ir::Labels bound;
    cache_.emplace_back();
    hoist(bound, *cur);
    for (Label l : def_.dims) {
      cur = emit_dim(l, *cur, "", false);
      bound.push_back(l);
      cache_.emplace_back();
      materialize_at(l, *cur);
      hoist(bound, *cur);
    }
    return cur;
  }

  // Computes, at the current loop level, every reduction whose dimensions are all bound here
  // (innermost first), so it runs once per iteration of this level rather than per element of
  // the inner loops. A reduction that varies along the label of an enclosing reduction is
  // hoisted too when that enclosing reduction takes its label as one whole tile (no loop): the
  // label is bound here for it, as the enclosing reduction will bind it, so that 2mm's first
  // product, `rdot(A[m, k], B[k, l], k)` inside `rdot(..., C[l, n], l)` with `l` whole, is
  // computed once per `m` block instead of once per `n` tile. Reductions inside a looping
  // enclosing reduction stay put.
  void hoist(const ir::Labels& bound, std::vector<StmtPtr>& body) {
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
    walk(*def_.value, {});
  }

  // ---- memory accesses ----------------------------------------------------------------------

  // A Func computed into a global temporary by this kernel (partial fusion) is `<f>_fuse`.
  bool materialized(const ir::Symbol* t) const {
    for (const auto& [f, at] : fs_.materialized)
      if (f == t) return true;
    return false;
  }
  std::string tensor_base(const ir::Symbol* t) const {
    return materialized(t) ? t->py_name + "_fuse" : t->py_name;
  }
  std::string ptr_of(const ir::Symbol* t) const { return tensor_base(t) + "_ptr"; }
  std::string stride_of(const ir::Symbol* t, size_t i) const {
    return tensor_base(t) + "_stride" + std::to_string(i);
  }

  std::string offset_expr(const ir::Symbol* t, const ir::Labels& index) {
    std::string s;
    for (size_t i = 0; i < index.size(); ++i)
      s += (i ? " + " : "") + bind_[index[i]].back().idx + " * " + stride_of(t, i);
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
    for (size_t i = pos + 1; i < fd.dims.size(); ++i) {
      Label l = fd.dims[i];
      cur = emit_dim(l, *cur, "", !ir::contains(def_.dims, l) || whole.count(l));
      pushed.push_back(l);
    }
    Value v = numeric(lower(*fd.value, *cur));
    bool scalar = true;
    for (Label l : fd.dims)
      scalar &= bind_[l].back().mask.empty();
    std::string value = scalar && !axes_.empty() && !is_scalar_value(*fd.value)
                            ? "tl.reshape(" + v.text + ", [])"
                            : v.text;
    if (!scalar) value = broadcast(value, *fd.value, fd.dims);
    cur->push_back(Stmt::assign(f->py_name, value));
    cur->push_back(
        Stmt::store(ptr_of(f) + " + " + offset_expr(f, fd.dims), f->py_name, mask_of(fd.dims)));
    cache_.pop_back();
    for (Label l : pushed)
      bind_[l].pop_back();
    // The values are read back by other threads of this program instance.
    body.push_back(Stmt::expr("tl.debug_barrier()"));
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
    for (const auto& [f, level] : fs_.materialized)
      if (level == at) materialize(f, at, body);
  }

  std::string mask_of(const ir::Labels& labels) {
    std::string m;
    for (Label l : labels) {
      const std::string& lm = bind_[l].back().mask;
      if (!lm.empty()) m += (m.empty() ? "" : " & ") + lm;
    }
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

  // A reduction computes the same value wherever its free labels are indexed the same way.
  std::string reduction_key(const ir::Expr& e) {
    std::string key = "reduction:" + ir::to_dt(e);
    for (Label l : e.dims)
      key += "," + l->name + "=" + bind_[l].back().idx;
    return key;
  }

  std::optional<std::string> cached(const std::string& key) const {
    for (auto it = cache_.rbegin(); it != cache_.rend(); ++it)
      if (auto hit = it->find(key); hit != it->end()) return hit->second;
    return std::nullopt;
  }

  // Loads a 2-D input access straight into a [p, q] tile from the labels' 1-D index vectors, as
  // tl.dot wants it, instead of loading in the kernel's layout and reshaping. "" if the
  // bindings have no vectors.
  std::string load_tile(const ir::Access& e, Label p, Label q, std::vector<StmtPtr>& body) {
    const Binding& bp = bind_[p].back();
    const Binding& bq = bind_[q].back();
    if (bp.vec.empty() || bq.vec.empty() || e.index.size() != 2) return {};
    size_t pos_p = e.index[0] == p ? 0 : 1, pos_q = 1 - pos_p;
    std::string addr = ptr_of(e.tensor) + " + " + bp.vec + "[:, None] * " +
                       stride_of(e.tensor, pos_p) + " + " + bq.vec + "[None, :] * " +
                       stride_of(e.tensor, pos_q);
    std::string mask = bp.vec_mask + "[:, None] & " + bq.vec_mask + "[None, :]";
    std::string name = fresh(e.tensor->py_name + "_tile");
    body.push_back(Stmt::assign(name, "tl.load(" + addr + ", mask=" + mask + ", other=0.0)"));
    return name;
  }

  Value load(const ir::Access& e, std::vector<StmtPtr>& body, bool native = false) {
    std::string key = e.tensor->py_name + (native ? "#native" : "");
    for (Label l : e.index)
      key += "," + bind_[l].back().idx;
    for (auto it = cache_.rbegin(); it != cache_.rend(); ++it) {
      auto hit = it->find(key);
      if (hit != it->end()) return {hit->second};
    }
    bool single_pattern = access_patterns(e.tensor) == 1;
    std::string base = e.tensor->py_name;
    if (!single_pattern)
      for (Label l : e.index)
        base += "_" + l->py_name;
    std::string name = fresh(native ? base + "_tile" : base);
    std::string addr = ptr_of(e.tensor) + " + " + offset_expr(e.tensor, e.index);
    std::string mask = mask_of(e.index);
    std::string call =
        "tl.load(" + addr + (mask.empty() ? "" : ", mask=" + mask + ", other=0.0") + ")";
    // Inputs may be float16/bfloat16: compute in float32.
    // tl.dot takes them as they are and accumulates in float32.
    if (e.tensor->kind == ir::SymbolKind::In && !native) call += ".to(tl.float32)";
    body.push_back(Stmt::assign(name, call));
    cache_.back()[key] = name;
    return {name};
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
    case ir::ExprKind::Const: {
      auto& c = static_cast<const ir::Const&>(e);
      return {ir::python_float(c.value), c.value < 0 ? kUnary : kAtom};
    }
    case ir::ExprKind::ScalarIn:
      return {static_cast<const ir::ScalarIn&>(e).symbol->py_name};
    case ir::ExprKind::Len:
      // A size is an integer argument; DT values are floating point (the reference computes
      // with it as a float too), so `sqrt(len(x) * len(x))` and `len(x) % 3` work as floats.
      return {"tl.cast(" + names::size(static_cast<const ir::Len&>(e).label) + ", tl.float32)"};
    case ir::ExprKind::ProgramId:
      return {"tl.program_id(" + std::to_string(static_cast<const ir::ProgramId&>(e).axis) + ")"};
    case ir::ExprKind::Access:
      return load(static_cast<const ir::Access&>(e), body);
    case ir::ExprKind::Unary: {
      auto& u = static_cast<const ir::Unary&>(e);
      Value a = numeric(lower(*u.a, body));
      if (u.op == ir::UnOp::Plus) return a;
      return shallow({"-" + paren(a, kUnary), kUnary, false, a.depth + 1}, body);
    }
    case ir::ExprKind::Binary:
      return binary(static_cast<const ir::Binary&>(e), body);
    case ir::ExprKind::Call:
      return call(static_cast<const ir::Call&>(e), body);
    case ir::ExprKind::Reduce: {
      if (auto it = hoisted_.find(&e); it != hoisted_.end()) return it->second;
      if (auto hit = cached(reduction_key(e))) return {*hit};
      auto& r = static_cast<const ir::Reduce&>(e);
      Value v = reduce(r.op, {r.a}, r.rvar, e, body);
      cache_.back()[reduction_key(e)] = v.text;
      return v;
    }
    case ir::ExprKind::Dot: {
      if (auto it = hoisted_.find(&e); it != hoisted_.end()) return it->second;
      if (auto hit = cached(reduction_key(e))) return {*hit};
      auto& d = static_cast<const ir::Dot&>(e);
      Value v =
          dot_axes(d) ? matmul(d, body) : reduce(ir::ReduceOp::Sum, {d.a, d.b}, d.rvar, e, body);
      cache_.back()[reduction_key(e)] = v.text;
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
      x = {"tl.cast(" + x.text + ", tl.float32)", kAtom, false, x.depth + 1};
    int p = ir::is_comparison(b.op)                              ? kCompare
            : (b.op == ir::BinOp::Add || b.op == ir::BinOp::Sub) ? kAdd
                                                                 : kMul;
    // Comparisons never chain in the generated code: Python would read `a < b < c` as a chain.
    int left_min = p == kCompare ? kCompare + 1 : p;
    Value v{paren(x, left_min) + " " + ir::op_text(b.op) + " " + paren(y, p + 1), p,
            ir::is_comparison(b.op), std::max(x.depth, y.depth) + 1};
    return shallow(v, body);
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
          if (n == 0.5)
            return shallow({"tl.sqrt(" + base.text + ")", kAtom, false, base.depth + 1}, body);
          kernel_.helpers.insert("_dt_pow_frac");
          return shallow({"_dt_pow_frac(" + base.text + ", " + ir::python_float(n) + ")", kAtom,
                          false, base.depth + 1},
                         body);
        }
      }
    }
    std::string pattern = b->triton;
    // A comparison is already a condition.
    if (c.fn == "where" && lower_is_bool(*c.args[0])) pattern = "tl.where({0}, {1}, {2})";
    // Arguments are substituted as text: parenthesize compound ones unless the pattern is a
    // plain call, where commas already delimit them.
    bool plain_call = pattern.find(" != ") == std::string::npos && pattern.front() != '(';
    std::vector<std::string> args;
    int depth = 0;
    for (const ir::ExprPtr& a : c.args) {
      Value v = lower(*a, body);
      // where's condition stays a condition; every other argument is a number.
      if (!(c.fn == "where" && &a == &c.args.front())) v = numeric(v);
      depth = std::max(depth, v.depth);
      args.push_back(plain_call ? v.text : paren(v, kAtom));
    }
    if (b->helper) kernel_.helpers.insert(b->helper);
    return shallow({substitute(pattern, args), kAtom, false, depth + 1}, body);
  }

  // A comparison counts as 0 or 1 where a number is wanted (Triton cannot negate or reduce an
  // int1 tensor).
  static Value numeric(Value v) {
    if (!v.is_bool) return v;
    return {paren(v, kAtom) + ".to(tl.float32)", kAtom, false, v.depth + 1};
  }

  // A value stored over tensorized dimensions it does not vary along (`f[u] = rsum(A[n], n)`
  // with u tensorized) is broadcast to the tile first: an atomic store does not broadcast (and
  // the interpreter's atomics mishandle tl.broadcast_to's stride-0 view, so add zeros).
  std::string broadcast(const std::string& value, const ir::Expr& e, const ir::Labels& dims) {
    for (Label l : dims)
      if (tensorized(l) && axis_of(l) >= 0 && !ir::contains(e.dims, l))
        return value + " + tl.zeros(" + shape_of(dims) + ", tl.float32)";
    return value;
  }

  // Binds a value nested too deeply for Python and Triton's code generator to a name.
  Value shallow(Value v, std::vector<StmtPtr>& body) {
    if (v.depth <= kMaxValueDepth) return v;
    std::string name = fresh("v");
    body.push_back(Stmt::assign(name, v.text));
    return {name, kAtom, v.is_bool, 0};
  }

  static bool lower_is_bool(const ir::Expr& e) {
    auto* b = e.as<ir::Binary>();
    return b && ir::is_comparison(b->op);
  }

  Value integer_power(const ir::Expr& base_expr, int n, std::vector<StmtPtr>& body) {
    if (n == 0) return {"1.0"};
    Value base = numeric(lower(base_expr, body));
    std::string operand = base.text;
    if (base.prec != kAtom || operand.find('(') != std::string::npos) {
      operand = fresh("pow_base");
      body.push_back(Stmt::assign(operand, base.text));
    }
    std::string product = operand;
    for (int i = 1; i < std::abs(n); ++i)
      product += " * " + operand;
    if (n < 0) return {"1.0 / (" + product + ")", kMul, false, std::abs(n)};
    return {product, std::abs(n) == 1 ? kAtom : kMul, false, std::abs(n) - 1};
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

  /// `v` as the receiver of a method call: parenthesized unless it is a plain name or call.
  static std::string paren_call(const std::string& v) {
    bool simple = !v.empty() && v.back() != ' ';
    int depth = 0;
    for (char c : v) {
      if (c == '(' || c == '[') ++depth;
      if (c == ')' || c == ']') --depth;
      if (depth == 0 && (c == ' ' || c == '-' || c == '+' || c == '*' || c == '/' || c == '<' ||
                         c == '>' || c == '=' || c == '&' || c == '|' || c == '%'))
        simple = false;
    }
    return simple ? v : "(" + v + ")";
  }

  /// relayout(auto) copies float32 tl.dot inputs of at least this many elements
  /// (schedule/Relayout.cpp says why).
  static constexpr long long kRelayoutMinElements = 65536;

  std::string precision() const {
    if (!fs_.precision || *fs_.precision == "tf32") return "";
    return ", input_precision=\"" + *fs_.precision + "\"";
  }

  std::string tile_launch(Label l) const {
    // tl.dot needs at least 16 along each dimension; masks cover the difference.
    if (dot_labels_.count(l)) return "max(16, triton.next_power_of_2(" + l->py_name + "))";
    // An empty dimension still needs a one-lane tile (tl.arange(0, 0) is invalid); its mask is
    // all false, so an empty reduction yields its identity.
    return "max(1, triton.next_power_of_2(" + l->py_name + "))";
  }

  // A layout-shaped operand varying along {p, q} as a 2-D [p, q] tensor.
  std::string as_matrix(const std::string& value, Label p, Label q) const {
    std::string wp = width_of_axis(p), wq = width_of_axis(q);
    bool in_order = axis_of(p) < axis_of(q);
    if (axes_.size() == 2) return in_order ? value : "tl.trans(" + value + ")";
    std::string m =
        "tl.reshape(" + value + ", [" + (in_order ? wp + ", " + wq : wq + ", " + wp) + "])";
    return in_order ? m : "tl.trans(" + m + ")";
  }

  void check_dot_sizes(const ir::Dot& d, const DotAxes& ax) {
    for (Label l : {ax.i, ax.j, d.rvar}) {
      std::string w = width_of_axis(l);
      if (std::isdigit(static_cast<unsigned char>(w[0])) && std::stoll(w) < 16)
        diags_.error("dot-tensor-too-small",
                     fs_.where.count("tensorize") ? fs_.where.at("tensorize") : d.loc,
                     "in `" + func_->name + "`: rdot over `" + d.rvar->name +
                         "` runs on tl.dot, "
                         "which needs tensors of at least 16 along each dimension, but `" +
                         l->name + "` has " + w +
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
    kernel_.dot_precision = fs_.precision.value_or("tf32");
    Label r = d.rvar;
    body.push_back(Stmt::comment("rdot over " + r->name + " on tl.dot: " + ir::to_dt(d)));
    std::string prefix = reduction_prefix(r);
    bool full_r = whole_tile(d, r);
    std::string wi = width_of_axis(ax.i), wj = width_of_axis(ax.j);
    std::string acc = fresh(prefix + r->py_name + "_acc");
    if (!full_r)
      body.push_back(Stmt::assign(acc, "tl.zeros([" + wi + ", " + wj + "], tl.float32)"));
    std::vector<StmtPtr>* inner = emit_dim(r, body, loop_prefix(r, prefix), !splits(d));
    // Values computed inside a loop are not visible after it; without a loop they are.
    if (!full_r) cache_.emplace_back();
    // A copy: lowering the operands below may push bindings of r (a nested rdot over r) and
    // move this vector.
    const std::string mask = bind_[r].back().mask;
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
      if (const ir::Symbol* in = first_input(d); in)
        narrow = ".to(" + ptr_of(in) + ".dtype.element_ty)";
    auto operand = [&](const ir::ExprPtr& e, Label p, Label q) {
      std::string v;
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
        if (std::string tile = load_tile(*access, p, q, *inner); !tile.empty()) return tile;
        v = load(*access, *inner, /*native=*/true).text; // masked with other=0 already
      } else {
        v = numeric(lower(*e, *inner)).text;
        if (!mask.empty()) v = "tl.where(" + mask + ", " + v + ", 0.0)";
        if (!narrow.empty()) v = paren_call(v) + narrow;
      }
      auto* access = e->as<ir::Access>();
      std::string name =
          fresh(access ? "dot_" + access->tensor->py_name : std::string("dot_operand"));
      inner->push_back(Stmt::assign(name, as_matrix(v, p, q)));
      return name;
    };
    std::string a = operand(lhs, ax.i, r);
    std::string b = operand(rhs, r, ax.j);
    if (!full_r) cache_.pop_back();
    std::string result = fresh(prefix + r->py_name + "_dot");
    std::string shape = shape_of({ax.i, ax.j});
    if (full_r) {
      body.push_back(Stmt::assign(result, "tl.reshape(tl.dot(" + a + ", " + b + precision() +
                                              "), " + shape + ")"));
    } else {
      inner->push_back(
          Stmt::assign(acc, "tl.dot(" + a + ", " + b + ", " + acc + precision() + ")"));
      body.push_back(Stmt::assign(result, "tl.reshape(" + acc + ", " + shape + ")"));
    }
    bind_[r].pop_back();
    return {result};
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
    std::string identity = op == ir::ReduceOp::Sum   ? "0.0"
                           : op == ir::ReduceOp::Max ? "float(\"-inf\")"
                                                     : "float(\"inf\")";
    std::string acc = fresh(prefix + r->py_name + "_acc");
    bool tensor_r = tensorized(r);
    bool full_r = whole_tile(e, r);
    if (!full_r) {
      std::string shape = shape_of(operand_dims);
      body.push_back(Stmt::assign(
          acc, axes_.empty() ? identity : "tl.full(" + shape + ", " + identity + ", tl.float32)"));
    }
    std::vector<StmtPtr>* inner = emit_dim(r, body, loop_prefix(r, prefix), !splits(e));
    if (!full_r) cache_.emplace_back();
    std::string v;
    if (operands.size() == 2) {
      Value a = numeric(lower(*operands[0], *inner)), b = numeric(lower(*operands[1], *inner));
      v = paren(a, kMul) + " * " + paren(b, kMul + 1);
    } else {
      v = numeric(lower(*operands[0], *inner)).text;
    }
    if (!full_r) cache_.pop_back();
    const std::string mask = bind_[r].back().mask;
    // Masked lanes must not contribute: replace them with the identity.
    std::string masked = mask.empty() ? v : "tl.where(" + mask + ", " + v + ", " + identity + ")";
    std::string result = fresh(prefix + r->py_name + "_" + std::string(what).substr(1));
    int ax = axis_of(r);
    std::string reducer = op == ir::ReduceOp::Sum   ? "tl.sum"
                          : op == ir::ReduceOp::Max ? "tl.max"
                                                    : "tl.min";
    if (full_r) {
      body.push_back(Stmt::assign(result, reducer + "(" + masked + ", axis=" + std::to_string(ax) +
                                              ", keep_dims=True)"));
    } else {
      std::string combined = op == ir::ReduceOp::Sum   ? acc + " + " + wrap_sum(masked)
                             : op == ir::ReduceOp::Max ? "tl.maximum(" + acc + ", " + masked + ")"
                                                       : "tl.minimum(" + acc + ", " + masked + ")";
      inner->push_back(Stmt::assign(acc, combined));
      if (tensor_r)
        body.push_back(Stmt::assign(result, reducer + "(" + acc + ", axis=" + std::to_string(ax) +
                                                ", keep_dims=True)"));
      else
        result = acc;
    }
    bind_[r].pop_back();
    return {result};
  }

  static std::string wrap_sum(const std::string& s) {
    return s.find(' ') == std::string::npos || s.rfind("tl.where(", 0) == 0 ? s : "(" + s + ")";
  }

  const ir::Program& prog_;
  const Schedule& sched_;
  const FuncSchedule& fs_;
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
  std::vector<std::map<std::string, std::string>> cache_;
  std::set<std::string> used_;
};

} // namespace

kir::Kernel lower_func(const ir::Program& program, const Schedule& schedule, const ir::Symbol* func,
                       DiagnosticEngine& diags) {
  return FuncLowering(program, schedule, func, diags).run();
}

} // namespace dtc
