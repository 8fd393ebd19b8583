#include "kir/KernelIR.h"

#include "support/Diagnostics.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <set>

namespace dtc::kir {
namespace {

[[noreturn]] void ill_typed(const std::string& what) {
  throw InternalError("ill-typed kernel IR: " + what);
}

std::string scalar_text(Scalar s) {
  switch (s) {
  case Scalar::F32:
    return "f32";
  case Scalar::I64:
    return "i64";
  case Scalar::Index:
    return "index";
  case Scalar::I32:
    return "i32";
  case Scalar::Int:
    return "int";
  case Scalar::I1:
    return "i1";
  case Scalar::Elem:
    return "elem";
  case Scalar::Ptr:
    return "ptr";
  case Scalar::Desc:
    return "desc";
  }
  return "?";
}

/// Numpy-style broadcasting of two tile shapes of one rank (a scalar broadcasts to anything).
Shape broadcast(const Shape& a, const Shape& b, const char* what) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  if (a.size() != b.size())
    ill_typed(std::string(what) + ": shapes " + to_string(a) + " and " + to_string(b));
  Shape out(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i] || b[i].is_one())
      out[i] = a[i];
    else if (a[i].is_one())
      out[i] = b[i];
    else
      ill_typed(std::string(what) + ": shapes " + to_string(a) + " and " + to_string(b));
  }
  return out;
}

/// The element type of arithmetic on `a` and `b`, as Triton promotes it.
Type promote(const Type& a, const Type& b, const char* what) {
  Type t;
  t.shape = broadcast(a.shape, b.shape, what);
  if (a.scalar == Scalar::Ptr || b.scalar == Scalar::Ptr) {
    const Type& p = a.scalar == Scalar::Ptr ? a : b;
    const Type& o = a.scalar == Scalar::Ptr ? b : a;
    if (!o.is_int()) ill_typed(std::string(what) + ": pointer offset of type " + to_string(o));
    t.scalar = Scalar::Ptr;
    t.elem_of = p.elem_of;
  } else if (a.scalar == Scalar::F32 || b.scalar == Scalar::F32) {
    t.scalar = Scalar::F32;
  } else if (a.scalar == Scalar::Elem || b.scalar == Scalar::Elem) {
    t.scalar = Scalar::Elem;
    t.elem_of = a.scalar == Scalar::Elem ? a.elem_of : b.elem_of;
  } else if (a.scalar == Scalar::I64 || b.scalar == Scalar::I64) {
    t.scalar = Scalar::I64;
  } else if (a.scalar == Scalar::Index || b.scalar == Scalar::Index) {
    t.scalar = Scalar::Index;
  } else if (a.scalar == Scalar::I32 || b.scalar == Scalar::I32) {
    t.scalar = Scalar::I32;
  } else if (a.scalar == Scalar::Int || b.scalar == Scalar::Int) {
    t.scalar = Scalar::Int;
  } else {
    t.scalar = Scalar::I1;
  }
  return t;
}

std::shared_ptr<Expr> node(ExprKind kind, std::vector<ExprPtr> args = {}) {
  auto e = std::make_shared<Expr>();
  e->kind = kind;
  for (const ExprPtr& a : args) {
    if (!a) ill_typed("null operand");
    e->depth = std::max(e->depth, a->depth + 1);
  }
  e->args = std::move(args);
  return e;
}

void hash_combine(size_t& seed, size_t v) {
  seed ^= v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2);
}

} // namespace

std::string to_string(const Extent& x) {
  return x.param.empty() ? std::to_string(x.n) : x.param;
}

std::string to_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + to_string(shape[i]);
  return s + "]";
}

std::string to_string(const Type& type) {
  std::string s = scalar_text(type.scalar);
  if (!type.elem_of.empty()) s += "(" + type.elem_of + ")";
  return type.shape.empty() ? s : s + to_string(type.shape);
}

bool is_comparison(BinOp op) {
  return op == BinOp::Lt || op == BinOp::Le || op == BinOp::Gt || op == BinOp::Ge ||
         op == BinOp::Eq || op == BinOp::Ne;
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
  case BinOp::FloorDiv:
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
  case BinOp::And:
    return "&";
  case BinOp::Or:
    return "|";
  case BinOp::Max:
    return "max";
  case BinOp::Min:
    return "min";
  }
  return "?";
}

