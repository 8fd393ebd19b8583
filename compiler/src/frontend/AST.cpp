#include "frontend/AST.h"

namespace dtc::ast {

const char* decl_keyword(DeclKind kind) {
  switch (kind) {
  case DeclKind::Func:
    return "Func";
  case DeclKind::In:
    return "In";
  case DeclKind::SIn:
    return "SIn";
  case DeclKind::Var:
    return "Var";
  case DeclKind::RVar:
    return "RVar";
  }
  return "?";
}

static std::string at(Loc loc) {
  return " @" + std::to_string(loc.line) + ":" + std::to_string(loc.col);
}

static void print_expr(const Expr& e, int depth, std::string& out) {
  out += std::string(2 * depth, ' ');
  switch (e.kind) {
  case ExprKind::Number:
    out += "Number " + e.text;
    break;
  case ExprKind::Name:
    out += "Name " + e.text;
    break;
  case ExprKind::Index:
    out += "Index " + e.text;
    break;
  case ExprKind::Call:
    out += "Call " + e.text;
    break;
  case ExprKind::Unary:
    out += "Unary " + e.text;
    break;
  case ExprKind::Binary:
    out += "Binary " + e.text;
    break;
  }
  out += at(e.loc) + "\n";
  for (const ExprPtr& a : e.args)
    print_expr(*a, depth + 1, out);
}

std::string print(const Program& program) {
  std::string out;
  for (const Decl& d : program.decls) {
    out += std::string("Decl ") + decl_keyword(d.kind);
    for (size_t i = 0; i < d.names.size(); ++i) {
      out += " " + d.names[i].text;
      const ElemType& t = i < d.types.size() ? d.types[i] : ElemType{};
      if (t.written)
        out += std::string(":") + (t.is_int ? "int" : "float") +
               (t.range.text.empty() ? "" : "(" + t.range.text + ")");
      if (!t.example.text.empty()) out += "=" + t.example.text;
    }
    out += at(d.loc) + "\n";
  }
  for (const Definition& def : program.definitions) {
    out += "Define " + def.func.text + "[";
    for (size_t i = 0; i < def.labels.size(); ++i)
      out += (i ? ", " : "") + def.labels[i].text;
    out += "]" + at(def.loc) + "\n";
    print_expr(*def.value, 1, out);
  }
  for (const ScheduleStmt& s : program.schedule) {
    out += "Schedule " + s.func.text + "." + s.primitive.text + "(";
    for (size_t i = 0; i < s.args.size(); ++i) {
      const ScheduleArg& a = s.args[i];
      out += i ? ", " : "";
      if (a.name.empty()) {
        out += std::to_string(a.value);
        continue;
      }
      out += a.name;
      if (a.has_value) {
        out += ":";
        if (!a.split_name.empty()) out += a.split_name + "/";
        out += std::to_string(a.value);
      }
    }
    out += ")" + at(s.loc) + "\n";
  }
  return out;
}

} // namespace dtc::ast
