#include "kir/Dump.h"

#include <charconv>
#include <cmath>

namespace dtc::kir {
namespace {

std::string number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v); // the shortest exact text
  std::string s(buf, end);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

const char* reduce_name(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return "sum";
  case ReduceOp::Max:
    return "amax";
  case ReduceOp::Min:
    return "amin";
  }
  return "?";
}

const char* atomic_name(Atomic a) {
  switch (a) {
  case Atomic::None:
    return "store";
  case Atomic::Add:
    return "atomic_add";
  case Atomic::Max:
    return "atomic_max";
  case Atomic::Min:
    return "atomic_min";
  }
  return "?";
}

std::string extent(const Extent& x) {
  return x.param.empty() ? std::to_string(x.n) : x.param;
}

// An operand of an infix operator: parenthesized unless it is a leaf or a call.
std::string operand(const Expr& e) {
  bool infix = e.kind == ExprKind::Binary && e.op != BinOp::Max && e.op != BinOp::Min;
  return infix || e.kind == ExprKind::Neg ? "(" + dump(e) + ")" : dump(e);
}

std::string list(const std::vector<ExprPtr>& args) {
  std::string s;
  for (const ExprPtr& a : args)
    s += (s.empty() ? "" : ", ") + dump(*a);
  return s;
}

} // namespace

std::string dump(const Expr& e) {
  switch (e.kind) {
  case ExprKind::Var:
    return e.name;
  case ExprKind::Int:
    return std::to_string(e.value_int);
  case ExprKind::Float:
    return number(e.value_float);
  case ExprKind::Neg:
    return "-" + operand(*e.args[0]);
  case ExprKind::Binary:
    if (e.op == BinOp::Max || e.op == BinOp::Min)
      return std::string(e.op == BinOp::Max ? "maximum(" : "minimum(") + list(e.args) + ")";
    return operand(*e.args[0]) + " " + op_text(e.op) + " " + operand(*e.args[1]);
  case ExprKind::Call:
    return std::string(info(e.fn).name) + "(" + list(e.args) + ")";
  case ExprKind::Select:
    return "select(" + list(e.args) + ")";
  case ExprKind::Cast:
    return "cast<" + to_string(Type{e.type.scalar, e.type.elem_of, {}}) + ">(" + dump(*e.args[0]) +
           ")";
  case ExprKind::Load:
    return "load(" + dump(*e.args[0]) +
           (e.args.size() > 1 ? ", mask=" + dump(*e.args[1]) : std::string()) +
           (e.value_int ? ", evict_last" : "") + ")";
  case ExprKind::Arange:
    return "arange(" + extent(e.type.shape[0]) + ")";
  case ExprKind::Expand: {
    std::string axes;
    for (bool keep : e.expand)
      axes += std::string(axes.empty() ? "" : ", ") + (keep ? ":" : "new");
    return "expand(" + dump(*e.args[0]) + ", [" + axes + "])";
  }
  case ExprKind::Full:
    return "full(" + to_string(e.type.shape) + ", " + number(e.value_float) + ")";
  case ExprKind::Reduce:
    return std::string(reduce_name(e.reduce)) + "(" + dump(*e.args[0]) +
           ", axis=" + std::to_string(e.value_int) + ")";
  case ExprKind::Dot:
    return "dot(" + list(e.args) + (e.precision.empty() ? "" : ", " + e.precision) + ")";
  case ExprKind::Reshape:
    return "reshape(" + dump(*e.args[0]) + ", " + to_string(e.type.shape) + ")";
  case ExprKind::Trans:
    return "trans(" + dump(*e.args[0]) + ")";
  case ExprKind::Half:
    return "half" + std::to_string(e.value_int) + "(" + dump(*e.args[0]) + ")";
  case ExprKind::ProgramId:
    return "program_id(" + std::to_string(e.value_int) + ")";
  case ExprKind::NumPrograms:
    return "num_programs(" + std::to_string(e.value_int) + ")";
  case ExprKind::MakeDesc:
    return "make_desc(" + list(e.args) + ", " + to_string(e.type.shape) + ") if " + e.name;
  case ExprKind::DescLoad: {
    std::vector<ExprPtr> offsets(e.args.begin() + 1, e.args.end() - 1);
    return std::string(e.value_int ? "trans(" : "(") + dump(*e.args[0]) + ".load(" + list(offsets) +
           ")) if " + e.name + " else " + dump(*e.args.back());
  }
  }
  return "?";
}

std::string dump(const std::vector<StmtPtr>& stmts, int depth) {
  std::string out, indent(2 * depth, ' ');
  for (const StmtPtr& s : stmts) {
    switch (s->kind) {
    case StmtKind::Assign:
      out += indent + s->name + ": " + to_string(s->value->type) + " = " + dump(*s->value) + "\n";
      break;
    case StmtKind::Store:
      out += indent + atomic_name(s->atomic) + "(" + dump(*s->ptr) + ", " + dump(*s->value) +
             (s->mask ? ", mask=" + dump(*s->mask) : std::string()) + ")";
      if (s->desc) {
        out += " or desc_store(" + dump(*s->desc);
        for (const Stmt::DescPart& part : s->desc_parts) {
          out += ", [";
          for (size_t i = 0; i < part.offsets.size(); ++i)
            out += (i ? ", " : "") + dump(*part.offsets[i]);
          out += "]: " + dump(*part.value);
        }
        out += ") if " + s->desc_flag;
      }
      out += "\n";
      break;
    case StmtKind::For:
      out += indent + "for " + s->name + " in range(" + dump(*s->lo) + ", " + dump(*s->hi) + ", " +
             dump(*s->step) +
             (s->warp_specialize ? ", warp_specialize=" + dump(*s->warp_specialize) : "") +
             (s->flatten ? ", flatten" : "") + "):" + (s->full_tiles ? "  // full tiles" : "") +
             "\n" + dump(s->body, depth + 1);
      break;
    case StmtKind::Comment:
      out += indent + "// " + s->text + "\n";
      break;
    case StmtKind::Barrier:
      out += indent + "barrier()\n";
      break;
    }
  }
  return out;
}

std::string dump(const Kernel& kernel) {
  std::string params;
  for (const Param& p : kernel.params)
    params += (params.empty() ? "" : ", ") + p.name + ": " + (p.is_constexpr ? "constexpr " : "") +
              to_string(p.type);
  std::string grid;
  for (const GridFactor& g : kernel.grid)
    grid += (grid.empty() ? "" : ", ") +
            (g.size.empty() ? std::to_string(g.divisor)
                            : "cdiv(" + g.size + ", " + std::to_string(g.divisor) + ")");
  std::string out = "kernel " + kernel.name + "(" + params +
                    ") warps=" + std::to_string(kernel.num_warps) +
                    " stages=" + std::to_string(kernel.num_stages) + " grid=[" + grid + "]";
  if (kernel.output_init) out += " init=" + number(*kernel.output_init);
  if (!kernel.dot_precision.empty()) out += " dot=" + kernel.dot_precision;
  if (kernel.epilogue_rows) out += " epilogue_rows=" + std::to_string(kernel.epilogue_rows);
  return out + "\n" + dump(kernel.body, 1);
}

} // namespace dtc::kir