bool equal(const Expr& a, const Expr& b) {
  if (&a == &b) return true;
  if (a.kind != b.kind || a.name != b.name || a.fn != b.fn || a.value_int != b.value_int ||
      a.op != b.op || a.reduce != b.reduce || a.expand != b.expand || a.precision != b.precision ||
      a.args.size() != b.args.size() || !(a.type == b.type))
    return false;
  // Bitwise, so that 0.0 and -0.0 (and NaNs) stay apart.
  if (std::memcmp(&a.value_float, &b.value_float, sizeof(double)) != 0) return false;
  for (size_t i = 0; i < a.args.size(); ++i)
    if (!equal(*a.args[i], *b.args[i])) return false;
  return true;
}

size_t hash(const Expr& e) {
  size_t h = std::hash<int>()(static_cast<int>(e.kind));
  hash_combine(h, std::hash<std::string>()(e.name));
  hash_combine(h, static_cast<size_t>(e.fn));
  hash_combine(h, std::hash<long long>()(e.value_int));
  hash_combine(h, std::hash<double>()(e.value_float));
  hash_combine(h, static_cast<size_t>(e.op) * 31 + static_cast<size_t>(e.reduce));
  for (const ExprPtr& a : e.args)
    hash_combine(h, hash(*a));
  return h;
}

ExprPtr var(std::string name, Type type) {
  auto e = node(ExprKind::Var);
  e->name = std::move(name);
  e->type = std::move(type);
  return e;
}

ExprPtr int_imm(long long v) {
  auto e = node(ExprKind::Int);
  e->value_int = v;
  e->type.scalar = Scalar::Int;
  return e;
}

ExprPtr float_imm(double v) {
  auto e = node(ExprKind::Float);
  e->value_float = v;
  e->type.scalar = Scalar::F32;
  return e;
}

ExprPtr neg(ExprPtr a) {
  auto e = node(ExprKind::Neg, {a});
  if (a->type.scalar == Scalar::Ptr || a->type.scalar == Scalar::I1)
    ill_typed("negation of " + to_string(a->type));
  e->type = a->type;
  return e;
}

ExprPtr binary(BinOp op, ExprPtr a, ExprPtr b) {
  auto e = node(ExprKind::Binary, {a, b});
  e->op = op;
  std::string what = std::string("`") + op_text(op) + "`";
  if (op == BinOp::And || op == BinOp::Or) {
    if (a->type.scalar != Scalar::I1 || b->type.scalar != Scalar::I1)
      ill_typed(what + " of " + to_string(a->type) + " and " + to_string(b->type));
    e->type = promote(a->type, b->type, what.c_str());
    return e;
  }
  if ((a->type.scalar == Scalar::Ptr || b->type.scalar == Scalar::Ptr) && op != BinOp::Add)
    ill_typed(what + " of a pointer");
  if ((op == BinOp::Max || op == BinOp::Min) &&
      (a->type.scalar == Scalar::I1 || b->type.scalar == Scalar::I1))
    ill_typed(what + " of a condition");
  e->type = promote(a->type, b->type, what.c_str());
  if (is_comparison(op)) {
    e->type.scalar = Scalar::I1;
    e->type.elem_of.clear();
  } else if (op == BinOp::Div && !e->type.is_float()) {
    e->type.scalar = Scalar::F32; // `/` is true division
  }
  return e;
}

ExprPtr add(ExprPtr a, ExprPtr b) {
  return binary(BinOp::Add, std::move(a), std::move(b));
}
ExprPtr sub(ExprPtr a, ExprPtr b) {
  return binary(BinOp::Sub, std::move(a), std::move(b));
}
ExprPtr mul(ExprPtr a, ExprPtr b) {
  return binary(BinOp::Mul, std::move(a), std::move(b));
}
ExprPtr lt(ExprPtr a, ExprPtr b) {
  return binary(BinOp::Lt, std::move(a), std::move(b));
}

