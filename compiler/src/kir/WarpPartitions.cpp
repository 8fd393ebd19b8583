#include "kir/WarpPartitions.h"

#include <algorithm>
#include <map>

namespace dtc::kir {
namespace {

// The loop in `stmts` (not nested) whose product is warp-specialized, or null.
const Stmt* specialized_loop(const std::vector<StmtPtr>& stmts) {
  for (const StmtPtr& s : stmts)
    if (s->kind == StmtKind::For && s->warp_specialize) return s.get();
  return nullptr;
}

int count_specialized(const std::vector<StmtPtr>& stmts) {
  int n = 0;
  for (const StmtPtr& s : stmts)
    n += (s->kind == StmtKind::For && s->warp_specialize ? 1 : 0) + count_specialized(s->body);
  return n;
}

// The block's statements around the product: `setup` up to the accumulator's zeros, `after`
// past the loop. False with `why` when the block is not of that form.
bool split_block(const std::vector<StmtPtr>& body, WarpPartitions& p, std::string& why) {
  auto at = std::find_if(body.begin(), body.end(),
                         [&](const StmtPtr& s) { return s.get() == p.product; });
  if (at == body.begin() || (*(at - 1))->kind != StmtKind::Assign ||
      (*(at - 1))->value->kind != ExprKind::Full || (*(at - 1))->value->value_float != 0) {
    why = "the product's accumulator does not start as zeros just before its loop";
    return false;
  }
  p.acc = (*(at - 1))->name;
  for (auto s = body.begin(); s != at - 1; ++s)
    p.setup.push_back(s->get());
  for (auto s = at + 1; s != body.end(); ++s)
    p.after.push_back(s->get());
  for (const Stmt* s : p.setup)
    if (s->kind != StmtKind::Assign && s->kind != StmtKind::Comment) {
      why = "the block computes more than indices before its product";
      return false;
    }
  for (const Stmt* s : p.after)
    if (s->kind == StmtKind::For || s->kind == StmtKind::Barrier) {
      why = "the block loops again after its product";
      return false;
    }
  return true;
}

// The product's loop: its operand loads through descriptors and the one tl.dot into the
// accumulator; the masks and offsets of the pointer loads are not read in Gluon.
bool split_product(WarpPartitions& p, std::string& why) {
  const Stmt* dot = nullptr;
  std::vector<const Stmt*> loads;
  for (const StmtPtr& s : p.product->body) {
    if (s->kind == StmtKind::Comment) continue;
    if (s->kind != StmtKind::Assign) {
      why = "the product's loop does more than load and multiply";
      return false;
    }
    if (s->value->kind == ExprKind::DescLoad) loads.push_back(s.get());
    if (s->value->kind == ExprKind::Dot) {
      if (dot) {
        why = "the product's loop holds two products";
        return false;
      }
      dot = s.get();
    }
  }
  if (!dot || dot->name != p.acc || dot->value->args.size() != 3 ||
      dot->value->args[2]->kind != ExprKind::Var || dot->value->args[2]->name != p.acc) {
    why = "the product's loop does not accumulate one tl.dot into `" + p.acc + "`";
    return false;
  }
  auto operand = [&](const Expr& e, WarpPartitions::Operand& o) {
    if (e.kind != ExprKind::Var) return false;
    for (const Stmt* l : loads)
      if (l->name == e.name) {
        o = {l->name, l->value.get()};
        return true;
      }
    return false;
  };
  if (!operand(*dot->value->args[0], p.a) || !operand(*dot->value->args[1], p.b)) {
    why = "an operand of the product is not a tile loaded through a tensor descriptor";
    return false;
  }
  for (const WarpPartitions::Operand* o : {&p.a, &p.b}) {
    if (o->load->args[0]->type.shape.size() != 2) {
      why = "`" + o->tile + "` is loaded through a descriptor of more than two dimensions";
      return false;
    }
  }
  // The producer prints none of the loop's statements: the copies' offsets read only its
  // variable and names bound before it.
  std::set<std::string> bound_in_loop, offsets;
  for (const StmtPtr& s : p.product->body)
    if (s->kind == StmtKind::Assign) bound_in_loop.insert(s->name);
  for (const WarpPartitions::Operand* o : {&p.a, &p.b})
    for (size_t i = 1; i + 1 < o->load->args.size(); ++i)
      free_vars(*o->load->args[i], offsets);
  for (const std::string& name : offsets)
    if (bound_in_loop.count(name)) {
      why = "`" + name + "`, bound in the product's loop, places an operand's tile";
      return false;
    }
  // The rest of the loop (indices and masks of the pointer loads) must not be read after it.
  std::set<std::string> read;
  for (const Stmt* s : p.after)
    reads(*s, read);
  for (const StmtPtr& s : p.product->body)
    if (s->kind == StmtKind::Assign && s->name != p.acc && read.count(s->name)) {
      why = "`" + s->name + "`, bound in the product's loop, is read after it";
      return false;
    }
  return true;
}

// Rewrites expressions for a chunk of the tile: `rows` of its `tile_rows` rows from `row`, and
// `cols` of its `tile_cols` columns from `col` (all of them when cols == tile_cols).
struct Chunk {
  long long tile_rows, tile_cols;
  long long rows, cols;
  ExprPtr row, col;
  std::map<std::string, Type> moved; // names bound in the chunk, with their chunk types
  std::string acc, chunk;            // the accumulator, read in the chunk as `chunk`
  std::string why;

