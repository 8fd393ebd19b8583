#include "frontend/Checker.h"

#include "ir/Builtins.h"
#include "ir/IRVisitor.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <set>

namespace dtc {
namespace {

using ir::ExprPtr;
using ir::Label;
using ir::Labels;
using ir::Symbol;
using ir::SymbolKind;

std::string labels_text(const Labels& labels) {
  std::string s = "[";
  for (size_t i = 0; i < labels.size(); ++i)
    s += (i ? ", " : "") + labels[i]->name;
  return s + "]";
}

const char* article_kind(SymbolKind k) {
  switch (k) {
  case SymbolKind::Func:
    return "a Func";
  case SymbolKind::In:
    return "an input tensor (In)";
  case SymbolKind::SIn:
    return "a scalar input (SIn)";
  case SymbolKind::Var:
    return "a dimension label (Var)";
  case SymbolKind::RVar:
    return "a reduction label (RVar)";
  }
  return "a symbol";
}

bool is_reserved_word(const std::string& name) {
  static const std::set<std::string> words = {"Func",    "In",         "SIn",  "Var",  "RVar",
                                              "rsum",    "rmax",       "rmin", "rdot", "len",
                                              "reshape", "program_id", "inf"};
  return words.count(name) || find_builtin(name);
}

class Checker {
public:
  Checker(const ast::Program& ast, DiagnosticEngine& diags) : ast_(ast), diags_(diags) {}

  ir::Program run() {
    declare();
    collect_definitions();
    collect_dimension_labels();
    for (const ast::Definition& def : ast_.definitions)
      check_definition(def);
    check_all_defined();
    check_cycles();
    return std::move(prog_);
  }

private:
  void declare() {
    int order = 0;
    for (const ast::Decl& decl : ast_.decls) {
      for (const ast::Name& n : decl.names) {
        if (is_reserved_word(n.text)) {
          diags_.error(n.loc, "`" + n.text +
                                  "` is a DT keyword or built-in function and cannot "
                                  "name a symbol; choose another name");
          continue;
        }
        if (const Symbol* prev = prog_.find(n.text)) {
          diags_.error(n.loc, "`" + n.text + "` is already declared as " +
                                  article_kind(prev->kind) + "; each symbol is declared once");
          diags_.note(prev->loc, "`" + n.text + "` was declared here");
          continue;
        }
        Symbol s;
        s.name = n.text;
        s.kind = static_cast<SymbolKind>(decl.kind);
        s.loc = n.loc;
        s.order = order++;
        prog_.symbols.push_back(s);
        Symbol* sym = &prog_.symbols.back();
        prog_.by_name[n.text] = sym;
        if (sym->kind == SymbolKind::In || sym->kind == SymbolKind::SIn)
          prog_.inputs.push_back(sym);
        size_t i = static_cast<size_t>(&n - decl.names.data());
        if (i < decl.types.size() && (decl.types[i].written || !decl.types[i].example.text.empty()))
          typed_.push_back({sym, &decl.types[i]});
      }
    }
    // Element types, once every label is declared (`In T: int(y)` may come before `Var y`).
    for (const auto& [sym, t] : typed_) {
      if (!t->example.text.empty()) example(*sym, *t);
      if (!t->written) continue;
      if (sym->kind != SymbolKind::In && sym->kind != SymbolKind::SIn) {
        diags_.error(t->loc, "`" + sym->name + "` is " + article_kind(sym->kind) +
                                 "; only inputs (In, SIn) have an element type");
        continue;
      }
      sym->is_int = t->is_int;
      if (t->range.text.empty()) continue;
      if (sym->kind == SymbolKind::SIn) {
        diags_.error(t->range.loc,
                     "a scalar input holds no positions; write `SIn " + sym->name + ": int;`");
        continue;
      }
      sym->range = label(t->range.text, t->range.loc);
    }
  }