ExprPtr maximum(ExprPtr a, ExprPtr b) {
  return binary(BinOp::Max, std::move(a), std::move(b));
}
ExprPtr minimum(ExprPtr a, ExprPtr b) {
  return binary(BinOp::Min, std::move(a), std::move(b));
}

ExprPtr and_(ExprPtr a, ExprPtr b) {
  if (!a) return b;
  if (!b) return a;
  return binary(BinOp::And, std::move(a), std::move(b));
}

ExprPtr call(Intrinsic fn, std::vector<ExprPtr> args) {
  auto e = node(ExprKind::Call, args);
  e->fn = fn;
  const IntrinsicInfo& f = info(fn);
  if (e->args.size() != static_cast<size_t>(f.arity))
    ill_typed(std::string(f.name) + " of " + std::to_string(e->args.size()) + " operands");
  Type t = e->args[0]->type;
  for (const ExprPtr& a : e->args) {
    if (a->type.scalar == Scalar::Ptr || a->type.scalar == Scalar::I1)
      ill_typed(std::string(f.name) + " of a " + to_string(a->type));
    t = promote(t, a->type, f.name);
  }
  e->type = t;
  return e;
}

ExprPtr select(ExprPtr cond, ExprPtr a, ExprPtr b) {
  auto e = node(ExprKind::Select, {cond, a, b});
  if (cond->type.scalar != Scalar::I1) ill_typed("select on a " + to_string(cond->type));
  e->type = promote(a->type, b->type, "select");
  e->type.shape = broadcast(cond->type.shape, e->type.shape, "select");
  return e;
}

ExprPtr cast(ExprPtr a, Scalar to, std::string elem_of) {
  if ((to == Scalar::Elem) != !elem_of.empty() || to == Scalar::Ptr || to == Scalar::Int)
    ill_typed("cast to " + scalar_text(to));
  auto e = node(ExprKind::Cast, {a});
  e->type = a->type;
  e->type.scalar = to;
  e->type.elem_of = std::move(elem_of);
  return e;
}

ExprPtr load(ExprPtr ptr, ExprPtr mask) {
  if (ptr->type.scalar != Scalar::Ptr) ill_typed("load from a " + to_string(ptr->type));
  std::vector<ExprPtr> args{ptr};
  if (mask) args.push_back(mask);
  auto e = node(ExprKind::Load, args);
  e->type.scalar = ptr->type.elem_of.empty() ? Scalar::F32 : Scalar::Elem;
  e->type.elem_of = ptr->type.elem_of;
  e->type.shape = ptr->type.shape;
  if (mask) {
    if (mask->type.scalar != Scalar::I1) ill_typed("load mask of type " + to_string(mask->type));
    e->type.shape = broadcast(ptr->type.shape, mask->type.shape, "load");
  }
  return e;
}

ExprPtr keep_in_cache(const Expr& load) {
  if (load.kind != ExprKind::Load) ill_typed("a cache hint on a value that is not a load");
  auto e = std::make_shared<Expr>(load);
  e->value_int = 1;
  return e;
}

ExprPtr arange(Extent extent) {
  auto e = node(ExprKind::Arange);
  e->type.scalar = Scalar::I32;
  e->type.shape = {std::move(extent)};
  return e;
}

ExprPtr expand(ExprPtr a, std::vector<bool> keep) {
  size_t kept = std::count(keep.begin(), keep.end(), true);
  if (kept != a->type.shape.size())
    ill_typed("expanding " + to_string(a->type) + " keeps " + std::to_string(kept) + " axes");
  auto e = node(ExprKind::Expand, {a});
  e->type = a->type;
  e->type.shape.clear();
  size_t j = 0;
  for (bool k : keep)
    e->type.shape.push_back(k ? a->type.shape[j++] : Extent{});
  e->expand = std::move(keep);
  return e;
}

ExprPtr full(Shape shape, double value) {
  auto e = node(ExprKind::Full);
  e->value_float = value;
  e->type.scalar = Scalar::F32;
  e->type.shape = std::move(shape);
  return e;
}