  static bool is_range(const Expr& e, long long extent) {
    const Expr* a = &e;
    while (a->kind == ExprKind::Cast)
      a = a->args[0].get();
    return a->kind == ExprKind::Arange && a->type.shape[0].param.empty() &&
           a->type.shape[0].n == extent;
  }

  // range(extent)[...] (converted) -> range(width)[...] + start, converted alike.
  static ExprPtr shifted(const Expr& e, long long width, const ExprPtr& start) {
    std::vector<const Expr*> casts;
    for (const Expr* a = e.args[0].get(); a->kind == ExprKind::Cast; a = a->args[0].get())
      casts.push_back(a);
    ExprPtr r = arange(Extent{width, ""});
    for (auto c = casts.rbegin(); c != casts.rend(); ++c)
      r = cast(r, (*c)->type.scalar, (*c)->type.elem_of);
    return add(expand(r, e.expand), cast(start, r->type.scalar, r->type.elem_of));
  }

  bool split_cols() const { return cols != tile_cols; }

  // The chunk's form of `e`, or `e` itself where it does not depend on the chunk; null with
  // `why` set where it cannot be rewritten.
  ExprPtr operator()(const ExprPtr& e) {
    if (!why.empty()) return nullptr;
    switch (e->kind) {
    case ExprKind::Var: {
      auto it = moved.find(e->name);
      if (it == moved.end()) return e;
      return var(e->name == acc ? chunk : e->name, it->second);
    }
    case ExprKind::Arange:
      if (is_range(*e, tile_rows) || (split_cols() && is_range(*e, tile_cols)))
        why = "it reads a vector along the tile";
      return why.empty() ? e : nullptr;
    case ExprKind::Expand:
      if (e->expand == std::vector<bool>{true, false} && is_range(*e->args[0], tile_rows))
        return shifted(*e, rows, row);
      if (e->expand == std::vector<bool>{false, true} && is_range(*e->args[0], tile_cols))
        return split_cols() ? shifted(*e, cols, col) : e;
      break;
    case ExprKind::Full:
      if (e->type.shape.size() == 2 && e->type.shape[0].param.empty() &&
          e->type.shape[1].param.empty() &&
          (e->type.shape[0].n == tile_rows || e->type.shape[1].n == tile_cols))
        return full({Extent{e->type.shape[0].n == tile_rows ? rows : e->type.shape[0].n, ""},
                     Extent{e->type.shape[1].n == tile_cols ? cols : e->type.shape[1].n, ""}},
                    e->value_float);
      return e;
    case ExprKind::Reduce:
      if (e->type.shape.size() == 2 && (e->value_int == 0 || split_cols())) {
        for (const ExprPtr& a : e->args)
          if ((*this)(a) != a) why = "it reduces across the chunks of the tile";
        if (!why.empty()) return nullptr;
      }
      break;
    case ExprKind::Dot:
    case ExprKind::Reshape:
    case ExprKind::Trans:
    case ExprKind::Half:
    case ExprKind::MakeDesc:
    case ExprKind::DescLoad:
      for (const ExprPtr& a : e->args)
        if ((*this)(a) != a) why = "it reshapes or multiplies parts of the tile";
      return why.empty() ? e : nullptr;
    default:
      break;
    }
    std::vector<ExprPtr> args;
    bool changed = false;
    for (const ExprPtr& a : e->args) {
      args.push_back((*this)(a));
      if (!args.back()) return nullptr;
      changed |= args.back() != a;
    }
    if (!changed) return e;
    switch (e->kind) {
    case ExprKind::Neg:
      return neg(args[0]);
    case ExprKind::Binary:
      return binary(e->op, args[0], args[1]);
    case ExprKind::Call:
      return call(e->fn, args);
    case ExprKind::Select:
      return select(args[0], args[1], args[2]);
    case ExprKind::Cast:
      return cast(args[0], e->type.scalar, e->type.elem_of);
    case ExprKind::Load: {
      ExprPtr l = load(args[0], args.size() > 1 ? args[1] : nullptr);
      return e->value_int ? keep_in_cache(*l) : l;
    }
    case ExprKind::Expand:
      return expand(args[0], e->expand);
    case ExprKind::Reduce:
      return reduce(e->reduce, args[0], static_cast<int>(e->value_int));
    default:
      why = "it holds what the chunk's rewrite does not take";
      return nullptr;
    }
  }

