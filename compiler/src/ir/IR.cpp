#include "ir/IR.h"

#include "ir/IRVisitor.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <unordered_map>

namespace dtc::ir {

#define DTC_IR_ACCEPT(Name)                                                                        \
  void Name::accept(IRVisitor& v) const {                                                          \
    v.visit(*this);                                                                                \
  }
DTC_IR_ACCEPT(Const)
DTC_IR_ACCEPT(ScalarIn)
DTC_IR_ACCEPT(Len)
DTC_IR_ACCEPT(ProgramId)
DTC_IR_ACCEPT(LabelValue)
DTC_IR_ACCEPT(Access)
DTC_IR_ACCEPT(Unary)
DTC_IR_ACCEPT(Binary)
DTC_IR_ACCEPT(Call)
DTC_IR_ACCEPT(Reduce)
DTC_IR_ACCEPT(Dot)
DTC_IR_ACCEPT(Reshape)
#undef DTC_IR_ACCEPT

const char* kind_name(SymbolKind kind) {
  switch (kind) {
  case SymbolKind::Func:
    return "Func";
  case SymbolKind::In:
    return "In";
  case SymbolKind::SIn:
    return "SIn";
  case SymbolKind::Var:
    return "Var";
  case SymbolKind::RVar:
    return "RVar";
  }
  return "?";
}

const char* op_text(BinOp op) {
  switch (op) {
  case BinOp::Add:
    return "+";
  case BinOp::Sub:
    return "-";
  case BinOp::Mul:
    return "*";
  case BinOp::Div:
    return "/";
  case BinOp::IntDiv:
    return "//";
  case BinOp::Mod:
    return "%";
  case BinOp::Lt:
    return "<";
  case BinOp::Le:
    return "<=";
  case BinOp::Gt:
    return ">";
  case BinOp::Ge:
    return ">=";
  case BinOp::Eq:
    return "==";
  case BinOp::Ne:
    return "!=";
  }
  return "?";
}

bool is_comparison(BinOp op) {
  return op >= BinOp::Lt;
}

const char* type_name(ValueType t) {
  return t == ValueType::Int ? "whole number" : "number";
}

ValueType combined_type(const std::vector<const Expr*>& operands) {
  bool all_whole = true, computed = false;
  for (const Expr* e : operands) {
    all_whole = all_whole && e->is_int();
    computed = computed || !e->as<Const>();
  }
  return all_whole && computed ? ValueType::Int : ValueType::Float;
}

Labels Access::position_dims(const Labels& idx, const std::vector<ExprPtr>& p) {
  Labels dims;
  for (size_t i = 0; i < idx.size(); ++i)
    dims = union_labels(dims, i < p.size() && p[i] ? p[i]->dims : Labels{idx[i]});
  return dims;
}

const char* reduce_name(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return "rsum";
  case ReduceOp::Max:
    return "rmax";
  case ReduceOp::Min:
    return "rmin";
  }
  return "?";
}

Labels union_labels(const Labels& a, const Labels& b) {
  Labels out = a;
  for (Label l : b)
    if (!contains(out, l)) out.push_back(l);
  return out;
}

bool contains(const Labels& labels, Label l) {
  for (Label x : labels)
    if (x == l) return true;
  return false;
}

ExprPtr IRMutator::mutate(const ExprPtr& e) {
  switch (e->kind) {
  case ExprKind::Const:
    return visit(static_cast<const Const&>(*e), e);
  case ExprKind::ScalarIn:
    return visit(static_cast<const ScalarIn&>(*e), e);
  case ExprKind::Len:
    return visit(static_cast<const Len&>(*e), e);
  case ExprKind::ProgramId:
    return visit(static_cast<const ProgramId&>(*e), e);
  case ExprKind::LabelValue:
    return visit(static_cast<const LabelValue&>(*e), e);
  case ExprKind::Access:
    return visit(static_cast<const Access&>(*e), e);
  case ExprKind::Unary:
    return visit(static_cast<const Unary&>(*e), e);
  case ExprKind::Binary:
    return visit(static_cast<const Binary&>(*e), e);
  case ExprKind::Call:
    return visit(static_cast<const Call&>(*e), e);
  case ExprKind::Reduce:
    return visit(static_cast<const Reduce&>(*e), e);
  case ExprKind::Dot:
    return visit(static_cast<const Dot&>(*e), e);
  case ExprKind::Reshape:
    return visit(static_cast<const Reshape&>(*e), e);
  }
  throw InternalError("IRMutator: unknown expression kind");
}