ExprPtr reduce(ReduceOp op, ExprPtr a, int axis) {
  if (axis < 0 || static_cast<size_t>(axis) >= a->type.shape.size())
    ill_typed("reduction over axis " + std::to_string(axis) + " of " + to_string(a->type));
  auto e = node(ExprKind::Reduce, {a});
  e->reduce = op;
  e->value_int = axis;
  e->type = a->type;
  e->type.shape[axis] = Extent{};
  return e;
}

ExprPtr dot(ExprPtr a, ExprPtr b, ExprPtr acc, std::string precision) {
  const Shape &sa = a->type.shape, &sb = b->type.shape;
  if (sa.size() != 2 || sb.size() != 2 || !(sa[1] == sb[0]) || !a->type.is_float() ||
      !b->type.is_float())
    ill_typed("dot of " + to_string(a->type) + " and " + to_string(b->type));
  std::vector<ExprPtr> args{a, b};
  Shape out{sa[0], sb[1]};
  if (acc) {
    if (acc->type.shape != out || acc->type.scalar != Scalar::F32)
      ill_typed("dot accumulator " + to_string(acc->type) + " for " + to_string(out));
    args.push_back(acc);
  }
  auto e = node(ExprKind::Dot, args);
  e->precision = std::move(precision);
  e->type.scalar = Scalar::F32;
  e->type.shape = out;
  return e;
}

ExprPtr reshape(ExprPtr a, Shape shape) {
  auto known = [](const Shape& s, long long& n) {
    n = 1;
    for (const Extent& x : s) {
      if (!x.param.empty()) return false;
      n *= x.n;
    }
    return true;
  };
  long long na = 0, nb = 0;
  if (known(a->type.shape, na) && known(shape, nb) && na != nb)
    ill_typed("reshape of " + to_string(a->type) + " to " + to_string(shape));
  auto e = node(ExprKind::Reshape, {a});
  e->type = a->type;
  e->type.shape = std::move(shape);
  return e;
}

ExprPtr trans(ExprPtr a) {
  if (a->type.shape.size() != 2) ill_typed("trans of " + to_string(a->type));
  auto e = node(ExprKind::Trans, {a});
  e->type = a->type;
  std::swap(e->type.shape[0], e->type.shape[1]);
  return e;
}

ExprPtr half(ExprPtr a, int which) {
  const Shape& s = a->type.shape;
  if (s.size() != 2 || !s[1].param.empty() || s[1].n % 2 || (which != 0 && which != 1))
    ill_typed("half " + std::to_string(which) + " of " + to_string(a->type));
  auto e = node(ExprKind::Half, {a});
  e->type = a->type;
  e->type.shape[1].n /= 2;
  e->value_int = which;
  return e;
}

ExprPtr program_id(int axis) {
  auto e = node(ExprKind::ProgramId);
  e->value_int = axis;
  e->type.scalar = Scalar::I32;
  return e;
}

ExprPtr make_desc(ExprPtr ptr, std::vector<ExprPtr> sizes, std::vector<ExprPtr> strides,
                  Shape block, std::string flag) {
  if (ptr->type.scalar != Scalar::Ptr || ptr->type.elem_of.empty() || !ptr->type.shape.empty())
    ill_typed("tensor descriptor over a " + to_string(ptr->type));
  size_t rank = block.size();
  if (rank < 2 || rank > 5 || sizes.size() != rank || strides.size() + 1 != rank)
    ill_typed("tensor descriptor of rank " + std::to_string(rank) + " with " +
              std::to_string(sizes.size()) + " sizes and " + std::to_string(strides.size()) +
              " strides");
  std::vector<ExprPtr> args{std::move(ptr)};
  for (std::vector<ExprPtr>* list : {&sizes, &strides})
    for (ExprPtr& a : *list) {
      if (!a->type.is_int() || !a->type.shape.empty())
        ill_typed("tensor descriptor size or stride of type " + to_string(a->type));
      args.push_back(std::move(a));
    }
  auto e = node(ExprKind::MakeDesc, args);
  e->type.scalar = Scalar::Desc;
  e->type.elem_of = e->args[0]->type.elem_of;
  e->type.shape = std::move(block);
  e->name = std::move(flag);
  return e;
}