  // `SIn eps = 1e-6;`: the value make_inputs passes for a scalar input.
  void example(Symbol& sym, const ast::ElemType& t) {
    if (sym.kind != SymbolKind::SIn) {
      diags_.error(t.example.loc, "`" + sym.name + "` is " + article_kind(sym.kind) +
                                      "; only a scalar input (SIn) takes a value, the one "
                                      "make_inputs passes");
      return;
    }
    if (t.is_int && !t.example_is_int) {
      diags_.error(t.example.loc, "`" + sym.name +
                                      "` holds a whole number; give it one, as in `SIn " +
                                      sym.name + ": int = -100;`");
      return;
    }
    errno = 0;
    double v = std::strtod(t.example.text.c_str(), nullptr);
    if (errno == ERANGE || !std::isfinite(v) || (t.is_int && std::fabs(v) >= 0x1p62)) {
      diags_.error(t.example.loc,
                   "number `" + t.example.text + "` is out of range for `" + sym.name + "`");
      return;
    }
    sym.example = v;
    sym.example_text = t.example.text;
  }

  // The label that names each dimension of an input wherever some access indexes it with a
  // label alone (`X[x, y]`): the extent of a dimension that an access reaches with a computed
  // position (`X[x, 0]`) has no label of its own.
  void collect_dimension_labels() {
    std::function<void(const ast::Expr&)> walk = [&](const ast::Expr& e) {
      if (e.kind == ast::ExprKind::Index) {
        const Symbol* t = prog_.find(e.text);
        for (size_t i = 0; t && t->kind == SymbolKind::In && i < e.args.size(); ++i) {
          const ast::Expr& a = *e.args[i];
          const Symbol* l = a.kind == ast::ExprKind::Name ? prog_.find(a.text) : nullptr;
          if (l && l->is_label()) dim_label_.emplace(std::make_pair(t, i), l);
        }
      }
      for (const ast::ExprPtr& a : e.args)
        walk(*a);
    };
    for (const ast::Definition& def : ast_.definitions)
      walk(*def.value);
  }

  // First pass over definitions: the shape (labels) of every Func, so a Func may be used before
  // the line that defines it.
  void collect_definitions() {
    for (const ast::Definition& def : ast_.definitions) {
      const Symbol* f = prog_.find(def.func.text);
      if (!f) {
        diags_.error(def.func.loc, "`" + def.func.text + "` is not declared; add `Func " +
                                       def.func.text + ";` to the declarations");
        continue;
      }
      if (f->kind != SymbolKind::Func) {
        diags_.error(def.func.loc, "`" + f->name + "` is " + article_kind(f->kind) +
                                       ", not a Func; only a Func can be defined");
        continue;
      }
      if (prog_.funcs.count(f)) {
        diags_.error(def.func.loc, "Func `" + f->name +
                                       "` is defined more than once; a Func has "
                                       "exactly one definition");
        diags_.note(prog_.funcs[f].loc, "first definition is here");
        continue;
      }
      ir::FuncDef fd;
      fd.symbol = f;
      fd.loc = def.func.loc;
      bool ok = true;
      for (const ast::Name& n : def.labels) {
        Label l = label(n.text, n.loc);
        if (!l) {
          ok = false;
          continue;
        }
        if (ir::contains(fd.dims, l)) {
          diags_.error(n.loc, "dimension label `" + n.text + "` appears twice in the shape of `" +
                                  f->name + "`; each dimension needs its own label");
          ok = false;
          continue;
        }
        fd.dims.push_back(l);
      }
      if (def.labels.empty()) {
        diags_.error(def.loc, "Func `" + f->name +
                                  "` has no dimensions; give it at least one, "
                                  "as in `" +
                                  f->name + "[x] = ...`");
        ok = false;
      }
      if (ok)
        prog_.funcs[f] = fd;
      else
        bad_defs_.insert(f);
    }
  }

  Label label(const std::string& name, Loc loc) {
    const Symbol* s = prog_.find(name);
    if (!s) {
      diags_.error(loc, "`" + name + "` is not declared; declare it with `Var " + name +
                            ";` (or "
                            "`RVar` for a reduction dimension)");
      return nullptr;
    }
    if (!s->is_label()) {
      diags_.error(loc, "`" + name + "` is " + article_kind(s->kind) +
                            ", but a dimension label (Var or RVar) is needed here");
      return nullptr;
    }
    return s;
  }