ExprPtr IRMutator::visit(const Access& e, const ExprPtr& self) {
  if (e.pos.empty()) return self;
  std::vector<ExprPtr> pos;
  bool changed = false;
  for (const ExprPtr& p : e.pos) {
    pos.push_back(p ? mutate(p) : nullptr);
    changed |= pos.back() != p;
  }
  return changed ? std::make_shared<Access>(e.loc, e.tensor, e.index, pos) : self;
}
ExprPtr IRMutator::visit(const Unary& e, const ExprPtr& self) {
  ExprPtr a = mutate(e.a);
  return a == e.a ? self : std::make_shared<Unary>(e.loc, e.op, a);
}
ExprPtr IRMutator::visit(const Binary& e, const ExprPtr& self) {
  ExprPtr a = mutate(e.a), b = mutate(e.b);
  if (a == e.a && b == e.b) return self;
  return std::make_shared<Binary>(e.loc, e.op, a, b, union_labels(a->dims, b->dims));
}
ExprPtr IRMutator::visit(const Call& e, const ExprPtr& self) {
  std::vector<ExprPtr> args;
  bool changed = false;
  Labels dims;
  for (const ExprPtr& a : e.args) {
    args.push_back(mutate(a));
    changed |= args.back() != a;
    dims = union_labels(dims, args.back()->dims);
  }
  return changed ? std::make_shared<Call>(e.loc, e.fn, args, dims) : self;
}
// A rewritten operand may vary along fewer labels (an inlined `f[j] = 1` is a constant): the
// result's labels follow from the new operands.
static Labels without(Labels labels, Label l) {
  labels.erase(std::remove(labels.begin(), labels.end(), l), labels.end());
  return labels;
}
ExprPtr IRMutator::visit(const Reduce& e, const ExprPtr& self) {
  ExprPtr a = mutate(e.a);
  return a == e.a ? self
                  : std::make_shared<Reduce>(e.loc, e.op, a, e.rvar, without(a->dims, e.rvar));
}
ExprPtr IRMutator::visit(const Dot& e, const ExprPtr& self) {
  ExprPtr a = mutate(e.a), b = mutate(e.b);
  if (a == e.a && b == e.b) return self;
  return std::make_shared<Dot>(e.loc, a, b, e.rvar,
                               without(union_labels(a->dims, b->dims), e.rvar));
}
ExprPtr IRMutator::visit(const Reshape& e, const ExprPtr& self) {
  ExprPtr a = mutate(e.a);
  return a == e.a ? self : std::make_shared<Reshape>(e.loc, a, e.shape);
}

void for_each_access(const Expr& e, const std::function<void(const Access&, const Labels&)>& fn) {
  std::function<void(const Expr&, Labels&)> walk = [&](const Expr& x, Labels& bound) {
    if (auto* a = x.as<Access>()) {
      fn(*a, bound);
      for (const ExprPtr& p : a->pos) // a gather's index input
        if (p) walk(*p, bound);
      return;
    }
    Label rvar = nullptr;
    if (auto* r = x.as<Reduce>()) rvar = r->rvar;
    if (auto* d = x.as<Dot>()) rvar = d->rvar;
    if (rvar) bound.push_back(rvar);
    for (const Expr* k : children(x))
      walk(*k, bound);
    if (rvar) bound.pop_back();
  };
  Labels bound;
  walk(e, bound);
}

int height(const Expr& root) {
  std::unordered_map<const Expr*, int> memo;
  std::vector<std::pair<const Expr*, bool>> stack{{&root, false}};
  while (!stack.empty()) {
    auto [e, expanded] = stack.back();
    stack.pop_back();
    if (memo.count(e)) continue;
    std::vector<const Expr*> kids = children(*e);
    if (!expanded) {
      stack.push_back({e, true});
      for (const Expr* k : kids)
        if (!memo.count(k)) stack.push_back({k, false});
      continue;
    }
    int h = 0;
    for (const Expr* k : kids)
      h = std::max(h, memo.at(k));
    memo[e] = h + 1;
  }
  return memo.at(&root);
}

std::vector<const Expr*> children(const Expr& e) {
  struct Kids : IRVisitor {
    std::vector<const Expr*> kids;
    void visit(const Unary& x) override { kids = {x.a.get()}; }
    void visit(const Binary& x) override { kids = {x.a.get(), x.b.get()}; }
    void visit(const Call& x) override {
      for (const ExprPtr& a : x.args)
        kids.push_back(a.get());
    }
    void visit(const Reduce& x) override { kids = {x.a.get()}; }
    void visit(const Dot& x) override { kids = {x.a.get(), x.b.get()}; }
    void visit(const Reshape& x) override { kids = {x.a.get()}; }
    void visit(const Access& x) override {
      for (const ExprPtr& p : x.pos)
        if (p) kids.push_back(p.get());
    }
  } kids;
  e.accept(kids);
  return kids.kids;
}