ExprPtr desc_load(ExprPtr desc, std::vector<ExprPtr> offsets, bool transposed, ExprPtr fallback,
                  std::string flag) {
  if (desc->type.scalar != Scalar::Desc)
    ill_typed("descriptor load from a " + to_string(desc->type));
  if (offsets.size() != desc->type.shape.size()) ill_typed("descriptor load offsets");
  for (const ExprPtr& o : offsets)
    if (!o->type.is_int() || !o->type.shape.empty())
      ill_typed("descriptor offset of type " + to_string(o->type));
  // The block's last two dimensions, the ones before them of one element each.
  const Shape& block = desc->type.shape;
  for (size_t i = 0; i + 2 < block.size(); ++i)
    if (!block[i].is_one()) ill_typed("descriptor load of a block " + to_string(block));
  Shape shape(block.end() - 2, block.end());
  if (transposed) std::swap(shape[0], shape[1]);
  if (fallback->type.scalar != Scalar::Elem || fallback->type.elem_of != desc->type.elem_of ||
      fallback->type.shape != shape)
    ill_typed("descriptor load of " + to_string(shape) + " with a fallback " +
              to_string(fallback->type));
  std::vector<ExprPtr> args{std::move(desc)};
  for (ExprPtr& o : offsets)
    args.push_back(std::move(o));
  args.push_back(fallback);
  auto e = node(ExprKind::DescLoad, args);
  e->type = fallback->type;
  e->value_int = transposed ? 1 : 0;
  e->name = std::move(flag);
  return e;
}

ExprPtr num_programs(int axis) {
  auto e = node(ExprKind::NumPrograms);
  e->value_int = axis;
  e->type.scalar = Scalar::I32;
  return e;
}

Type loop_var_type(const Expr& lo, const Expr& hi, const Expr& step) {
  Type t = promote(promote(lo.type, hi.type, "range"), step.type, "range");
  t.elem_of.clear();
  return t;
}

void free_vars(const Expr& e, std::set<std::string>& out) {
  if (e.kind == ExprKind::Var) out.insert(e.name);
  for (const ExprPtr& a : e.args)
    free_vars(*a, out);
}

std::string base_pointer(const Expr& address) {
  if (address.kind == ExprKind::Var && address.type.scalar == Scalar::Ptr) return address.name;
  if (address.kind == ExprKind::Binary)
    for (const ExprPtr& a : address.args)
      if (a->type.scalar == Scalar::Ptr) return base_pointer(*a);
  return "";
}

ExprPtr with_args(const Expr& e, std::vector<ExprPtr> args) {
  auto copy = std::make_shared<Expr>(e);
  copy->depth = 0;
  for (const ExprPtr& a : args)
    copy->depth = std::max(copy->depth, a->depth + 1);
  copy->args = std::move(args);
  return copy;
}

StmtPtr clone(const Stmt& s) {
  auto copy = std::make_unique<Stmt>();
  copy->kind = s.kind;
  copy->name = s.name;
  copy->text = s.text;
  copy->value = s.value;
  copy->ptr = s.ptr;
  copy->mask = s.mask;
  copy->lo = s.lo;
  copy->hi = s.hi;
  copy->step = s.step;
  copy->warp_specialize = s.warp_specialize;
  copy->flatten = s.flatten;
  copy->full_tiles = s.full_tiles;
  copy->atomic = s.atomic;
  copy->desc = s.desc;
  copy->desc_parts = s.desc_parts;
  copy->desc_flag = s.desc_flag;
  for (const StmtPtr& b : s.body)
    copy->body.push_back(clone(*b));
  return copy;
}

static void count_bindings(const std::vector<StmtPtr>& stmts, std::map<std::string, int>& n) {
  for (const StmtPtr& s : stmts) {
    if (s->kind == StmtKind::Assign || s->kind == StmtKind::For) ++n[s->name];
    count_bindings(s->body, n);
  }
}

std::map<std::string, int> binding_counts(const std::vector<StmtPtr>& stmts) {
  std::map<std::string, int> n;
  count_bindings(stmts, n);
  return n;
}