  void check_definition(const ast::Definition& def) {
    const Symbol* f = prog_.find(def.func.text);
    if (!f || !prog_.funcs.count(f) || prog_.funcs[f].loc.line != def.func.loc.line ||
        prog_.funcs[f].loc.col != def.func.loc.col) {
      // Undeclared, not a Func, or a duplicate: still check the expression for its own errors.
      current_ = nullptr;
      expr(*def.value);
      return;
    }
    ir::FuncDef& fd = prog_.funcs[f];
    current_ = &fd;
    ExprPtr value = expr(*def.value);
    if (!value) {
      prog_.funcs.erase(f);
      bad_defs_.insert(f);
      return;
    }
    for (Label l : value->dims) {
      if (!ir::contains(fd.dims, l)) {
        diags_.error(first_use(*value, l, def.value->loc),
                     "the right-hand side varies along `" + l->name +
                         "`, which is not a "
                         "dimension of `" +
                         f->name + labels_text(fd.dims) + "`; add `" + l->name +
                         "` to the shape of `" + f->name +
                         "` or reduce over it (rsum, rmax, "
                         "rmin, rdot)");
        prog_.funcs.erase(f);
        bad_defs_.insert(f);
        return;
      }
    }
    fd.value = value;
  }

  // Where an expression first indexes with label `l` where it varies along it (for a caret on
  // the culprit): only operands that vary along `l` are searched, so an access inside a
  // reduction over `l` (legally reduced away) is passed over.
  static Loc first_use(const ir::Expr& e, Label l, Loc fallback) {
    struct Find : ir::IRVisitor {
      Label l;
      Loc loc;
      bool found = false;
      void go(const ir::ExprPtr& c) {
        if (!found && ir::contains(c->dims, l)) c->accept(*this);
      }
      void visit(const ir::Access& a) override {
        if (!found && ir::contains(a.dims, l)) {
          loc = a.loc;
          found = true;
        }
      }
      void visit(const ir::LabelValue& v) override {
        if (!found && v.label == l) {
          loc = v.loc;
          found = true;
        }
      }
      void visit(const ir::Unary& u) override { go(u.a); }
      void visit(const ir::Binary& b) override {
        go(b.a);
        go(b.b);
      }
      void visit(const ir::Call& c) override {
        for (const ir::ExprPtr& a : c.args)
          go(a);
      }
      void visit(const ir::Reduce& r) override { go(r.a); }
      void visit(const ir::Dot& d) override {
        go(d.a);
        go(d.b);
      }
      void visit(const ir::Reshape& r) override { go(r.a); }
    } find;
    find.l = l;
    e.accept(find);
    return find.found ? find.loc : fallback;
  }

  void check_all_defined() {
    for (const Symbol& s : prog_.symbols) {
      if (s.kind == SymbolKind::Func && !prog_.funcs.count(&s) && !bad_defs_.count(&s))
        diags_.error(s.loc, "Func `" + s.name +
                                "` is declared but never defined; every Func "
                                "needs a definition `" +
                                s.name + "[...] = ...;`");
    }
  }

  void check_cycles() {
    // Depth-first search; a back edge is a cycle.
    std::map<const Symbol*, int> state; // 0 new, 1 on stack, 2 done
    std::vector<const Symbol*> stack;
    std::function<void(const Symbol*)> dfs = [&](const Symbol* f) {
      state[f] = 1;
      stack.push_back(f);
      for (const Symbol* d : prog_.funcs[f].deps) {
        if (!prog_.funcs.count(d)) continue;
        if (state[d] == 1) {
          std::string path;
          bool on = false;
          for (const Symbol* s : stack) {
            on |= s == d;
            if (on) path += s->name + " -> ";
          }
          diags_.error(prog_.funcs[d].loc, "Func `" + d->name + "` depends on itself (" + path +
                                               d->name +
                                               "); a definition may only read other "
                                               "Funcs");
          cyclic_ = true;
        } else if (state[d] == 0) {
          dfs(d);
        }
      }
      stack.pop_back();
      state[f] = 2;
    };
    for (const Symbol& s : prog_.symbols)
      if (prog_.funcs.count(&s) && state[&s] == 0) dfs(&s);
  }

  // ---- expressions ------------------------------------------------------------------------