  // Moves `s` into the chunk (rewritten) when it depends on the chunk: true when moved.
  bool move(const Stmt& s, std::vector<StmtPtr>& into) {
    if (s.kind == StmtKind::Assign) {
      ExprPtr v = (*this)(s.value);
      if (!v || v == s.value) return false;
      moved[s.name] = v->type;
      into.push_back(Stmt::assign(s.name, v));
      return true;
    }
    return false;
  }
};

} // namespace

long long ring_bytes(const WarpPartitions& p, int stages) {
  long long tile = 0;
  for (const WarpPartitions::Operand* o : {&p.a, &p.b}) {
    long long n = 2; // bytes of a 16-bit float
    for (const Extent& x : o->load->args[0]->type.shape)
      n *= x.n;
    tile += n;
  }
  return stages * (tile + 16); // and a `ready` and an `empty` barrier a buffer
}

long long stage_bytes(const WarpPartitions& p) {
  return p.a.load->type.shape[0].n * staged_columns(p) * 4;
}

long long staged_columns(const WarpPartitions& p) {
  return std::min<long long>(128, p.b.load->type.shape[1].n);
}

Slices partition_slices(const WarpPartitions& p, std::set<std::string> needed) {
  for (const ExprPtr* e : {&p.product->lo, &p.product->hi, &p.product->step})
    free_vars(**e, needed);
  // The block's statements first: what they read is needed before the blocks.
  if (p.blocks)
    for (const ExprPtr* e : {&p.blocks->lo, &p.blocks->hi, &p.blocks->step})
      free_vars(**e, needed);
  auto drop_bound = [&] {
    if (p.blocks) needed.erase(p.blocks->name);
    needed.erase(p.product->name);
  };
  drop_bound();
  Slices out;
  out.setup = slice(p.setup, needed);
  drop_bound();
  out.before = slice(p.before, needed);
  return out;
}

Slices consumer_slices(const WarpPartitions& p) {
  std::set<std::string> needed;
  for (const Stmt* s : p.after) {
    if (s->kind != StmtKind::Store) {
      reads(*s, needed);
      continue;
    }
    // Gluon stores through pointers: the descriptor of a store through one is not read.
    for (const ExprPtr* e : {&s->ptr, &s->value, &s->mask})
      if (*e) free_vars(**e, needed);
  }
  needed.erase(p.acc);
  return partition_slices(p, needed);
}

std::optional<StagedEpilogue> stage_epilogue(const WarpPartitions& p, int rows, int part,
                                             const std::string& row, const std::string& chunk,
                                             std::string& why) {
  const long long tile_rows = p.a.load->type.shape[0].n;
  const long long tile_cols = p.b.load->type.shape[1].n;
  const long long cols = staged_columns(p);
  const auto [before, setup] = consumer_slices(p);
  // The chunk reads each name's one value: a name bound twice (the kernel IR allows it) could
  // be read in a chunk before its second binding there.
  std::map<std::string, int> bindings;
  for (const std::vector<const Stmt*>* stmts : {&before, &setup, &p.after})
    for (const Stmt* s : *stmts)
      if (s->kind == StmtKind::Assign) ++bindings[s->name];
  for (const auto& [name, count] : bindings)
    if (count > 1 || (name == p.acc && count > 0)) {
      why = "the epilogue cannot run on chunks of rows: `" + name + "` is bound twice";
      return std::nullopt;
    }
  Chunk r{
      tile_rows, tile_cols, rows,  cols, var(row, Type{Scalar::I32, "", {}}), int_imm(part * cols),
      {},        p.acc,     chunk, ""};
  StagedEpilogue out;
  Type acc = p.a.load->type; // [rows, columns] of the accumulator, in float32
  acc.scalar = Scalar::F32;
  acc.elem_of.clear();
  acc.shape = {Extent{rows, ""}, Extent{cols, ""}};
  for (const Stmt* s : before)
    if (!r.move(*s, out.chunk)) out.before.push_back(s);
  for (const Stmt* s : setup)
    if (!r.move(*s, out.chunk)) out.setup.push_back(s);
  r.moved[p.acc] = acc;
  for (const Stmt* s : p.after) {
    if (s->kind == StmtKind::Comment) continue;
    if (s->kind == StmtKind::Store) {
      ExprPtr ptr = r(s->ptr), value = r(s->value), mask = s->mask ? r(s->mask) : nullptr;
      if (!ptr || !value || (s->mask && !mask)) break;
      StmtPtr st = Stmt::store(ptr, value, mask);
      st->atomic = s->atomic;
      out.chunk.push_back(std::move(st));
      continue;
    }
    ExprPtr v = r(s->value);
    if (!v) break;
    r.moved[s->name] = v->type;
    out.chunk.push_back(Stmt::assign(s->name, v));
  }
  if (!r.why.empty()) {
    why = "the epilogue cannot run on chunks of rows: " + r.why;
    return std::nullopt;
  }
  return out;
}

void reads(const Stmt& s, std::set<std::string>& out) {
  for (const ExprPtr* e : s.operands())
    if (*e) free_vars(**e, out);
  for (const StmtPtr& b : s.body)
    reads(*b, out);
}

std::vector<const Stmt*> slice(const std::vector<const Stmt*>& stmts,
                               std::set<std::string>& needed) {
  std::vector<const Stmt*> kept;
  for (auto s = stmts.rbegin(); s != stmts.rend(); ++s) {
    if ((*s)->kind != StmtKind::Assign || !needed.count((*s)->name)) continue;
    kept.push_back(*s);
    free_vars(*(*s)->value, needed);
  }
  std::reverse(kept.begin(), kept.end());
  return kept;
}

std::optional<WarpPartitions> warp_partitions(const Kernel& kernel, std::string& why) {
  why.clear();
  int specialized = count_specialized(kernel.body);
  if (specialized != 1) {
    why = specialized == 0
              ? "no loop is warp-specialized"
              : "the kernel has " + std::to_string(specialized) + " warp-specialized loops";
    return std::nullopt;
  }
  WarpPartitions p;
  const std::vector<StmtPtr>* block = &kernel.body;
  p.product = specialized_loop(kernel.body);
  if (!p.product) {
    // Persistent programs: the product is in the loop over blocks, a top-level loop.
    for (const StmtPtr& s : kernel.body)
      if (s->kind == StmtKind::For && specialized_loop(s->body)) {
        p.blocks = s.get();
        p.product = specialized_loop(s->body);
        block = &s->body;
      }
    if (!p.product) {
      why = "the warp-specialized loop is nested deeper than a loop over output blocks";
      return std::nullopt;
    }
    for (const StmtPtr& s : kernel.body) {
      if (s.get() == p.blocks) break;
      p.before.push_back(s.get());
    }
    for (auto s = kernel.body.rbegin(); s->get() != p.blocks; ++s)
      if ((*s)->kind != StmtKind::Comment) {
        why = "the kernel computes more after its loop over output blocks";
        return std::nullopt;
      }
  }
  if (!split_block(*block, p, why) || !split_product(p, why)) return std::nullopt;
  for (const Extent& x : p.a.load->type.shape)
    if (!x.param.empty()) why = "the product's tiles are of widths known only at launch";
  for (const Extent& x : p.b.load->type.shape)
    if (!x.param.empty()) why = "the product's tiles are of widths known only at launch";
  if (!why.empty()) return std::nullopt;
  std::set<std::string> flags;
  free_vars(*p.product->warp_specialize, flags);
  for (const LaunchArg& a : kernel.launch)
    if (a.kind == LaunchArg::Kind::WarpSpecialize) flags.erase(a.param);
  p.flags.assign(flags.begin(), flags.end());
  return p;
}

} // namespace dtc::kir
