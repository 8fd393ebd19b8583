// Prints kernel IR as a @triton.jit Python function.
#include "codegen/PythonCodegen.h"

namespace dtc {

static void print_stmts(const std::vector<kir::StmtPtr>& stmts, int depth, std::string& out) {
  std::string indent(4 * depth, ' ');
  for (const kir::StmtPtr& s : stmts) {
    switch (s->kind) {
    case kir::StmtKind::Assign:
      out += indent + s->target + " = " + s->value + "\n";
      break;
    case kir::StmtKind::Comment:
      out += indent + "# " + s->value + "\n";
      break;
    case kir::StmtKind::Expr:
      out += indent + s->value + "\n";
      break;
    case kir::StmtKind::Store:
      out += indent + (s->atomic.empty() ? "tl.store(" : "tl.atomic_" + s->atomic + "(") +
             s->target + ", " + s->value + (s->mask.empty() ? "" : ", mask=" + s->mask) + ")\n";
      break;
    case kir::StmtKind::For:
      out +=
          indent + "for " + s->var + " in range(" + s->lo + ", " + s->hi + ", " + s->step + "):\n";
      print_stmts(s->body, depth + 1, out);
      break;
    }
  }
}

std::string print_kernel(const kir::Kernel& kernel) {
  std::string out = "@triton.jit\ndef " + kernel.name + "(\n";
  std::string line;
  auto flush = [&] {
    if (!line.empty()) out += "    " + line + "\n";
    line.clear();
  };
  bool in_sizes = false;
  for (const kir::Param& p : kernel.params) {
    bool starts_group = p.name.size() > 4 && p.name.compare(p.name.size() - 4, 4, "_ptr") == 0;
    bool is_size = p.name.size() > 5 && p.name.compare(p.name.size() - 5, 5, "_size") == 0;
    if (starts_group || (is_size && !in_sizes) || p.is_constexpr) flush();
    if (is_size) in_sizes = true;
    if (!line.empty() && line.size() > 70) flush();
    line += (line.empty() ? "" : " ") + p.name + (p.is_constexpr ? ": tl.constexpr" : "") + ",";
  }
  flush();
  out += "):\n";
  out += "    \"\"\"" + kernel.doc + "\"\"\"\n";
  print_stmts(kernel.body, 1, out);
  return out;
}

} // namespace dtc
