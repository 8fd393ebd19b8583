// Prints kernel IR as Python: expressions with the fewest parentheses Python's precedence
// allows, and each kernel as a @triton.jit function. The only place kernel code becomes text.
#include "codegen/PythonCodegen.h"
#include "codegen/TritonMath.h"
#include "ir/IR.h"

#include <cmath>
#include <utility>

namespace dtc {
namespace kir {

std::string dtype_text(const Type& t) {
  switch (t.scalar) {
  case Scalar::F32:
    return "tl.float32";
  case Scalar::I64:
    return "tl.int64";
  case Scalar::Index:
    return kIndexParam;
  case Scalar::I32:
    return "tl.int32";
  case Scalar::I1:
    return "tl.int1";
  case Scalar::Elem:
    return t.elem_of + ".dtype.element_ty";
  case Scalar::Int:
  case Scalar::Ptr:
  case Scalar::Desc:
    break;
  }
  throw InternalError("no Triton dtype for " + to_string(t));
}

namespace {

// Python precedence, lowest first.
// Python's: comparisons bind more loosely than `|`, which binds more loosely than `&`.
// kCond: a conditional expression (`a if c else b`), below everything.
enum Prec { kCond = 0, kCompare = 1, kOr = 2, kAnd = 3, kAdd = 4, kMul = 5, kUnary = 6, kAtom = 7 };

struct Printed {
  std::string text;
  int prec = kAtom;
};

std::string shape_text(const Shape& s) {
  return to_string(s);
}

std::string paren(const Printed& p, int min_prec) {
  return p.prec < min_prec ? "(" + p.text + ")" : p.text;
}

int precedence(BinOp op) {
  if (is_comparison(op)) return kCompare;
  if (op == BinOp::And) return kAnd;
  if (op == BinOp::Or) return kOr;
  if (op == BinOp::Add || op == BinOp::Sub) return kAdd;
  return kMul;
}

Printed print_expr(const Expr& e, Dialect d);

// The shared-memory layout of a descriptor's tiles (MakeDesc `e`) in Gluon.
std::string shared_layout(const Expr& e) {
  DTC_ASSERT(e.args[0]->kind == ExprKind::Var, "a descriptor over a pointer parameter");
  return gluon_shared_layout(e.type.shape, e.args[0]->name);
}

// `range(lo, hi, step)`, or `tl.range(...)` with Triton's warp specialization or flattening
// (Gluon's loops are plain: its partitions are written out).
std::string loop_head(const Stmt& s, Dialect d) {
  bool options = d == Dialect::Triton && (s.warp_specialize || s.flatten);
  return std::string(options ? "tl.range(" : "range(") + print_expr(*s.lo, d).text + ", " +
         print_expr(*s.hi, d).text + ", " + print_expr(*s.step, d).text +
         (options && s.warp_specialize
              ? ", warp_specialize=" + print_expr(*s.warp_specialize, d).text
              : "") +
         (options && s.flatten ? ", flatten=True" : "") + ")";
}

std::string args_text(const Expr& e, Dialect d, size_t from = 0, size_t to = std::string::npos) {
  std::string s;
  for (size_t i = from; i < std::min(to, e.args.size()); ++i)
    s += (i > from ? ", " : "") + print_expr(*e.args[i], d).text;
  return s;
}

// A cast of a value that may be a plain Python number under the interpreter (a loop variable,
// a scalar argument, arithmetic on them) is written `tl.cast(v, T)`: a number has no `.to`.
bool maybe_python_number(const Expr& e) {
  if (!e.type.shape.empty()) return false;
  switch (e.kind) {
  case ExprKind::Var:
  case ExprKind::Int:
  case ExprKind::Float:
    return true;
  case ExprKind::Neg:
  case ExprKind::Binary:
    for (const ExprPtr& a : e.args)
      if (!maybe_python_number(*a)) return false;
    return true;
  default:
    return false;
  }
}

Printed print_expr(const Expr& e, Dialect d) {
  switch (e.kind) {
  case ExprKind::Var:
    return {e.name};
  case ExprKind::Int:
    return {std::to_string(e.value_int), e.value_int < 0 ? kUnary : kAtom};
  case ExprKind::Float:
    return {ir::python_float(e.value_float), e.value_float < 0 ? kUnary : kAtom};
  case ExprKind::Neg:
    return {"-" + paren(print_expr(*e.args[0], d), kUnary), kUnary};
  case ExprKind::Binary: {
    if (e.op == BinOp::Max || e.op == BinOp::Min) {
      // tl.maximum's default (PropagateNan.NONE) returns the other operand where one is NaN on
      // the GPU; torch.maximum returns NaN. Integers have no NaN.
      std::string fn = e.op == BinOp::Max ? "tl.maximum(" : "tl.minimum(";
      return {fn + args_text(e, d) +
              (e.type.is_float() ? ", propagate_nan=tl.PropagateNan.ALL" : "") + ")"};
    }
    int p = precedence(e.op);
    // Comparisons never chain in the generated code: Python would read `a < b < c` as a chain.
    int left_min = p == kCompare ? kCompare + 1 : p;
    return {paren(print_expr(*e.args[0], d), left_min) + " " + op_text(e.op) + " " +
                paren(print_expr(*e.args[1], d), p + 1),
            p};
  }
  case ExprKind::Call:
    return {std::string(triton_function(e.fn)) + "(" + args_text(e, d) + ")"};
  case ExprKind::Select:
    return {"tl.where(" + args_text(e, d) + ")"};
  case ExprKind::Cast: {
    const Expr& a = *e.args[0];
    if (maybe_python_number(a))
      return {"tl.cast(" + print_expr(a, d).text + ", " + dtype_text(e.type) + ")"};
    return {paren(print_expr(a, d), kAtom) + ".to(" + dtype_text(e.type) + ")"};
  }
  case ExprKind::Load:
    return {"tl.load(" + print_expr(*e.args[0], d).text +
            (e.args.size() > 1 ? ", mask=" + print_expr(*e.args[1], d).text + ", other=0.0" : "") +
            (e.value_int ? ", eviction_policy=\"evict_last\"" : "") + ")"};
  case ExprKind::Arange: {
    // Gluon's ranges and fills take the layout of the values they meet (its AutoLayout): the
    // accumulator's, in a warp-specialized product's epilogue.
    const Extent& x = e.type.shape[0];
    return {std::string(d == Dialect::Gluon ? "gl" : "tl") + ".arange(0, " +
            (x.param.empty() ? std::to_string(x.n) : x.param) + ")"};
  }
  case ExprKind::Expand: {
    std::string s;
    for (bool k : e.expand)
      s += std::string(s.empty() ? "" : ", ") + (k ? ":" : "None");
    return {paren(print_expr(*e.args[0], d), kAtom) + "[" + s + "]"};
  }
  case ExprKind::Full:
    if (e.value_float == 0 && !std::signbit(e.value_float) && d == Dialect::Triton)
      return {"tl.zeros(" + shape_text(e.type.shape) + ", tl.float32)"};
    return {std::string(d == Dialect::Gluon ? "gl" : "tl") + ".full(" + shape_text(e.type.shape) +
            ", " + ir::python_float(e.value_float) + ", tl.float32)"};
  case ExprKind::Reduce: {
    // tl.max and tl.min drop NaN: a maximum or minimum goes through a helper that returns NaN
    // where the reduced values hold one (kPrinterHelpers).
    std::string axis = ", axis=" + std::to_string(e.value_int);
    if (e.reduce == ReduceOp::Sum)
      return {"tl.sum(" + print_expr(*e.args[0], d).text + axis + ", keep_dims=True)"};
    return {std::string(e.reduce == ReduceOp::Max ? "_dt_max(" : "_dt_min(") +
            print_expr(*e.args[0], d).text + axis + ")"};
  }
  case ExprKind::Dot:
    return {"tl.dot(" + args_text(e, d) +
            (e.precision.empty() ? "" : ", input_precision=\"" + e.precision + "\"") + ")"};
  case ExprKind::Reshape:
    return {"tl.reshape(" + print_expr(*e.args[0], d).text + ", " + shape_text(e.type.shape) + ")"};
  case ExprKind::Trans:
    return {"tl.trans(" + print_expr(*e.args[0], d).text + ")"};
  case ExprKind::ProgramId:
    return {"tl.program_id(" + std::to_string(e.value_int) + ")"};
  case ExprKind::NumPrograms:
    return {"tl.num_programs(" + std::to_string(e.value_int) + ")"};
  case ExprKind::MakeDesc: {
    // Made only where the constexpr flag says the tensor qualifies (Triton folds the branch).
    const Shape& b = e.type.shape;
    auto extent = [](const Extent& x) { return x.param.empty() ? std::to_string(x.n) : x.param; };
    size_t rank = b.size();
    std::string sizes, strides, block;
    for (size_t i = 0; i < rank; ++i) {
      sizes += (i ? ", " : "") + print_expr(*e.args[1 + i], d).text;
      strides += (i + 1 < rank ? print_expr(*e.args[1 + rank + i], d).text + ", " : "1");
      block += (i ? ", " : "") + extent(b[i]);
    }
    std::string ptr = print_expr(*e.args[0], d).text;
    if (d == Dialect::Gluon) // the layout of the shared memory the tiles are copied into
      return {"tma.make_tensor_descriptor(" + ptr + ", [" + sizes + "], [" + strides + "], [" +
                  block + "], " + shared_layout(e) + ") if " + e.name + " else None",
              kCond};
    return {"tl.make_tensor_descriptor(" + ptr + ", [" + sizes + "], [" + strides + "], [" + block +
                "]) if " + e.name + " else None",
            kCond};
  }
  case ExprKind::Half: {
    // Columns [0, c/2) or [c/2, c): the tile reshaped to [r, 2, c/2], the pair axis moved last
    // and split (Triton's epilogue subtiling).
    const Shape& shape = e.args[0]->type.shape;
    return {"tl.split(tl.permute(tl.reshape(" + print_expr(*e.args[0], d).text + ", [" +
            std::to_string(shape[0].n) + ", 2, " + std::to_string(shape[1].n / 2) +
            "]), (0, 2, 1)))[" + std::to_string(e.value_int) + "]"};
  }
  case ExprKind::DescLoad: {
    std::string offsets;
    for (size_t i = 1; i + 1 < e.args.size(); ++i)
      offsets += (i > 1 ? ", " : "") + print_expr(*e.args[i], d).text;
    std::string block = print_expr(*e.args[0], d).text + ".load([" + offsets + "])";
    const Shape& b = e.args[0]->type.shape;
    if (b.size() > 2) { // the leading dimensions of one element dropped
      auto extent = [](const Extent& x) { return x.param.empty() ? std::to_string(x.n) : x.param; };
      block = "tl.reshape(" + block + ", [" + extent(b[b.size() - 2]) + ", " +
              extent(b[b.size() - 1]) + "])";
    }
    if (e.value_int) block = "tl.trans(" + block + ")";
    return {block + " if " + e.name + " else " + paren(print_expr(*e.args.back(), d), kCond + 1),
            kCond};
  }
  }
  throw InternalError("print: unknown kernel expression kind");
}

void print_stmts(const std::vector<StmtPtr>& stmts, int depth, std::string& out, Dialect d) {
  std::string indent(4 * depth, ' ');
  for (const StmtPtr& s : stmts) {
    switch (s->kind) {
    case StmtKind::Assign:
      out += indent + s->name + " = " + print_expr(*s->value, d).text + "\n";
      break;
    case StmtKind::Comment:
      out += indent + "# " + s->text + "\n";
      break;
    case StmtKind::Barrier:
      out += indent + "tl.debug_barrier()\n";
      break;
    case StmtKind::Store: {
      std::string args = print_expr(*s->ptr, d).text + ", " + print_expr(*s->value, d).text;
      if (s->atomic == Atomic::Max || s->atomic == Atomic::Min) {
        // tl.atomic_max and tl.atomic_min drop NaN: a helper combines the bit patterns.
        out += indent + (s->atomic == Atomic::Max ? "_dt_atomic_max(" : "_dt_atomic_min(") + args +
               ", " + (s->mask ? print_expr(*s->mask, d).text : "True") + ")\n";
        break;
      }
      std::string store = (s->atomic == Atomic::None ? "tl.store(" : "tl.atomic_add(") + args +
                          (s->mask ? ", mask=" + print_expr(*s->mask, d).text : "") + ")\n";
      if (s->desc && d == Dialect::Triton) {
        // Through the descriptor where the wrapper found the tensor qualifies (a constexpr:
        // Triton compiles one branch).
        out += indent + "if " + s->desc_flag + ":\n";
        for (const Stmt::DescPart& part : s->desc_parts) {
          std::string offsets;
          for (const ExprPtr& o : part.offsets)
            offsets += (offsets.empty() ? "" : ", ") + print_expr(*o, d).text;
          out += indent + "    " + print_expr(*s->desc, d).text + ".store([" + offsets + "], " +
                 print_expr(*part.value, d).text + ")\n";
        }
        out += indent + "else:\n" + indent + "    " + store;
        break;
      }
      out += indent + store;
      break;
    }
    case StmtKind::For:
      out += indent + "for " + s->name + " in " + loop_head(*s, d) + ":\n";
      print_stmts(s->body, depth + 1, out, d);
      break;
    }
  }
}

} // namespace

std::string print(const Expr& e, Dialect d) {
  return print_expr(e, d).text;
}

std::string print(const std::vector<StmtPtr>& stmts, int depth, Dialect d) {
  std::string out;
  print_stmts(stmts, depth, out, d);
  return out;
}

std::string print(const Stmt& s, int depth, Dialect d) {
  std::string out;
  std::vector<StmtPtr> one;
  one.push_back(clone(s));
  print_stmts(one, depth, out, d);
  return out;
}

std::string print_loop_head(const Stmt& loop, Dialect d) {
  return loop_head(loop, d);
}

std::string gluon_shared_layout(const Shape& block, const std::string& pointer) {
  std::string text;
  for (const Extent& x : block)
    text += (text.empty() ? "" : ", ") + (x.param.empty() ? std::to_string(x.n) : x.param);
  return "gl.NVMMASharedLayout.get_default_for([" + text + "], " + pointer + ".dtype.element_ty)";
}

} // namespace kir

namespace {

struct PrinterHelper {
  const char* name;
  const char* source;
};

// The @triton.jit helpers that the printer's own spellings call: a maximum or minimum of a tile
// and an atomic maximum or minimum, all NaN-propagating as torch.amax and torch.amin are. A
// tile's costs what tl.max costs on the GPU: one reduction, its combine max.NaN where tl.max's
// is max; under the interpreter (`_DT_PTX` false), whose reductions with a combine of their own
// run element by element in Python, it is tl.max and a count of the NaN.
const PrinterHelper kPrinterHelpers[] = {
    {"_dt_max", R"py(def _dt_max(v, axis: tl.constexpr):
    # torch.amax: NaN where the values hold one; tl.max skips NaN (maxnum). On the GPU one
    # reduction whose combine is the NaN-propagating maximum, one instruction (max.NaN). Under
    # the interpreter, which runs a combine of ours element by element in Python, tl.max and a
    # count of the NaN: two reductions over whole arrays.
    if _DT_PTX:
        return tl.reduce(v, axis, _dt_maximum, keep_dims=True)
    elif v.dtype.is_floating():
        nan = tl.max((v != v).to(tl.int32), axis, keep_dims=True) > 0
        return tl.where(nan, float("nan"), tl.max(v, axis, keep_dims=True))
    else:
        return tl.max(v, axis, keep_dims=True)


@triton.jit
def _dt_maximum(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)
)py"},
    {"_dt_min", R"py(def _dt_min(v, axis: tl.constexpr):
    # torch.amin, as _dt_max: the NaN-propagating minimum (min.NaN) on the GPU, tl.min and a
    # count of the NaN under the interpreter.
    if _DT_PTX:
        return tl.reduce(v, axis, _dt_minimum, keep_dims=True)
    elif v.dtype.is_floating():
        nan = tl.max((v != v).to(tl.int32), axis, keep_dims=True) > 0
        return tl.where(nan, float("nan"), tl.min(v, axis, keep_dims=True))
    else:
        return tl.min(v, axis, keep_dims=True)


@triton.jit
def _dt_minimum(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)
)py"},
    {"_dt_atomic_max", R"py(def _dt_atomic_max(ptr, v, mask):
    # An atomic torch.amax into float32 memory. tl.atomic_max skips NaN, so the bit patterns
    # are combined with integer atomics: non-negative floats order as signed integers,
    # negative ones in reverse as unsigned integers, and every NaN, made the positive quiet NaN
    # 0x7FC00000, is above +inf in both orders: once stored it stays, whatever the order of
    # the program instances.
    bits = tl.where(v != v, 0x7FC00000, v.to(tl.int32, bitcast=True))
    up = (bits >= 0) & mask
    down = (bits < 0) & mask
    tl.atomic_max(ptr.to(tl.pointer_type(tl.int32), bitcast=True), bits, mask=up)
    tl.atomic_min(ptr.to(tl.pointer_type(tl.uint32), bitcast=True),
                  bits.to(tl.uint32, bitcast=True), mask=down)
)py"},
    {"_dt_atomic_min", R"py(def _dt_atomic_min(ptr, v, mask):
    # An atomic torch.amin into float32 memory, as _dt_atomic_max: non-negative floats order as
    # signed integers, negative ones in reverse as unsigned integers, and every NaN, made the
    # negative quiet NaN 0xFFC00000, is below every non-negative pattern as a signed integer
    # and above every negative one (-inf included) as an unsigned one.
    bits = tl.where(v != v, -4194304, v.to(tl.int32, bitcast=True))
    up = (bits >= 0) & mask
    down = (bits < 0) & mask
    tl.atomic_min(ptr.to(tl.pointer_type(tl.int32), bitcast=True), bits, mask=up)
    tl.atomic_max(ptr.to(tl.pointer_type(tl.uint32), bitcast=True),
                  bits.to(tl.uint32, bitcast=True), mask=down)
)py"},
};

void printer_helpers(const kir::Expr& e, std::set<std::string>& out) {
  if (e.kind == kir::ExprKind::Call && is_helper(e.fn)) out.insert(triton_function(e.fn));
  if (e.kind == kir::ExprKind::Reduce && e.reduce != kir::ReduceOp::Sum)
    out.insert(e.reduce == kir::ReduceOp::Max ? "_dt_max" : "_dt_min");
  for (const kir::ExprPtr& a : e.args)
    printer_helpers(*a, out);
}

void printer_helpers(const std::vector<kir::StmtPtr>& stmts, std::set<std::string>& out) {
  for (const kir::StmtPtr& s : stmts) {
    for (const kir::ExprPtr* e : std::as_const(*s).operands())
      if (*e) printer_helpers(**e, out);
    if (s->atomic == kir::Atomic::Max) out.insert("_dt_atomic_max");
    if (s->atomic == kir::Atomic::Min) out.insert("_dt_atomic_min");
    printer_helpers(s->body, out);
  }
}

} // namespace

std::set<std::string> kernel_helpers(const kir::Kernel& kernel) {
  std::set<std::string> out;
  printer_helpers(kernel.body, out);
  // And the helpers those call, transitively.
  std::vector<std::string> work(out.begin(), out.end());
  while (!work.empty()) {
    std::string h = std::move(work.back());
    work.pop_back();
    for (const std::string& used : helper_uses(h))
      if (out.insert(used).second) work.push_back(used);
  }
  return out;
}

std::string kernel_helper_source(std::string_view name) {
  for (const PrinterHelper& h : kPrinterHelpers)
    if (name == h.name) return h.source;
  std::string source = helper_source(name);
  DTC_ASSERT(!source.empty(), "no source for the helper " + std::string(name));
  return source;
}

std::string kernel_params_text(const kir::Kernel& kernel) {
  std::string out, line;
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
  return out;
}

std::string print_kernel(const kir::Kernel& kernel) {
  std::string out = "@triton.jit\ndef " + kernel.name + "(\n" + kernel_params_text(kernel) + "):\n";
  out += "    \"\"\"" + kernel.doc + "\"\"\"\n";
  out += kir::print(kernel.body, 1);
  return out;
}

} // namespace dtc
