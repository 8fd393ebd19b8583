// Prints the generated module: imports, runtime checks, @triton.jit helpers, kernels, and for
// each compiled Func its wrapper, reference and input maker.
#include "codegen/PythonCodegen.h"

#include "codegen/Runtime.h" // generated from compiler/runtime/*.py
#include "ir/Builtins.h"
#include "ir/IRVisitor.h"
#include "lower/Names.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <sstream>

namespace dtc {
namespace {

std::string quote(const std::string& s) {
  return "\"" + s + "\"";
}

/// Arbitrary text as it may stand inside a Python "..." or """...""" literal: backslashes,
/// quotes and control characters escaped, so no text (a file name) can end the literal.
std::string escape_python(const std::string& s) {
  std::string out;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (ch == '\\' || ch == '"') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += ch;
    }
  }
  return out;
}

/// A Python string literal of arbitrary text.
std::string python_string(const std::string& s) {
  return "\"" + escape_python(s) + "\"";
}

std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& item : items)
    s += (s.empty() ? "" : ", ") + item;
  return s;
}

std::string tuple_of(const std::vector<std::string>& items) {
  std::string s = "(";
  for (size_t i = 0; i < items.size(); ++i)
    s += (i ? ", " : "") + items[i];
  return s + (items.size() == 1 ? ",)" : ")");
}