  ExprPtr expr(const ast::Expr& e) {
    switch (e.kind) {
    case ast::ExprKind::Number:
      return number(e);
    case ast::ExprKind::Name:
      return name(e);
    case ast::ExprKind::Index:
      return index(e);
    case ast::ExprKind::Call:
      return call(e);
    case ast::ExprKind::Unary: {
      ExprPtr a = expr(*e.args[0]);
      if (!a) return nullptr;
      return std::make_shared<ir::Unary>(e.loc, e.text == "-" ? ir::UnOp::Neg : ir::UnOp::Plus, a);
    }
    case ast::ExprKind::Binary:
      return binary(e);
    }
    return nullptr;
  }

  ExprPtr number(const ast::Expr& e) {
    errno = 0;
    double v = std::strtod(e.text.c_str(), nullptr);
    if (errno == ERANGE || !std::isfinite(v)) {
      diags_.error(e.loc, "number `" + e.text + "` is out of range for float64");
      return nullptr;
    }
    return std::make_shared<ir::Const>(e.loc, v, e.is_integer);
  }

  ExprPtr name(const ast::Expr& e) {
    if (e.text == "inf")
      return std::make_shared<ir::Const>(e.loc, std::numeric_limits<double>::infinity(), false);
    const Symbol* s = prog_.find(e.text);
    if (!s) {
      diags_.error(e.loc, "`" + e.text + "` is not declared; declare it (`SIn " + e.text +
                              ";` for a scalar input)");
      return nullptr;
    }
    switch (s->kind) {
    case SymbolKind::SIn:
      return std::make_shared<ir::ScalarIn>(e.loc, s);
    case SymbolKind::In:
    case SymbolKind::Func:
      diags_.error(e.loc, "`" + e.text + "` is " + article_kind(s->kind) +
                              "; index it with dimension labels, as in `" + e.text + "[x]`");
      return nullptr;
    default:
      // A label's value: the position along it.
      return std::make_shared<ir::LabelValue>(e.loc, s);
    }
  }

  ExprPtr index(const ast::Expr& e) {
    const Symbol* s = prog_.find(e.text);
    if (!s) {
      diags_.error(e.loc, "`" + e.text + "` is not declared; declare it with `In " + e.text +
                              ";` (an input tensor) or `Func " + e.text + ";`");
      return nullptr;
    }
    if (s->kind != SymbolKind::In && s->kind != SymbolKind::Func) {
      diags_.error(e.loc, "`" + e.text + "` is " + article_kind(s->kind) +
                              " and cannot be indexed; only In tensors and Funcs take `[...]`");
      return nullptr;
    }
    Labels idx;
    std::vector<ExprPtr> pos;
    bool ok = true;
    for (size_t i = 0; i < e.args.size(); ++i) {
      const ast::Expr& a = *e.args[i];
      const Symbol* named = a.kind == ast::ExprKind::Name ? prog_.find(a.text) : nullptr;
      Label l = nullptr;
      if (a.kind == ast::ExprKind::Name &&
          (!named || named->is_label() || s->kind == SymbolKind::Func)) {
        l = label(a.text, a.loc);
        pos.push_back(nullptr);
      } else if (s->kind == SymbolKind::Func) {
        diags_.error(a.loc, "a Func is read at its labels only; `" + e.text +
                                "` is a Func, so read the shifted or gathered values from an "
                                "input, or give `" +
                                e.text + "` the position as a label");
        ok = false;
        continue;
      } else {
        ExprPtr p = position(a, s, i);
        if (!p) {
          ok = false;
          continue;
        }
        l = extent_label(*p, s, i, a.loc);
        pos.push_back(p);
      }
      if (!l) {
        ok = false;
        continue;
      }
      if (ir::contains(idx, l)) {
        diags_.error(a.loc, "`" + l->name + "` indexes two dimensions of `" + e.text +
                                "`; each dimension of an access needs its own label");
        ok = false;
        continue;
      }
      idx.push_back(l);
    }
    if (e.args.empty()) {
      diags_.error(e.loc, "`" + e.text +
                              "[]` has no dimension labels; a tensor has at least one "
                              "dimension (use SIn for a scalar)");
      return nullptr;
    }
    if (!ok) return nullptr;
    if (s->kind == SymbolKind::In) {
      auto it = in_rank_.find(s);
      if (it == in_rank_.end()) {
        in_rank_[s] = {idx.size(), e.loc};
      } else if (it->second.first != idx.size()) {
        auto labels = [](size_t n) { return std::to_string(n) + (n == 1 ? " label" : " labels"); };
        diags_.error(e.loc, "`" + e.text + "` is indexed with " + labels(idx.size()) +
                                " here but with " + labels(it->second.first) +
                                " elsewhere; an input tensor has one rank");
        diags_.note(it->second.second, "first indexed here");
        return nullptr;
      }
    } else {
      auto it = prog_.funcs.find(s);
      if (it == prog_.funcs.end()) return nullptr; // its definition has errors of its own
      if (it->second.dims.size() != idx.size()) {
        diags_.error(e.loc, "Func `" + e.text + "` has " + std::to_string(it->second.dims.size()) +
                                " dimensions " + labels_text(it->second.dims) +
                                " but is indexed "
                                "with " +
                                std::to_string(idx.size()));
        return nullptr;
      }
      if (current_ && !ir::contains(current_->deps, s)) current_->deps.push_back(s);
    }
    bool plain = std::all_of(pos.begin(), pos.end(), [](const ExprPtr& p) { return !p; });
    return std::make_shared<ir::Access>(e.loc, s, idx,
                                        plain ? std::vector<ExprPtr>{} : std::move(pos));
  }