StmtPtr Stmt::assign(std::string name, ExprPtr value) {
  DTC_ASSERT(value, "assignment of nothing");
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::Assign;
  s->name = std::move(name);
  s->value = std::move(value);
  return s;
}

StmtPtr Stmt::store(ExprPtr ptr, ExprPtr value, ExprPtr mask) {
  if (ptr->type.scalar != Scalar::Ptr) ill_typed("store to a " + to_string(ptr->type));
  broadcast(ptr->type.shape, value->type.shape, "store");
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::Store;
  s->ptr = std::move(ptr);
  s->value = std::move(value);
  s->mask = std::move(mask);
  return s;
}

StmtPtr Stmt::store(ExprPtr ptr, ExprPtr value, ExprPtr mask, ExprPtr desc,
                    std::vector<DescPart> parts, std::string flag) {
  StmtPtr s = store(std::move(ptr), std::move(value), std::move(mask));
  if (desc->type.scalar != Scalar::Desc)
    ill_typed("descriptor store through a " + to_string(desc->type));
  if (parts.empty()) ill_typed("descriptor store of no part");
  for (const DescPart& part : parts) {
    if (part.offsets.size() != desc->type.shape.size())
      ill_typed("descriptor store with " + std::to_string(part.offsets.size()) + " offsets into " +
                to_string(desc->type));
    for (const ExprPtr& o : part.offsets)
      if (!o->type.is_int() || !o->type.shape.empty())
        ill_typed("descriptor store offset of type " + to_string(o->type));
    if (part.value->type.shape != desc->type.shape)
      ill_typed("descriptor store of a " + to_string(part.value->type) + " through " +
                to_string(desc->type));
  }
  s->desc = std::move(desc);
  s->desc_parts = std::move(parts);
  s->desc_flag = std::move(flag);
  return s;
}

StmtPtr Stmt::loop(std::string var, ExprPtr lo, ExprPtr hi, ExprPtr step) {
  for (const ExprPtr* e : {&lo, &hi, &step})
    if (!(*e)->type.is_int() || !(*e)->type.shape.empty())
      ill_typed("loop bound of type " + to_string((*e)->type));
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::For;
  s->name = std::move(var);
  s->lo = std::move(lo);
  s->hi = std::move(hi);
  s->step = std::move(step);
  return s;
}

StmtPtr Stmt::comment(std::string text) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::Comment;
  s->text = std::move(text);
  return s;
}

std::vector<ExprPtr*> Stmt::operands() {
  switch (kind) {
  case StmtKind::Assign:
    return {&value};
  case StmtKind::Store: {
    std::vector<ExprPtr*> out{&ptr, &value, &mask};
    if (!desc) return out;
    out.push_back(&desc);
    for (DescPart& part : desc_parts) {
      for (ExprPtr& o : part.offsets)
        out.push_back(&o);
      out.push_back(&part.value);
    }
    return out;
  }
  case StmtKind::For:
    return {&lo, &hi, &step};
  case StmtKind::Comment:
  case StmtKind::Barrier:
    break;
  }
  return {};
}

std::vector<const ExprPtr*> Stmt::operands() const {
  std::vector<const ExprPtr*> out;
  for (ExprPtr* e : const_cast<Stmt*>(this)->operands())
    out.push_back(e);
  return out;
}

StmtPtr Stmt::barrier() {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::Barrier;
  return s;
}

std::vector<Shape> shapes_of(const std::vector<StmtPtr>& stmts) {
  std::vector<Shape> out;
  std::set<const Expr*> seen; // values are shared: each is visited once
  std::function<void(const ExprPtr&)> expr = [&](const ExprPtr& e) {
    if (!e || !seen.insert(e.get()).second) return;
    if (!e->type.shape.empty() && std::find(out.begin(), out.end(), e->type.shape) == out.end())
      out.push_back(e->type.shape);
    for (const ExprPtr& a : e->args)
      expr(a);
  };
  std::function<void(const std::vector<StmtPtr>&)> block = [&](const std::vector<StmtPtr>& b) {
    for (const StmtPtr& s : b) {
      for (const ExprPtr* e : s->operands())
        expr(*e);
      block(s->body);
    }
  };
  block(stmts);
  return out;
}

} // namespace dtc::kir
