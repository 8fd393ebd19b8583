#include "kir/WarpPartitions.h"

#include <algorithm>

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
    if (o->load->value_int) {
      why = "`" + o->tile + "` is loaded transposed";
      return false;
    }
    if (o->load->args[0]->type.shape.size() != 2) {
      why = "`" + o->tile + "` is loaded through a descriptor of more than two dimensions";
      return false;
    }
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

} // namespace

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