std::string python_float(double v) {
  if (std::isinf(v)) return v > 0 ? "float(\"inf\")" : "float(\"-inf\")";
  if (std::isnan(v)) return "float(\"nan\")";
  std::ostringstream os;
  os.precision(17);
  os << v;
  std::string s = os.str();
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

namespace {

std::string number_text(double v, bool is_int) {
  if (is_int && std::isfinite(v) && std::fabs(v) < 1e15)
    return std::to_string(static_cast<long long>(v));
  return python_float(v);
}

int precedence(const Expr& e) {
  if (auto* b = e.as<Binary>()) {
    if (is_comparison(b->op)) return 1;
    if (b->op == BinOp::Add || b->op == BinOp::Sub) return 2;
    return 3;
  }
  if (e.as<Unary>()) return 4;
  return 5;
}

class DtPrinter : public IRVisitor {
public:
  std::string out;
  void emit(const Expr& e, int min_prec) {
    bool paren = precedence(e) < min_prec;
    if (paren) out += "(";
    e.accept(*this);
    if (paren) out += ")";
  }
  void visit(const Const& e) override { out += number_text(e.value, e.is_int); }
  void visit(const ScalarIn& e) override { out += e.symbol->name; }
  void visit(const Len& e) override { out += "len(" + e.label->name + ")"; }
  void visit(const ProgramId& e) override { out += "program_id(" + std::to_string(e.axis) + ")"; }
  void visit(const LabelValue& e) override { out += e.label->name; }
  void visit(const Access& e) override {
    out += e.tensor->name + "[";
    for (size_t i = 0; i < e.index.size(); ++i) {
      if (i) out += ", ";
      if (const Expr* p = e.position(i))
        emit(*p, 0);
      else
        out += e.index[i]->name;
    }
    out += "]";
  }
  void visit(const Unary& e) override {
    out += e.op == UnOp::Neg ? "-" : "+";
    emit(*e.a, 4);
  }
  void visit(const Binary& e) override {
    int p = precedence(e);
    emit(*e.a, p);
    out += std::string(" ") + op_text(e.op) + " ";
    emit(*e.b, p + 1);
  }
  void visit(const Call& e) override {
    out += e.fn + "(";
    for (size_t i = 0; i < e.args.size(); ++i) {
      if (i) out += ", ";
      emit(*e.args[i], 0);
    }
    out += ")";
  }
  void visit(const Reduce& e) override {
    out += std::string(reduce_name(e.op)) + "(";
    emit(*e.a, 0);
    out += ", " + e.rvar->name + ")";
  }
  void visit(const Dot& e) override {
    out += "rdot(";
    emit(*e.a, 0);
    out += ", ";
    emit(*e.b, 0);
    out += ", " + e.rvar->name + ")";
  }
  void visit(const Reshape& e) override {
    out += "reshape(";
    emit(*e.a, 0);
    for (Label l : e.shape)
      out += ", " + (l ? l->name : std::string("1"));
    out += ")";
  }
};

std::string dims_text(const Labels& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + dims[i]->name;
  return s + "]";
}

} // namespace

std::string to_dt(const Expr& e) {
  DtPrinter p;
  p.emit(e, 0);
  return p.out;
}

std::string print(const Program& program) {
  std::string out;
  for (const Symbol& s : program.symbols) {
    out += std::string(kind_name(s.kind)) + " " + s.name;
    if (s.is_int) out += std::string(": int") + (s.range ? "(" + s.range->name + ")" : "");
    if (s.example) out += " = " + s.example_text;
    out += "\n";
  }
  for (const Symbol& s : program.symbols) {
    auto it = program.funcs.find(&s);
    if (it == program.funcs.end()) continue;
    const FuncDef& f = it->second;
    out += s.name + dims_text(f.dims) + " = " + to_dt(*f.value) + "   # varies along " +
           dims_text(f.value->dims);
    if (!f.deps.empty()) {
      out += "; reads";
      for (const Symbol* d : f.deps)
        out += " " + d->name;
    }
    out += "\n";
  }
  return out;
}

} // namespace dtc::ir