  // A computed position of input `t`'s dimension `i`: a whole number.
  ExprPtr position(const ast::Expr& a, const Symbol* t, size_t i) {
    ExprPtr p = expr(a);
    if (!p) return nullptr;
    if (!p->is_int()) {
      diags_.error(a.loc, "position " + std::to_string(i + 1) + " of `" + t->name + "`, `" +
                              ir::to_dt(*p) +
                              "`, is a number, not a whole number; a position is a label or is "
                              "built of labels, integer literals, `len(...)`, `//`, `%` and "
                              "integer inputs (`In T: int;`)");
      return nullptr;
    }
    return p;
  }

  // The label whose size is the extent of the dimension a computed position reaches: the label
  // of `y + c` or `y - c` (c a whole number that does not vary), the declared range of an index
  // input (`In T: int(y)` for `P[x, T[x]]`), else the label that indexes that dimension alone
  // elsewhere.
  Label extent_label(const ir::Expr& p, const Symbol* t, size_t i, Loc loc) {
    std::function<Label(const ir::Expr&)> of = [&](const ir::Expr& e) -> Label {
      if (auto* v = e.as<ir::LabelValue>()) return v->label;
      if (auto* a = e.as<ir::Access>()) return a->tensor->range;
      if (auto* b = e.as<ir::Binary>()) {
        bool shift = b->op == ir::BinOp::Add || b->op == ir::BinOp::Sub;
        if (shift && b->b->dims.empty()) return of(*b->a);
        if (b->op == ir::BinOp::Add && b->a->dims.empty()) return of(*b->b);
      }
      return nullptr;
    };
    if (Label l = of(p)) return l;
    auto it = dim_label_.find({t, i});
    if (it != dim_label_.end()) return it->second;
    diags_.error(loc, "no label names the extent of dimension " + std::to_string(i + 1) + " of `" +
                          t->name + "`, which this position reaches; read `" + t->name +
                          "` with a label there somewhere (`" + t->name +
                          "[..., y, ...]`), shift a label (`y + 1`), or declare the index "
                          "input's range (`In T: int(y);`)");
    return nullptr;
  }

  ExprPtr binary(const ast::Expr& e) {
    ExprPtr a = expr(*e.args[0]);
    ExprPtr b = expr(*e.args[1]);
    if (!a || !b) return nullptr;
    if (e.text == "//" && (!a->is_int() || !b->is_int())) {
      diags_.error(e.loc, "`//` divides whole numbers (labels, sizes, integer literals and "
                          "inputs); for numbers write `floor(a / b)`");
      return nullptr;
    }
    static const std::pair<const char*, ir::BinOp> ops[] = {
        {"//", ir::BinOp::IntDiv}, {"+", ir::BinOp::Add}, {"-", ir::BinOp::Sub},
        {"*", ir::BinOp::Mul},     {"/", ir::BinOp::Div}, {"%", ir::BinOp::Mod},
        {"<", ir::BinOp::Lt},      {"<=", ir::BinOp::Le}, {">", ir::BinOp::Gt},
        {">=", ir::BinOp::Ge},     {"==", ir::BinOp::Eq}, {"!=", ir::BinOp::Ne}};
    for (const auto& [text, op] : ops)
      if (e.text == text)
        return std::make_shared<ir::Binary>(e.loc, op, a, b, ir::union_labels(a->dims, b->dims));
    throw InternalError("unknown binary operator " + e.text);
  }

