// The module's reference (ReferencePrinter.h).
#include "codegen/ReferencePrinter.h"

#include "codegen/PythonText.h"
#include "codegen/WrapperSignature.h"
#include "ir/Builtins.h"
#include "ir/IRVisitor.h"
#include "support/Diagnostics.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <utility>

namespace dtc {
namespace {

/// PyTorch's spelling of each DT builtin; {0}, {1}, {2} stand for the arguments.
const char* torch_pattern(std::string_view builtin) {
  static const std::pair<const char*, const char*> patterns[] = {
      {"abs", "torch.abs({0})"},
      {"ceil", "torch.ceil({0})"},
      {"floor", "torch.floor({0})"},
      {"cos", "torch.cos({0})"},
      {"sin", "torch.sin({0})"},
      {"erf", "torch.erf({0})"},
      {"exp", "torch.exp({0})"},
      {"exp2", "torch.exp2({0})"},
      {"log", "torch.log({0})"},
      {"log2", "torch.log2({0})"},
      {"rsqrt", "torch.rsqrt({0})"},
      {"sigmoid", "torch.sigmoid({0})"},
      {"sqrt", "torch.sqrt({0})"},
      {"sqrt_rn", "torch.sqrt({0})"},
      {"maximum", "torch.maximum({0}, {1})"},
      {"minimum", "torch.minimum({0}, {1})"},
      {"fdiv", "torch.div({0}, {1})"},
      {"div_rn", "torch.div({0}, {1})"},
      {"clamp", "torch.minimum(torch.maximum({0}, {1}), {2})"},
      {"fma", "({0} * {1} + {2})"},
      {"where", "torch.where({0} != 0, {1}, {2})"},
      {"tanh", "torch.tanh({0})"},
      {"sinh", "torch.sinh({0})"},
      {"cosh", "torch.cosh({0})"},
      {"tan", "torch.tan({0})"},
      {"pow", "torch.pow({0}, {1})"},
      {"log1p", "torch.log1p({0})"},
      {"expm1", "torch.expm1({0})"},
      {"log10", "torch.log10({0})"},
      {"erfc", "torch.erfc({0})"},
      {"sign", "torch.sign({0})"},
      {"reciprocal", "torch.reciprocal({0})"},
      {"square", "torch.square({0})"},
      {"relu", "torch.relu({0})"},
      {"silu", "torch.nn.functional.silu({0})"},
      {"softplus", "torch.nn.functional.softplus({0})"},
      {"gelu", "torch.nn.functional.gelu({0})"},
      {"gelu_tanh", "torch.nn.functional.gelu({0}, approximate='tanh')"},
  };
  for (const auto& [name, pattern] : patterns)
    if (builtin == name) return pattern;
  throw InternalError("no PyTorch spelling of the builtin " + std::string(builtin));
}

/// Replaces {0}, {1}, ... in `pattern` with `args`.
std::string substitute(std::string_view pattern, const std::vector<std::string>& args) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '{' && i + 2 < pattern.size() && pattern[i + 2] == '}' &&
        pattern[i + 1] >= '0' && pattern[i + 1] <= '9') {
      out += args.at(pattern[i + 1] - '0');
      i += 2;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

/// PyTorch text of an expression, over a layout of labels.
class ReferenceExpr : public ir::IRVisitor {
public:
  /// Subexpressions nested deeper than Python's parser and compiler take are bound to names
  /// (`_dt_r1 = ...`), appended to `spilled` to be printed first.
  ReferenceExpr(const PythonNames& py, const ir::Labels& layout, std::vector<std::string>& spilled,
                int& names)
      : py_(py), layout_(layout), spilled_(spilled), names_(names) {}
  std::string out;
  int depth = 0; // of `out`: operations nested in it

  std::string emit(const ir::Expr& e) {
    ReferenceExpr sub(py_, layout_, spilled_, names_);
    e.accept(sub);
    if (sub.depth > kMaxDepth) {
      std::string name = "_dt_r" + std::to_string(++names_);
      spilled_.push_back(name + " = " + sub.out);
      sub.out = name;
      sub.depth = 0;
    }
    depth = std::max(depth, sub.depth + 1);
    return sub.out;
  }
  /// A value where a number is wanted: a whole number (an int64 tensor or a Python int) is
  /// converted to float32, as the kernel converts it (torch has no silu or matmul of int64).
  std::string number(const ir::Expr& e) {
    std::string s = emit(e);
    return e.is_int() && !e.as<ir::Const>() ? "_dt_t(" + s + ")" : s;
  }
  std::string tensor_arg(const ir::Expr& e) {
    std::string s = number(e);
    return e.dims.empty() && s.rfind("_dt_t(", 0) != 0 ? "_dt_t(" + s + ")" : s;
  }
  /// An operand of a whole-number operation: an integer literal stays an integer.
  std::string emit_whole(const ir::Expr& e) {
    if (const auto* c = e.as<ir::Const>()) {
      depth = std::max(depth, 1);
      std::string n = std::to_string(static_cast<long long>(c->value));
      return c->value < 0 ? "(" + n + ")" : n;
    }
    return emit(e);
  }
  std::string whole_tensor_arg(const ir::Expr& e) {
    std::string s = emit_whole(e);
    return e.dims.empty() ? "_dt_i(" + s + ")" : s;
  }
  std::string layout_text() const {
    std::vector<std::string> items;
    for (ir::Label l : layout_)
      items.push_back(quote(py_(l)));
    return tuple_of(items);
  }
  int axis(ir::Label l) const {
    for (size_t i = 0; i < layout_.size(); ++i)
      if (layout_[i] == l) return static_cast<int>(i);
    return -1;
  }

  void visit(const ir::Const& e) override {
    out = e.value < 0 ? "(" + ir::python_float(e.value) + ")" : ir::python_float(e.value);
  }
  void visit(const ir::ScalarIn& e) override { out = py_(e.symbol); }
  void visit(const ir::Len& e) override { out = py_(e.label); }
  void visit(const ir::LabelValue& e) override {
    out = "_dt_position(" + py_(e.label) + ", " + quote(py_(e.label)) + ", layout, device)";
  }
  void visit(const ir::ProgramId&) override { out = "_dt_program_id_in_reference()"; }
  void visit(const ir::Access& e) override {
    std::string tensor = py_(e.tensor);
    if (e.tensor->kind == ir::SymbolKind::In) tensor += e.tensor->is_int ? ".long()" : ".float()";
    if (e.plain()) {
      std::vector<std::string> labels;
      for (ir::Label l : e.index)
        labels.push_back(quote(py_(l)));
      out = "_dt_view(" + tensor + ", " + tuple_of(labels) + ", layout)";
      return;
    }
    // Computed positions: each dimension's position over the layout, 0 outside the tensor.
    std::vector<std::string> positions;
    for (size_t i = 0; i < e.index.size(); ++i) {
      const ir::Expr* p = e.position(i);
      positions.push_back(p ? emit_whole(*p)
                            : "_dt_position(" + py_(e.index[i]) + ", " + quote(py_(e.index[i])) +
                                  ", layout, device)");
    }
    out = "_dt_gather(" + tensor + ", " + tuple_of(positions) + ")";
  }
  void visit(const ir::Unary& e) override {
    if (e.is_int()) {
      out = e.op == ir::UnOp::Neg ? "(-" + emit_whole(*e.a) + ")" : emit_whole(*e.a);
      return;
    }
    out = e.op == ir::UnOp::Neg ? "(-" + emit(*e.a) + ")" : emit(*e.a);
  }
  void visit(const ir::Binary& e) override {
    bool whole = e.is_int() || (ir::is_comparison(e.op) &&
                                ir::combined_type({e.a.get(), e.b.get()}) == ir::ValueType::Int);
    if (whole) {
      // Whole numbers as int64 tensors or Python ints; `//` and `%` round toward zero.
      if (e.op == ir::BinOp::IntDiv)
        out = "torch.div(" + whole_tensor_arg(*e.a) + ", " + emit_whole(*e.b) +
              ", rounding_mode=\"trunc\")";
      else if (e.op == ir::BinOp::Mod)
        out = "torch.fmod(" + whole_tensor_arg(*e.a) + ", " + emit_whole(*e.b) + ")";
      else
        out = "(" + emit_whole(*e.a) + " " + ir::op_text(e.op) + " " + emit_whole(*e.b) + ")";
      if (ir::is_comparison(e.op)) out = "_dt_t" + out;
      return;
    }
    if (e.op == ir::BinOp::Mod) {
      out = "torch.fmod(" + tensor_arg(*e.a) + ", " + number(*e.b) + ")";
      return;
    }
    // A scalar divided by 0 is inf, not Python's ZeroDivisionError.
    std::string a = e.op == ir::BinOp::Div ? tensor_arg(*e.a) : number(*e.a);
    out = "(" + a + " " + ir::op_text(e.op) + " " + number(*e.b) + ")";
    // A comparison counts as 0 or 1 in arithmetic; torch cannot negate or subtract bools.
    if (ir::is_comparison(e.op)) out = "_dt_t" + out;
  }
  void visit(const ir::Call& e) override {
    std::vector<std::string> args;
    for (const ir::ExprPtr& a : e.args) {
      bool whole_arg = e.is_int() && !(e.fn == "where" && &a == &e.args.front());
      args.push_back("(" + (whole_arg ? whole_tensor_arg(*a) : tensor_arg(*a)) + ")");
    }
    out = substitute(torch_pattern(e.fn), args);
  }
  void visit(const ir::Reduce& e) override {
    // An empty reduction yields its identity: 0, -inf or inf (torch.amax would raise).
    const char* fn = e.op == ir::ReduceOp::Sum   ? "torch.sum"
                     : e.op == ir::ReduceOp::Max ? "_dt_amax"
                                                 : "_dt_amin";
    out = std::string(fn) + "(" + number(*e.a) + ", dim=" + std::to_string(axis(e.rvar)) +
          ", keepdim=True)";
  }
  void visit(const ir::Dot& e) override {
    // A matrix product (a along {i, k}, b along {k, j}) runs as one; anything else as a batched
    // one (_dt_contract): a sum of products would hold every product in memory, b * h * m * l
    // * k of them for attention's scores.
    if (e.a->dims.size() == 2 && e.b->dims.size() == 2) {
      ir::Label i = e.a->dims[0] == e.rvar ? e.a->dims[1] : e.a->dims[0];
      ir::Label j = e.b->dims[0] == e.rvar ? e.b->dims[1] : e.b->dims[0];
      if (i != j && i != e.rvar && j != e.rvar) {
        out = "_dt_matmul(" + number(*e.a) + ", " + number(*e.b) + ", layout, " + quote(py_(i)) +
              ", " + quote(py_(e.rvar)) + ", " + quote(py_(j)) + ")";
        return;
      }
    }
    out = "_dt_contract(" + number(*e.a) + ", " + number(*e.b) + ", " +
          std::to_string(axis(e.rvar)) + ")";
  }
  void visit(const ir::Reshape& e) override { out = emit(*e.a); }

private:
  static constexpr int kMaxDepth = 12;
  const PythonNames& py_;
  const ir::Labels& layout_;
  std::vector<std::string>& spilled_;
  int& names_;
};

} // namespace

std::string print_reference_values(const ModuleInput& in, const ir::Symbol* f) {
  const PythonNames& py = *in.names;
  std::string out;
  int spilled_names = 0;
  // Each Func's last reader, after which its value is dropped: attention's scores, weights and
  // exponentials are b * h * m * l floats each, and need not all be held at once.
  std::vector<const ir::Symbol*> order = reference_order(in, f);
  std::map<const ir::Symbol*, size_t> last_read;
  for (size_t i = 0; i < order.size(); ++i) {
    struct Reads : ir::IRVisitor {
      std::set<const ir::Symbol*> funcs;
      void visit(const ir::Access& e) override {
        if (e.tensor->kind == ir::SymbolKind::Func) funcs.insert(e.tensor);
        ir::IRVisitor::visit(e);
      }
    } reads;
    in.reference_defs.at(order[i]).value->accept(reads);
    for (const ir::Symbol* g : reads.funcs)
      last_read[g] = i;
  }
  std::set<const ir::Symbol*> returned{f};
  for (const ir::Symbol* g : in.plan->of(f).stored)
    returned.insert(g);
  for (size_t i = 0; i < order.size(); ++i) {
    const ir::Symbol* k = order[i];
    const ir::FuncDef& kd = in.reference_defs.at(k);
    ir::Labels layout = kd.dims;
    for (ir::Label l : reduction_labels(kd))
      layout = ir::union_labels(layout, {l});
    std::vector<std::string> spilled;
    ReferenceExpr ref(py, layout, spilled, spilled_names);
    std::vector<std::string> dims;
    for (ir::Label l : kd.dims)
      dims.push_back(quote(py(l)));
    out += "    layout = " + ref.layout_text() + "\n";
    std::string value = ref.emit(*kd.value);
    for (const std::string& s : spilled)
      out += "    " + s + "\n";
    out += "    " + py(k) + " = _dt_result(" + value + ", layout, " + tuple_of(dims) + ", " +
           size_tuple(py, kd.dims) + ")\n";
    std::vector<std::string> dead;
    for (const auto& [g, at] : last_read)
      if (at == i && !returned.count(g)) dead.push_back(py(g));
    std::sort(dead.begin(), dead.end());
    if (!dead.empty()) out += "    del " + join(dead) + "\n";
  }
  std::string result = py(f) + ".to(dtype)";
  for (const ir::Symbol* g : in.plan->of(f).stored)
    result += ", " + py(g) + ".to(dtype)";
  out += "    return " + result + "\n";
  return out;
}

} // namespace dtc