/// The arguments of torch.empty for a shape printed as a tuple: its sizes, unpacked ("(x, y)" to
/// "x, y"), which torch parses faster than a tuple; "()" stays.
std::string empty_sizes(const std::string& tuple) {
  if (tuple.size() < 3 || tuple.front() != '(' || tuple.back() != ')') return tuple;
  std::string inner = tuple.substr(1, tuple.size() - 2);
  if (inner.back() == ',') inner.pop_back();
  return inner;
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
  std::string tensor_arg(const ir::Expr& e) {
    std::string s = emit(e);
    return e.dims.empty() ? "_dt_t(" + s + ")" : s;
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
  void visit(const ir::ProgramId&) override { out = "_dt_program_id_in_reference()"; }
  void visit(const ir::Access& e) override {
    std::vector<std::string> labels;
    for (ir::Label l : e.index)
      labels.push_back(quote(py_(l)));
    std::string tensor = py_(e.tensor);
    if (e.tensor->kind == ir::SymbolKind::In) tensor += ".float()";
    out = "_dt_view(" + tensor + ", " + tuple_of(labels) + ", layout)";
  }
  void visit(const ir::Unary& e) override {
    out = e.op == ir::UnOp::Neg ? "(-" + emit(*e.a) + ")" : emit(*e.a);
  }
  void visit(const ir::Binary& e) override {
    if (e.op == ir::BinOp::Mod) {
      out = "torch.fmod(" + tensor_arg(*e.a) + ", " + emit(*e.b) + ")";
      return;
    }
    // A scalar divided by 0 is inf, not Python's ZeroDivisionError.
    std::string a = e.op == ir::BinOp::Div ? tensor_arg(*e.a) : emit(*e.a);
    out = "(" + a + " " + ir::op_text(e.op) + " " + emit(*e.b) + ")";
    // A comparison counts as 0 or 1 in arithmetic; torch cannot negate or subtract bools.
    if (ir::is_comparison(e.op)) out = "_dt_t" + out;
  }
  void visit(const ir::Call& e) override {
    std::vector<std::string> args;
    for (const ir::ExprPtr& a : e.args)
      args.push_back("(" + tensor_arg(*a) + ")");
    out = substitute(find_builtin(e.fn)->torch, args);
  }
  void visit(const ir::Reduce& e) override {
    // An empty reduction yields its identity: 0, -inf or inf (torch.amax would raise).
    const char* fn = e.op == ir::ReduceOp::Sum   ? "torch.sum"
                     : e.op == ir::ReduceOp::Max ? "_dt_amax"
                                                 : "_dt_amin";
    out = std::string(fn) + "(" + emit(*e.a) + ", dim=" + std::to_string(axis(e.rvar)) +
          ", keepdim=True)";
  }
  void visit(const ir::Dot& e) override {
    // A matrix product (a along {i, k}, b along {k, j}) runs as one; anything else as a sum of
    // products, which holds every product in memory.
    if (e.a->dims.size() == 2 && e.b->dims.size() == 2) {
      ir::Label i = e.a->dims[0] == e.rvar ? e.a->dims[1] : e.a->dims[0];
      ir::Label j = e.b->dims[0] == e.rvar ? e.b->dims[1] : e.b->dims[0];
      if (i != j && i != e.rvar && j != e.rvar) {
        out = "_dt_matmul(" + emit(*e.a) + ", " + emit(*e.b) + ", layout, " + quote(py_(i)) + ", " +
              quote(py_(e.rvar)) + ", " + quote(py_(j)) + ")";
        return;
      }
    }
    out = "torch.sum(" + emit(*e.a) + " * " + emit(*e.b) + ", dim=" + std::to_string(axis(e.rvar)) +
          ", keepdim=True)";
  }
  void visit(const ir::Reshape& e) override { out = emit(*e.a); }

private:
  static constexpr int kMaxDepth = 12;
  const PythonNames& py_;
  const ir::Labels& layout_;
  std::vector<std::string>& spilled_;
  int& names_;
};

class ModulePrinter {
public:
  explicit ModulePrinter(const ModuleInput& in) : in_(in), prog_(*in.program), py_(*in.names) {}

  std::string run() {
    out_ += "\"\"\"Triton kernels generated by dtc from " + escape_python(in_.file_name) + ".\n\n";
    out_ += "Compiled: ";
    for (size_t i = 0; i < in_.compiled.size(); ++i)
      out_ += (i ? ", " : "") + py_(in_.compiled[i].func);
    out_ += "\nSchedule: " +
            (in_.canonical_schedule.empty() ? std::string("(default)") : in_.canonical_schedule) +
            "\n";
    out_ +=
        "\"\"\"\n\nimport math\nimport numbers\nimport os\n\nimport torch\nimport triton\nimport "
        "triton.language as tl\n\n";
    out_ += "SCHEDULE = " + quote(in_.canonical_schedule) + "\n";
    std::vector<std::string> compiled;
    for (const CompiledFunc& c : in_.compiled)
      compiled.push_back(quote(py_(c.func)));
    out_ += "COMPILED = " + tuple_of(compiled) + "\n";
    // How float32 products run on tl.dot, so a check can pick its tolerance (TF32 rounds
    // operands to 10-bit mantissas).
    std::string precision = "None";
    for (const auto& [f, k] : in_.kernels)
      if (!k.dot_precision.empty() && (precision == "None" || k.dot_precision == "tf32"))
        precision = quote(k.dot_precision);
    out_ += "DOT_PRECISION = " + precision + "\n";
    out_ += kRuntime;
    bool relayout = false;
    for (const auto& [f, k] : in_.kernels)
      relayout |= !k.k_contiguous_inputs.empty();
    if (relayout) out_ += kRelayout;
    if (uses_program_id())
      out_ += "\n\ndef _dt_program_id_in_reference():\n    raise ValueError(\"the reference "
              "cannot evaluate program_id: its value depends on the schedule\")\n";
    std::set<std::string> helpers;
    for (const auto& [f, k] : in_.kernels)
      helpers.insert(k.helpers.begin(), k.helpers.end());
    for (const std::string& h : helpers)
      out_ += "\n\n@triton.jit\n" + helper_source(h);
    for (const ir::Symbol& s : prog_.symbols) {
      auto it = in_.kernels.find(&s);
      if (it == in_.kernels.end()) continue;
      out_ += "\n\n" + print_kernel(it->second);
    }
    for (const CompiledFunc& c : in_.compiled)
      print_compiled(c);
    if (!in_.compiled.empty()) {
      const std::string& first = py_(in_.compiled.front().func);
      out_ += "\n\n# The first compiled Func's reference and inputs, under generic names.\n";
      out_ += "reference = reference_" + first + "\n";
      out_ += "make_inputs = make_inputs_" + first + "\n";
      out_ += "SIZE_KEYWORDS = SIZE_KEYWORDS_" + first + "\n";
    }
    return out_;
  }

private:
  bool uses_program_id() const {
    struct Find : ir::IRVisitor {
      bool found = false;
      void visit(const ir::ProgramId&) override { found = true; }
    } find;
    for (const auto& [f, def] : prog_.funcs)
      if (def.value) def.value->accept(find);
    return find.found;
  }

  std::vector<const ir::Symbol*> reference_order(const ir::Symbol* f) const {
    std::vector<const ir::Symbol*> order;
    std::set<const ir::Symbol*> seen;
    std::function<void(const ir::Symbol*)> visit = [&](const ir::Symbol* g) {
      if (!seen.insert(g).second) return;
      for (const ir::Symbol* d : in_.reference_defs.at(g).deps)
        visit(d);
      order.push_back(g);
    };
    visit(f);
    return order;
  }

  static ir::Labels reduction_labels(const ir::FuncDef& def) {
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

  struct Signature {
    std::vector<const ir::Symbol*> inputs; // In and SIn, declaration order
    ir::Labels labels;                     // every size the caller gives or the inputs imply
    ir::Labels derived;                    // sizes computed from those
    std::map<ir::Label, std::vector<std::pair<const ir::Symbol*, size_t>>> uses;
    std::map<const ir::Symbol*, ir::Labels> first_shape; // In -> labels of its first access
    /// Labels whose sizes must be equal, each under its first label in `labels`: they index one
    /// input dimension, or one reads a Func along a dimension labelled by the other.
    std::map<ir::Label, ir::Label> tied;
    std::map<ir::Label, std::vector<std::pair<const ir::Symbol*, size_t>>> group_uses; // by root
    std::map<ir::Label, std::vector<ir::Label>> group_labels; // root -> the labels it stands for
    std::map<ir::Label, std::vector<ir::Label>> use_labels;   // root -> label of each group_use
    std::map<ir::Label, std::string> why;                     // root -> the Func reads that tie it
  };

  Signature signature(const CompiledFunc& c) {
    Signature sig;
    struct Collect : ir::IRVisitor {
      Signature* sig;
      std::set<const ir::Symbol*> used;
      void visit(const ir::Access& e) override {
        if (e.tensor->kind != ir::SymbolKind::In) return;
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
      prog_.def(f).value->accept(collect);
      for (const auto& [m, at] : in_.plan->materialized_of(f))
        prog_.def(m).value->accept(collect);
      sig.labels = ir::union_labels(sig.labels, prog_.def(f).dims);
      sig.labels = ir::union_labels(sig.labels, definition_labels(prog_, f));
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
    for (const ir::Symbol* g : reference_order(c.func)) {
      const ir::FuncDef& written = in_.reference_defs.at(g);
      sig.labels = ir::union_labels(sig.labels, written.dims);
      sig.labels = ir::union_labels(sig.labels, reduction_labels(written));
      written.value->accept(lens);
    }
    for (const ir::Symbol* k : c.kernel_funcs) {
      prog_.def(k).value->accept(lens);
      for (const auto& [m, at] : in_.plan->materialized_of(k))
        prog_.def(m).value->accept(lens);
    }
    sig.labels = ir::union_labels(sig.labels, lens.out);
    for (const ir::Symbol* k : c.kernel_funcs)
      sig.labels =
          ir::union_labels(sig.labels, schedulable_labels(prog_, in_.plan->schedule.of(k)));
    // Sizes the compiler derives (split reductions) are computed, not passed.
    ir::Labels given;
    for (ir::Label l : sig.labels) {
      if (prog_.derived_sizes.count(l))
        sig.derived.push_back(l);
      else
        given.push_back(l);
    }
    sig.labels = given;
    // Order labels by declaration for a stable keyword list.
    std::sort(sig.labels.begin(), sig.labels.end(),
              [](ir::Label a, ir::Label b) { return a->order < b->order; });
    for (const ir::Symbol* in : prog_.inputs)
      if (collect.used.count(in)) sig.inputs.push_back(in);
    tie_labels(c, sig);
    return sig;
  }

  // Groups the labels whose sizes must agree. Reading `t[k, x]` for `t[x, y]` ties k to x and x
  // to y; two labels indexing one input dimension are tied too. The written algorithm (what the
  // reference evaluates) and the kernels' (what the wrapper launches) both contribute uses.
  void tie_labels(const CompiledFunc& c, Signature& sig) {
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
      }
    } reads;
    for (const ir::Symbol* g : reference_order(c.func))
      in_.reference_defs.at(g).value->accept(reads);
    for (const ir::Symbol* k : c.kernel_funcs) {
      prog_.def(k).value->accept(reads);
      for (const auto& [m, at] : in_.plan->materialized_of(k))
        prog_.def(m).value->accept(reads);
    }
    std::vector<std::pair<const ir::Access*, size_t>> ties;
    for (const ir::Access* a : reads.funcs) {
      const ir::Labels& dims = in_.reference_defs.count(a->tensor)
                                   ? in_.reference_defs.at(a->tensor).dims
                                   : prog_.def(a->tensor).dims;
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
      const ir::Labels& dims = in_.reference_defs.count(a->tensor)
                                   ? in_.reference_defs.at(a->tensor).dims
                                   : prog_.def(a->tensor).dims;
      std::string reason = ir::to_dt(*a) + " reading " + a->tensor->name + shape_text(dims);
      if (why.find(reason) == std::string::npos) why += (why.empty() ? "tied by " : ", ") + reason;
    }
  }

  std::string positional(const Signature& sig) {
    std::string s;
    for (const ir::Symbol* in : sig.inputs)
      s += (s.empty() ? "" : ", ") + py_(in);
    return s;
  }
  std::string keywords(const Signature& sig, bool with_default) {
    std::string s;
    for (ir::Label l : sig.labels)
      s += ", " + py_(l) + (with_default ? "=None" : "");
    return s;
  }
  std::string params(const Signature& sig, bool with_out = false) {
    std::string p = positional(sig);
    std::string k = keywords(sig, true) + (with_out ? ", out=None" : "");
    if (p.empty()) return k.empty() ? "" : "*" + k;
    return p + (k.empty() ? "" : ", *" + k);
  }
  std::string sizes_tuple(const Signature& sig) {
    std::string s;
    for (ir::Label l : sig.labels)
      s += py_(l) + ", ";
    return s;
  }
  std::string shape_of(const ir::Labels& dims) {
    std::vector<std::string> items;
    for (ir::Label l : dims)
      items.push_back(py_(l));
    return tuple_of(items);
  }

  void print_compiled(const CompiledFunc& c) {
    const ir::Symbol* f = c.func;
    const ir::FuncDef& def = prog_.def(f);
    Signature sig = signature(c);
    std::string name = py_(f);
    std::string args_fn = "_dt_args_" + name;

    // Argument checking shared by the wrapper and the reference.
    out_ += "\n\ndef " + args_fn + "(" + positional(sig) + (sig.inputs.empty() ? "" : ", ");
    std::string kw;
    for (ir::Label l : sig.labels)
      kw += (kw.empty() ? "" : ", ") + py_(l);
    out_ += kw + "):\n";
    std::vector<std::string> tensors;
    for (const ir::Symbol* in : sig.inputs) {
      if (in->kind != ir::SymbolKind::In) continue;
      out_ += "    _dt_check_tensor(" + quote(in->name) + ", " + py_(in) + ", " +
              std::to_string(sig.first_shape[in].size()) + ")\n";
      tensors.push_back("(" + quote(in->name) + ", " + py_(in) + ")");
    }
    for (ir::Label l : sig.labels) {
      if (sig.tied.count(l)) continue;
      std::vector<std::string> names, given, uses;
      std::string targets;
      for (ir::Label m : sig.group_labels[l]) {
        names.push_back(quote(py_(m)));
        given.push_back(py_(m));
        targets += py_(m) + " = ";
      }
      const auto& gu = sig.group_uses[l];
      for (size_t i = 0; i < gu.size(); ++i)
        uses.push_back("(" + quote(py_(sig.use_labels[l][i])) + ", " + quote(gu[i].first->name) +
                       ", " + py_(gu[i].first) + ", " + std::to_string(gu[i].second) + ")");
      std::string why = sig.why.count(l) ? ", " + python_string(sig.why[l]) : "";
      out_ += "    " + targets + "_dt_dim(" + tuple_of(names) + ", " + tuple_of(given) + ", " +
              (uses.empty() ? "()" : tuple_of(uses)) + why + ")\n";
    }
    out_ += "    dtype, device = _dt_dtype_device(" + (tensors.empty() ? "()" : tuple_of(tensors)) +
            ")\n";
    out_ += "    return " + sizes_tuple(sig) + "dtype, device\n";

    // The wrapper. Its first call with given argument metadata runs the checks and keeps what
    // they found in a plan (dt_runtime.py); later calls with that metadata launch from the plan.
    std::string plans = "_dt_plans_" + name;
    std::string out_shape = shape_of(def.dims);
    // The kernels' index type (kir::kIndexParam), decided once per plan: int32 when every
    // index of this call fits, bounded from the tensors it touches and the largest overshoot of
    // a tile, block or map split past a size (the kernels' index_slack).
    bool uses_index = false;
    long long slack = 1;
    std::vector<std::string> index_shapes;
    auto index_shape = [&](const ir::Labels& dims) {
      std::vector<std::string> items;
      for (ir::Label l : dims) {
        auto d = prog_.derived_sizes.find(l); // k_parts <= k
        items.push_back(d == prog_.derived_sizes.end() ? py_(l) : py_(d->second.of));
      }
      index_shapes.push_back(tuple_of(items));
    };
    for (const ir::Symbol* k : c.kernel_funcs) {
      const kir::Kernel& kernel = in_.kernels.at(k);
      for (const kir::Param& p : kernel.params)
        uses_index |= p.name == kir::kIndexParam;
      slack = std::max(slack, kernel.index_slack);
      if (k != f) index_shape(prog_.def(k).dims);
      for (const auto& [m, at] : in_.plan->materialized_of(k))
        index_shape(prog_.def(m).dims);
    }
    std::string index = uses_index ? "index, " : "";
    // Sizes the compiler derives (split reductions' k_parts) are worked out once per plan.
    std::string derived;
    for (ir::Label l : sig.derived)
      derived += py_(l) + ", ";
    // The strides of the inputs and the output are in the plan's key, so the plan keeps them
    // too (`A_strides`); an input a kernel may copy k-contiguous first is asked each call.
    std::set<std::string> copied;
    for (const ir::Symbol* k : c.kernel_funcs)
      for (const auto& [tensor, axis] : in_.kernels.at(k).k_contiguous_inputs)
        copied.insert(tensor);
    std::vector<std::string> kept, kept_names, kept_values;
    for (const ir::Symbol* in : sig.inputs)
      if (in->kind == ir::SymbolKind::In && !copied.count(py_(in))) kept.push_back(py_(in));
    if (in_.kernels.at(f).output_init.empty()) kept.push_back(name);
    std::string strides;
    for (const std::string& t : kept) {
      kept_names.push_back(t + "_strides");
      kept_values.push_back(t + ".stride()");
      strides += t + "_strides, ";
    }
    // Whether an input is copied k-contiguous for tl.dot depends only on its metadata, so the
    // plan keeps the verdict (`A_relayout`), taken where a kernel first needs the input; a later
    // kernel that needs it along the same axis with the same threshold finds it done.
    struct Relayout {
      std::string tensor;
      size_t axis;
      long long min_elements;
      bool done = false; // printed for an earlier kernel
    };
    std::vector<Relayout> relayouts;
    for (const ir::Symbol* k : c.kernel_funcs) {
      const kir::Kernel& kernel = in_.kernels.at(k);
      for (const auto& [tensor, axis] : kernel.k_contiguous_inputs) {
        bool seen = false;
        for (const Relayout& r : relayouts)
          seen |= r.tensor == tensor;
        if (!seen) relayouts.push_back({tensor, axis, kernel.k_contiguous_min_elements});
      }
    }
    std::string relayout_names;
    for (const Relayout& r : relayouts)
      relayout_names += r.tensor + "_relayout, ";
    // The float32 temporaries: one allocation per call holds them all (dt_runtime.py's
    // _DtPlan.lay_out); temporaries an atomic kernel combines into start filled, on their own.
    std::vector<kir::Temporary> work;
    for (const ir::Symbol* k : c.kernel_funcs) {
      const kir::Kernel& kernel = in_.kernels.at(k);
      if (k != f && kernel.output_init.empty()) {
        kir::Temporary t{py_(k), {}};
        for (ir::Label l : prog_.def(k).dims)
          t.sizes.push_back(py_(l));
        work.push_back(std::move(t));
      }
      for (const kir::Temporary& t : kernel.scratch)
        work.push_back(t);
    }
    std::vector<std::string> work_names, work_shapes;
    for (const kir::Temporary& t : work) {
      work_names.push_back(t.name);
      work_shapes.push_back(tuple_of(t.sizes));
    }
    std::string work_targets = "work, " + tuple_of(work_names) + " = ";
    out_ += "\n\n" + plans + " = {}  # argument metadata -> plan\n";
    out_ += "\n\ndef " + name + "(" + params(sig, true) + "):\n";
    out_ += "    \"\"\"" + f->name + shape_text(def.dims) + " = " + ir::to_dt(*def.value) + "\n\n";
    out_ += "    Positional arguments: ";
    for (size_t i = 0; i < sig.inputs.size(); ++i) {
      const ir::Symbol* in = sig.inputs[i];
      out_ +=
          (i ? ", " : "") + py_(in) +
          (in->kind == ir::SymbolKind::In ? " " + shape_text(sig.first_shape[in]) : " (scalar)");
    }
    if (sig.inputs.empty()) out_ += "none";
    out_ += ".\n    Sizes are inferred from the tensors; keyword sizes must agree with them.\n";
    out_ += "    Returns " + name + " " + shape_text(def.dims) +
            " in the inputs' dtype, on their device: written into `out`\n"
            "    when given (a tensor of that shape, dtype and device, any strides), else new.\n"
            "    \"\"\"\n";
    std::vector<std::string> tensor_inputs, size_args;
    for (const ir::Symbol* in : sig.inputs)
      if (in->kind == ir::SymbolKind::In) tensor_inputs.push_back(py_(in));
    for (ir::Label l : sig.labels)
      size_args.push_back(py_(l));
    // The plan key (dt_runtime.py's _dt_key): for the common call, tensors alone, written out
    // here, which costs about half of the general function.
    std::string inline_key, none_sizes;
    for (const std::string& t : tensor_inputs)
      inline_key += std::string(inline_key.empty() ? "" : ",\n                   ") + t +
                    ".shape, " + t + ".stride(), " + t + ".dtype, " + t + ".device, " + t +
                    ".data_ptr() % 16, " + t + ".is_neg()";
    for (const std::string& l : size_args)
      none_sizes += " and " + l + " is None";
    out_ += "    if out is None" + none_sizes + ":\n";
    out_ += "        try:\n";
    out_ += "            key = (" + inline_key + (tensor_inputs.size() == 1 ? ",)" : ")") + "\n";
    out_ += "        except AttributeError:  # not a tensor: the full path says what is wrong\n";
    out_ += "            key = None\n";
    out_ += "    else:\n";
    out_ += "        key = _dt_key(" + tuple_of(tensor_inputs) + ", " + tuple_of(size_args) +
            ", out)\n";
    out_ += "    plan = " + plans + ".get(key)\n";
    out_ += "    if plan is None:\n";
    out_ += "        " + sizes_tuple(sig) + "dtype, device = " + args_fn + "(" + positional(sig) +
            (sig.inputs.empty() ? "" : ", ") + kw + ")\n";
    const kir::Kernel& last = in_.kernels.at(f);
    bool atomic = !last.output_init.empty();
    if (!atomic) {
      out_ += "        " + name + " = _dt_out(out, " + out_shape + ", dtype, device, " +
              tuple_of(tensor_inputs) + ")\n";
      out_ += "        if " + name + ".numel() == 0:\n            return " + name + "\n";
    } else {
      out_ += "        if out is not None or 0 in " + out_shape + ":\n";
      out_ += "            checked = _dt_out(out, " + out_shape + ", dtype, device)\n";
      out_ += "            if checked.numel() == 0:\n                return checked\n";
    }
    out_ += "        _dt_check_launch(device)\n";
    if (uses_index) {
      std::vector<std::string> touched = tensor_inputs;
      if (!atomic)
        touched.push_back(name);
      else
        index_shape(def.dims);
      out_ += "        index = _dt_index_type(" + std::to_string(slack) + ", " +
              (touched.empty() ? "()" : tuple_of(touched)) + ", " +
              (index_shapes.empty() ? "()" : tuple_of(index_shapes)) + ")\n";
    }
    for (ir::Label l : sig.derived) {
      const ir::Program::DerivedSize& d = prog_.derived_sizes.at(l);
      out_ += "        " + py_(l) + " = " + ceil_div(py_(d.of), d.divisor) + "\n";
    }
    if (!kept.empty()) out_ += "        " + join(kept_names) + " = " + join(kept_values) + "\n";
    for (const Relayout& r : relayouts)
      out_ += "        " + r.tensor +
              "_relayout = " + relayout_condition(r.tensor, r.axis, r.min_elements) + "\n";
    std::vector<std::string> value_names =
        split_list(sizes_tuple(sig) + derived + strides + relayout_names + index + "dtype, device");
    out_ +=
        fill("        plan = _dt_plan(" + plans + ", key, (", value_names, "            ", "))\n");
    if (!work.empty())
      out_ += "        " + work_targets + "plan.lay_out(device, " + tuple_of(work_shapes) + ")\n";
    out_ += "    else:\n";
    std::string unpacked = "        " + join(value_names) + " = plan.values\n";
    out_ += unpacked.size() <= 100
                ? unpacked
                : fill("        (", value_names, "         ", ") = plan.values\n");
    if (!atomic)
      out_ += "        " + name + " = torch.empty(" + empty_sizes(out_shape) +
              ", dtype=dtype, device=device) if out is None else out\n";
    if (!work.empty()) out_ += "        " + work_targets + "plan.temporaries(device)\n";
    for (const ir::Symbol* in : sig.inputs)
      if (in->kind == ir::SymbolKind::SIn)
        out_ += "    " + py_(in) + " = _dt_scalar(" + quote(in->name) + ", " + py_(in) + ")\n";
    if (atomic)
      out_ +=
          "    # Combined atomically in float32, starting from the reduction's identity.\n    " +
          name + " = torch.full(" + out_shape + ", " + last.output_init +
          ", dtype=torch.float32, device=device)\n";
    int slot = 0;
    for (const ir::Symbol* k : c.kernel_funcs) {
      const kir::Kernel& kernel = in_.kernels.at(k);
      if (k != f) {
        out_ += "    # " + k->name +
                " is computed by a kernel of its own; float32 keeps its "
                "precision.\n";
        if (!kernel.output_init.empty())
          out_ += "    " + py_(k) + " = torch.full(" + shape_of(prog_.def(k).dims) + ", " +
                  kernel.output_init + ", dtype=torch.float32, device=device)\n";
      }
      for (const auto& [tensor, axis] : kernel.k_contiguous_inputs) {
        auto r = std::find_if(relayouts.begin(), relayouts.end(),
                              [&](const Relayout& x) { return x.tensor == tensor; });
        bool first = !r->done;
        if (!first && r->axis == axis && r->min_elements == kernel.k_contiguous_min_elements)
          continue; // done for an earlier kernel, or not needed
        out_ += "    # TF32 tensor-core products read k-contiguous tiles: lay " + tensor +
                " out with its k axis contiguous.\n";
        std::string condition =
            first ? tensor + "_relayout"
                  : relayout_condition(tensor, axis, kernel.k_contiguous_min_elements);
        r->done = true;
        out_ += "    if " + condition + ":\n";
        out_ += "        " + tensor + " = _dt_k_contiguous(" + tensor + ", " +
                std::to_string(axis) + ", plan, " + std::to_string(slot++) + ")\n";
      }
      out_ += "    plan.launch(" + std::to_string(slot++) + ", " + kernel.name + ", (" +
              grid_text(kernel.grid) + ",), (\n";
      std::string line;
      for (size_t i = 0; i < kernel.launch.size(); ++i) {
        const kir::LaunchArg& a = kernel.launch[i];
        if ((a.kind == kir::LaunchArg::Kind::Tensor || line.size() > 70) && !line.empty()) {
          out_ += "        " + line + "\n";
          line.clear();
        }
        bool is_kept = std::count(kept.begin(), kept.end(), a.name) > 0;
        std::string value = launch_value(a, work, is_kept);
        // A tensor's strides in order, all of them: one call (Tensor.stride() costs about what
        // Tensor.stride(i) does), or the plan's tuple.
        if (a.kind == kir::LaunchArg::Kind::Stride && a.axis == 0 &&
            contiguous_stride(a, work).empty() && i + a.rank <= kernel.launch.size()) {
          bool whole = true;
          for (size_t j = 1; j < a.rank; ++j)
            whole &= kernel.launch[i + j].kind == kir::LaunchArg::Kind::Stride &&
                     kernel.launch[i + j].name == a.name && kernel.launch[i + j].axis == j;
          if (whole) {
            value = "*" + a.name + (is_kept ? "_strides" : ".stride()");
            i += a.rank - 1;
          }
        }
        line += (line.empty() ? "" : " ") + value + ",";
      }
      if (!line.empty()) out_ += "        " + line + "\n";
      out_ += "    ), num_warps=" + std::to_string(kernel.num_warps) +
              ", num_stages=" + std::to_string(kernel.num_stages) + ")\n";
    }
    if (!atomic) // `out` shared memory with an input: the kernels wrote a new tensor
      out_ += "    return " + name + " if out is None or " + name + " is out else out.copy_(" +
              name + ")\n";
    else
      out_ += "    if out is None:\n        return " + name + ".to(dtype)\n    out.copy_(" + name +
              ")\n    return out\n";

    // The reference.
    out_ += "\n\ndef reference_" + name + "(" + params(sig) + "):\n";
    out_ += "    \"\"\"PyTorch evaluation of " + f->name +
            ", in float32 and aligned by label, for "
            "checking the kernels.\"\"\"\n";
    print_prologue(sig, args_fn, kw);
    int spilled_names = 0;
    for (const ir::Symbol* k : reference_order(f)) {
      const ir::FuncDef& kd = in_.reference_defs.at(k);
      ir::Labels layout = kd.dims;
      for (ir::Label l : reduction_labels(kd))
        layout = ir::union_labels(layout, {l});
      std::vector<std::string> spilled;
      ReferenceExpr ref(py_, layout, spilled, spilled_names);
      std::vector<std::string> dims;
      for (ir::Label l : kd.dims)
        dims.push_back(quote(py_(l)));
      out_ += "    layout = " + ref.layout_text() + "\n";
      std::string value = ref.emit(*kd.value);
      for (const std::string& s : spilled)
        out_ += "    " + s + "\n";
      out_ += "    " + py_(k) + " = _dt_result(" + value + ", layout, " + tuple_of(dims) + ", " +
              shape_of(kd.dims) + ")\n";
    }
    out_ += "    return " + name + ".to(dtype)\n";

    // Random inputs. A label that indexes the same input dimension as an earlier one (rms_norm's
    // k and y) is tied to it: its size defaults to the earlier label's.
    std::map<ir::Label, ir::Label> tied = sig.tied;
    std::vector<std::string> label_names, free_names;
    std::string free_tuple;
    std::map<ir::Label, int> example;
    int next_example = 16;
    for (ir::Label l : sig.labels) {
      label_names.push_back(quote(l->name));
      if (tied.count(l)) {
        example[l] = example[tied[l]];
        continue;
      }
      example[l] = next_example;
      next_example += 16;
      free_names.push_back(quote(l->name));
      free_tuple += py_(l) + ", ";
    }
    out_ +=
        "\n\ndef make_inputs_" + name + "(sizes, dtype=torch.float32, device=\"cpu\", seed=0):\n";
    out_ += "    \"\"\"Random positional arguments for " + name + "(...) and reference_" + name +
            "(...), at `sizes`\n    keyed by DT label, e.g. {";
    for (size_t i = 0; i < sig.labels.size(); ++i)
      out_ += (i ? ", " : "") + quote(sig.labels[i]->name) + ": " +
              std::to_string(example[sig.labels[i]]);
    out_ += "}.\"\"\"\n";
    if (!free_names.empty())
      out_ += "    " + free_tuple + "= _dt_sizes(sizes, " + tuple_of(free_names) + ")\n";
    std::set<ir::Label> shaping; // labels the inputs' shapes below are written with
    for (const ir::Symbol* in : sig.inputs)
      if (in->kind == ir::SymbolKind::In)
        for (ir::Label l : sig.first_shape[in])
          shaping.insert(l);
    for (ir::Label l : sig.labels)
      if (tied.count(l)) {
        out_ += "    if int(sizes.get(" + quote(l->name) + ", " + py_(tied[l]) +
                ")) != " + py_(tied[l]) + ":\n        raise ValueError(\"" + l->name +
                " indexes the same input dimension as " + tied[l]->name +
                "; give them one size\")\n";
        if (shaping.count(l)) out_ += "    " + py_(l) + " = " + py_(tied[l]) + "\n";
      }
    out_ += "    generator = torch.Generator().manual_seed(seed)\n";
    std::vector<std::string> results;
    for (const ir::Symbol* in : sig.inputs) {
      if (in->kind == ir::SymbolKind::In)
        out_ += "    " + py_(in) + " = _dt_randn(" + shape_of(sig.first_shape[in]) +
                ", generator, dtype, device)\n";
      else
        out_ += "    " + py_(in) + " = _dt_rand_scalar(generator)\n";
      results.push_back(py_(in));
    }
    out_ += "    return " + (results.empty() ? std::string("()") : tuple_of(results)) + "\n";
    out_ += "\n\nSIZE_KEYWORDS_" + name + " = {";
    for (size_t i = 0; i < sig.labels.size(); ++i)
      out_ += (i ? ", " : "") + quote(sig.labels[i]->name) + ": " + quote(py_(sig.labels[i]));
    out_ += "}\n";
  }

  static std::string relayout_condition(const std::string& tensor, size_t axis,
                                        long long min_elements) {
    return tensor + ".dtype == torch.float32 and " + tensor + ".stride(" + std::to_string(axis) +
           ") != 1" +
           (min_elements ? " and " + tensor + ".numel() >= " + std::to_string(min_elements) : "");
  }

  // "a, b, c, " -> {a, b, c}
  static std::vector<std::string> split_list(const std::string& text) {
    std::vector<std::string> items;
    std::string item;
    std::istringstream in(text);
    while (std::getline(in, item, ','))
      if (item.find_first_not_of(' ') != std::string::npos)
        items.push_back(item.substr(item.find_first_not_of(' ')));
    return items;
  }

  // `first` + items separated by ", " + `last`, wrapped before 100 columns with `cont` opening
  // each further line.
  static std::string fill(const std::string& first, const std::vector<std::string>& items,
                          const std::string& cont, const std::string& last) {
    std::string out, line = first;
    for (size_t i = 0; i < items.size(); ++i) {
      std::string piece = items[i] + (i + 1 < items.size() ? "," : "");
      bool fresh = line == first || line == cont;
      if (!fresh &&
          line.size() + 1 + piece.size() + (i + 1 == items.size() ? last.size() - 1 : 0) > 99) {
        out += line + "\n";
        line = cont;
        fresh = true;
      }
      line += (fresh ? "" : " ") + piece;
    }
    return out + line + last;
  }

  // ceil(size / divisor) in plain integer arithmetic (triton.cdiv costs microseconds a call).
  static std::string ceil_div(const std::string& size, long long divisor) {
    if (divisor == 1) return size;
    return "(" + size + " + " + std::to_string(divisor - 1) + ") // " + std::to_string(divisor);
  }

  static std::string grid_text(const std::vector<kir::GridFactor>& grid) {
    std::string text;
    for (const kir::GridFactor& g : grid) {
      std::string factor = g.size.empty() ? std::to_string(g.divisor) : ceil_div(g.size, g.divisor);
      if (grid.size() > 1 && !g.size.empty() && g.divisor != 1) factor = "(" + factor + ")";
      text += (text.empty() ? "" : " * ") + factor;
    }
    return text.empty() ? "1" : text;
  }

  // The stride of a temporary laid out contiguous by the plan, or "" for any other tensor.
  static std::string contiguous_stride(const kir::LaunchArg& a,
                                       const std::vector<kir::Temporary>& work) {
    for (const kir::Temporary& t : work) {
      if (t.name != a.name) continue;
      std::string stride;
      for (size_t i = a.axis + 1; i < t.sizes.size(); ++i)
        stride += (stride.empty() ? "" : " * ") + t.sizes[i];
      return stride.empty() ? "1" : stride;
    }
    return "";
  }

  static std::string launch_value(const kir::LaunchArg& a, const std::vector<kir::Temporary>& work,
                                  bool kept) {
    switch (a.kind) {
    case kir::LaunchArg::Kind::Tensor:
    case kir::LaunchArg::Kind::Size:
    case kir::LaunchArg::Kind::Scalar:
      return a.name;
    case kir::LaunchArg::Kind::Stride: {
      std::string contiguous = contiguous_stride(a, work);
      if (!contiguous.empty()) return contiguous;
      if (kept) return a.name + "_strides[" + std::to_string(a.axis) + "]";
      return a.name + ".stride(" + std::to_string(a.axis) + ")";
    }
    case kir::LaunchArg::Kind::Tile:
      return "_dt_tile(" + a.name + ", " + std::to_string(a.least) + ")";
    case kir::LaunchArg::Kind::Index:
      return "index";
    }
    return a.name;
  }

  // The checks that open both the wrapper and the reference: sizes, dtype, device, scalars.
  void print_prologue(const Signature& sig, const std::string& args_fn, const std::string& kw) {
    out_ += "    " + sizes_tuple(sig) + "dtype, device = " + args_fn + "(" + positional(sig) +
            (sig.inputs.empty() ? "" : ", ") + kw + ")\n";
    for (const ir::Symbol* in : sig.inputs)
      if (in->kind == ir::SymbolKind::SIn)
        out_ += "    " + py_(in) + " = _dt_scalar(" + quote(in->name) + ", " + py_(in) + ")\n";
  }

  static std::string shape_text(const ir::Labels& dims) {
    std::string s = "[";
    for (size_t i = 0; i < dims.size(); ++i)
      s += (i ? ", " : "") + dims[i]->name;
    return s + "]";
  }

  const ModuleInput& in_;
  const ir::Program& prog_;
  const PythonNames& py_;
  std::string out_;
};

} // namespace

std::string print_module(const ModuleInput& input) {
  return ModulePrinter(input).run();
}

} // namespace dtc