  ExprPtr call(const ast::Expr& e) {
    const std::string& fn = e.text;
    if (prog_.find(fn) && !find_builtin(fn)) {
      diags_.error(e.loc, "`" + fn + "` is " + article_kind(prog_.find(fn)->kind) +
                              ", not a function; index tensors with `[...]`");
      return nullptr;
    }
    if (fn == "rsum" || fn == "rmax" || fn == "rmin") return reduce(e);
    if (fn == "rdot") return dot(e);
    if (fn == "len") return len(e);
    if (fn == "reshape") return reshape(e);
    if (fn == "program_id") return program_id(e);
    const Builtin* b = find_builtin(fn);
    if (!b) {
      std::string hint = closest_builtin(fn);
      diags_.error(e.loc, "unknown function `" + fn + "`" +
                              (hint.empty() ? std::string("; see docs/language.md for the list")
                                            : "; did you mean `" + hint + "`?"));
      for (const ast::ExprPtr& a : e.args)
        expr(*a);
      return nullptr;
    }
    if (static_cast<int>(e.args.size()) != b->arity) {
      diags_.error(e.loc, "`" + fn + "` takes " + std::to_string(b->arity) + " argument" +
                              (b->arity == 1 ? "" : "s") + ", not " +
                              std::to_string(e.args.size()));
      return nullptr;
    }
    std::vector<ExprPtr> args;
    Labels dims;
    bool ok = true;
    for (const ast::ExprPtr& a : e.args) {
      ExprPtr v = expr(*a);
      if (!v) {
        ok = false;
        continue;
      }
      dims = ir::union_labels(dims, v->dims);
      args.push_back(v);
    }
    if (!ok) return nullptr;
    return std::make_shared<ir::Call>(e.loc, fn, args, dims);
  }

  Label label_arg(const ast::Expr& a, const std::string& fn, bool need_rvar) {
    if (a.kind != ast::ExprKind::Name) {
      diags_.error(a.loc, "`" + fn + "` expects a dimension label here, not an expression");
      return nullptr;
    }
    Label l = label(a.text, a.loc);
    if (l && need_rvar && l->kind != SymbolKind::RVar) {
      diags_.error(a.loc, "`" + a.text + "` is a Var; `" + fn +
                              "` reduces over an RVar, so "
                              "declare it with `RVar " +
                              a.text + ";`");
      return nullptr;
    }
    return l;
  }

  ExprPtr reduce(const ast::Expr& e) {
    if (e.args.size() != 2) {
      diags_.error(e.loc, "`" + e.text +
                              "` takes 2 arguments (a tensor expression and the RVar "
                              "to reduce over), not " +
                              std::to_string(e.args.size()));
      return nullptr;
    }
    ExprPtr a = expr(*e.args[0]);
    Label r = label_arg(*e.args[1], e.text, true);
    if (!a || !r) return nullptr;
    if (!ir::contains(a->dims, r)) {
      diags_.error(e.args[1]->loc, "`" + e.text + "` reduces over `" + r->name +
                                       "`, but its "
                                       "operand does not vary along `" +
                                       r->name +
                                       "` (it varies "
                                       "along " +
                                       labels_text(a->dims) + ")");
      return nullptr;
    }
    ir::ReduceOp op = e.text == "rsum"   ? ir::ReduceOp::Sum
                      : e.text == "rmax" ? ir::ReduceOp::Max
                                         : ir::ReduceOp::Min;
    Labels dims;
    for (Label l : a->dims)
      if (l != r) dims.push_back(l);
    return std::make_shared<ir::Reduce>(e.loc, op, a, r, dims);
  }

  ExprPtr dot(const ast::Expr& e) {
    if (e.args.size() != 3) {
      diags_.error(e.loc, "`rdot` takes 3 arguments (left, right, and the RVar they share), not " +
                              std::to_string(e.args.size()));
      return nullptr;
    }
    ExprPtr a = expr(*e.args[0]);
    ExprPtr b = expr(*e.args[1]);
    Label r = label_arg(*e.args[2], "rdot", true);
    if (!a || !b || !r) return nullptr;
    for (const ExprPtr& side : {a, b}) {
      if (!ir::contains(side->dims, r)) {
        diags_.error(side->loc, "the " + std::string(side == a ? "left" : "right") +
                                    " operand of `rdot` does not vary along its reduction "
                                    "dimension `" +
                                    r->name + "` (it varies along " + labels_text(side->dims) +
                                    ")");
        return nullptr;
      }
    }
    Labels dims;
    for (Label l : ir::union_labels(a->dims, b->dims))
      if (l != r) dims.push_back(l);
    return std::make_shared<ir::Dot>(e.loc, a, b, r, dims);
  }

  ExprPtr len(const ast::Expr& e) {
    if (e.args.size() != 1) {
      diags_.error(e.loc, "`len` takes 1 argument (a dimension label), not " +
                              std::to_string(e.args.size()));
      return nullptr;
    }
    Label l = label_arg(*e.args[0], "len", false);
    if (!l) return nullptr;
    return std::make_shared<ir::Len>(e.loc, l);
  }

  ExprPtr reshape(const ast::Expr& e) {
    if (e.args.size() < 2) {
      diags_.error(e.loc, "`reshape` takes a tensor expression followed by the new shape, as in "
                          "`reshape(s[x], x, 1)`");
      return nullptr;
    }
    ExprPtr a = expr(*e.args[0]);
    std::vector<Label> shape;
    bool ok = a != nullptr;
    for (size_t i = 1; i < e.args.size(); ++i) {
      const ast::Expr& arg = *e.args[i];
      if (arg.kind == ast::ExprKind::Number && arg.is_integer && arg.text == "1") {
        shape.push_back(nullptr);
        continue;
      }
      if (arg.kind != ast::ExprKind::Name) {
        diags_.error(arg.loc, "the shape of `reshape` is made of dimension labels and literal "
                              "`1`s");
        ok = false;
        continue;
      }
      Label l = label(arg.text, arg.loc);
      if (!l) {
        ok = false;
        continue;
      }
      if (std::count(shape.begin(), shape.end(), l)) {
        diags_.error(arg.loc, "`" + arg.text + "` appears twice in the shape of `reshape`");
        ok = false;
        continue;
      }
      shape.push_back(l);
    }
    if (!ok) return nullptr;
    for (Label l : a->dims) {
      if (std::find(shape.begin(), shape.end(), l) == shape.end()) {
        diags_.error(e.loc, "`reshape` drops dimension `" + l->name +
                                "` of its operand (which "
                                "varies along " +
                                labels_text(a->dims) + "); keep `" + l->name +
                                "` in the new shape");
        return nullptr;
      }
    }
    return std::make_shared<ir::Reshape>(e.loc, a, shape);
  }

  ExprPtr program_id(const ast::Expr& e) {
    if (e.args.size() != 1 || e.args[0]->kind != ast::ExprKind::Number || !e.args[0]->is_integer ||
        (e.args[0]->text != "0" && e.args[0]->text != "1" && e.args[0]->text != "2")) {
      diags_.error(e.loc, "`program_id` takes one integer literal, the grid axis: 0, 1 or 2");
      return nullptr;
    }
    return std::make_shared<ir::ProgramId>(e.loc, std::stoi(e.args[0]->text));
  }

  const ast::Program& ast_;
  DiagnosticEngine& diags_;
  ir::Program prog_;
  ir::FuncDef* current_ = nullptr;
  std::map<const Symbol*, std::pair<size_t, Loc>> in_rank_;
  std::vector<std::pair<Symbol*, const ast::ElemType*>> typed_;
  std::map<std::pair<const Symbol*, size_t>, Label> dim_label_;
  std::set<const Symbol*> bad_defs_;
  bool cyclic_ = false;
};

} // namespace

ir::Program check_program(const ast::Program& program, DiagnosticEngine& diags) {
  return Checker(program, diags).run();
}

} // namespace dtc
