#include "kir/PeelPartialTile.h"

#include "kir/KirVisitor.h"

#include <functional>
#include <map>
#include <set>

namespace dtc {
namespace {

using kir::BinOp;
using kir::Expr;
using kir::ExprKind;
using kir::ExprPtr;
using kir::Stmt;
using kir::StmtKind;
using kir::StmtPtr;

bool is_binary(const Expr& e, BinOp op) {
  return e.kind == ExprKind::Binary && e.op == op;
}

bool is_var(const Expr& e, const std::string& name) {
  return e.kind == ExprKind::Var && e.name == name;
}

// Whether a statement (with what is nested in it) holds a loop or a product.
struct Contents : kir::KirVisitor {
  using KirVisitor::visit;
  bool loop = false, dot = false;
  void visit(const Stmt& s) override {
    loop |= s.kind == StmtKind::For;
    KirVisitor::visit(s);
  }
  void visit(const Expr& e) override {
    dot |= e.kind == ExprKind::Dot;
    KirVisitor::visit(e);
  }
};

class Peeler {
public:
  explicit Peeler(kir::Kernel& k) : k_(k), bindings_(kir::binding_counts(k.body)) {
    collect(k.body);
    for (const kir::Param& p : k.params) {
      params_.insert(p.name);
      if (p.is_constexpr) constexprs_.insert(p.name);
    }
  }

  void run() { peel(k_.body, {}); }

private:
  void collect(const std::vector<StmtPtr>& block) {
    for (const StmtPtr& s : block) {
      if (s->kind == StmtKind::Assign && bindings_[s->name] == 1) defs_[s->name] = s->value;
      collect(s->body);
    }
  }

  // The width of a range `tl.arange(0, w)`, expanded or converted, through names bound once.
  const kir::Extent* range_width(const Expr& e, int depth = 0) const {
    if (depth > 8) return nullptr;
    switch (e.kind) {
    case ExprKind::Arange:
      return &e.type.shape[0];
    case ExprKind::Cast:
    case ExprKind::Expand:
      return range_width(*e.args[0], depth + 1);
    case ExprKind::Var: {
      auto it = defs_.find(e.name);
      return it == defs_.end() ? nullptr : range_width(*it->second, depth + 1);
    }
    default:
      return nullptr;
    }
  }

  static bool same_width(const kir::Extent& w, const Expr& step) {
    const Expr& bare = step.kind == ExprKind::Cast ? *step.args[0] : step;
    if (!w.param.empty()) return is_var(bare, w.param);
    return bare.kind == ExprKind::Int && bare.value_int == w.n;
  }

  // Whether `idx` is `var + R` (directly or through a name the loop's body binds once to it).
  bool tile_index(const Expr& idx, const Stmt& loop,
                  const std::map<std::string, ExprPtr>& local) const {
    const Expr* e = &idx;
    if (e->kind == ExprKind::Var)
      if (auto it = local.find(e->name); it != local.end()) e = it->second.get();
    if (!is_binary(*e, BinOp::Add)) return false;
    for (int i = 0; i < 2; ++i)
      if (is_var(*e->args[i], loop.name)) {
        const kir::Extent* w = range_width(*e->args[1 - i]);
        return w && same_width(*w, *loop.step);
      }
    return false;
  }

  // The masks `loop` binds that are true in every iteration over a whole tile.
  std::set<std::string> tile_masks(const Stmt& loop) const {
    std::map<std::string, ExprPtr> local; // names bound once in the body, at its top level
    std::map<std::string, int> count = kir::binding_counts(loop.body);
    std::set<std::string> masks;
    if (count.count(loop.name)) return masks; // the body rebinds the loop variable
    for (const StmtPtr& s : loop.body) {
      if (s->kind != StmtKind::Assign || count[s->name] != 1) continue;
      local[s->name] = s->value;
      const Expr* cmp = s->value.get();
      if (is_binary(*cmp, BinOp::Or)) {
        const Expr& flag = *cmp->args[1];
        if (flag.kind != ExprKind::Var || !constexprs_.count(flag.name)) continue;
        cmp = cmp->args[0].get();
      }
      if (is_binary(*cmp, BinOp::Lt) && kir::equal(*cmp->args[1], *loop.hi) &&
          tile_index(*cmp->args[0], loop, local))
        masks.insert(s->name);
    }
    return masks;
  }

  // Whether the operands of `s` itself (not its body's) read one of `names`.
  static bool operands_read(const Stmt& s, const std::set<std::string>& names) {
    std::set<std::string> used;
    for (const ExprPtr* e : s.operands())
      if (*e) kir::free_vars(**e, used);
    for (const std::string& n : used)
      if (names.count(n)) return true;
    return false;
  }

  // Whether the statements from `from` on, in program order, read one of `names` before
  // binding it again.
  static bool read_later(const std::vector<const std::vector<StmtPtr>*>& blocks,
                         const std::vector<size_t>& from, std::set<std::string> names) {
    std::function<bool(const Stmt&)> reads = [&](const Stmt& s) {
      if (operands_read(s, names)) return true;
      if (s.kind == StmtKind::Assign || s.kind == StmtKind::For) names.erase(s.name);
      for (const StmtPtr& b : s.body)
        if (reads(*b)) return true;
      return false;
    };
    for (size_t level = blocks.size(); level-- > 0;)
      for (size_t i = from[level]; i < blocks[level]->size(); ++i)
        if (reads(*(*blocks[level])[i])) return true;
    return false;
  }

  // Whether a statement of `block` (or one nested in it) reads one of `names`.
  static bool reads(const std::vector<StmtPtr>& block, const std::set<std::string>& names) {
    for (const StmtPtr& s : block)
      if (operands_read(*s, names) || reads(s->body, names)) return true;
    return false;
  }

  // The loop over full tiles: a copy of `loop` with each mask in `masks` true. Null when a use
  // of a mask remains.
  StmtPtr full_tiles(const Stmt& loop, const std::set<std::string>& masks) {
    struct True : kir::KirMutator {
      using KirMutator::mutate;
      explicit True(const std::set<std::string>& m) : masks(m) {}
      const std::set<std::string>& masks;
      bool is_mask(const ExprPtr& e) const {
        return e && e->kind == ExprKind::Var && masks.count(e->name);
      }
      // A load's or store's mask, or an assignment's value: there a conjunction may drop a
      // mask that gave it its shape (a narrower mask broadcasts against the pointers; an
      // assigned name is renamed, and read nowhere else).
      const Expr* narrow_root = nullptr;
      bool unsafe = false; // a narrower value reached an operand that takes its shape
      ExprPtr rooted(const ExprPtr& e) {
        const Expr* outer = narrow_root;
        narrow_root = e.get();
        ExprPtr out = mutate(e);
        narrow_root = outer;
        return out;
      }
      ExprPtr drop(ExprPtr e) {
        ExprPtr out = rooted(e);
        return is_mask(out) ? nullptr : out;
      }
      // Names whose value lost a mask's broadcast (`x_y_mask = x_mask & y_mask` is x_mask, of
      // x_mask's shape): bound under a fresh name (the loop after this one binds the old name
      // at the old type, and Triton types a name once), and read under it.
      std::function<std::string(const std::string&)> fresh;
      std::map<std::string, int> bound_here; // the names the loop binds
      std::map<std::string, ExprPtr> retyped;
      std::vector<StmtPtr> mutate(StmtPtr s) override {
        if (s->kind == StmtKind::Assign && masks.count(s->name)) return {};
        if (s->kind == StmtKind::Assign) {
          retyped.erase(s->name); // bound again: its reads below read this binding
          kir::Type before = s->value->type;
          s->value = rooted(s->value);
          if (!(s->value->type == before)) {
            // A name for another (`x_y_mask = x_mask`) is read as that one.
            if (s->value->kind == ExprKind::Var && !bound_here.count(s->value->name)) {
              retyped[s->name] = s->value;
              return {};
            }
            std::string name = fresh(s->name);
            retyped[s->name] = kir::var(name, s->value->type);
            s->name = name;
          }
          std::vector<StmtPtr> out;
          out.push_back(std::move(s));
          return out;
        }
        if (s->kind == StmtKind::Store && s->mask) {
          s->mask = drop(s->mask);
          s->ptr = mutate(s->ptr);
          s->value = mutate(s->value);
          if (s->desc)
            for (Stmt::DescPart& part : s->desc_parts) {
              for (ExprPtr& o : part.offsets)
                o = mutate(o);
              part.value = mutate(part.value);
            }
          std::vector<StmtPtr> out;
          out.push_back(std::move(s));
          return out;
        }
        return KirMutator::mutate(std::move(s));
      }
      ExprPtr mutate(const ExprPtr& e) override {
        if (e->kind == ExprKind::Var)
          if (auto it = retyped.find(e->name); it != retyped.end()) {
            unsafe |= e.get() != narrow_root; // read other than as a mask or a copy
            return it->second;
          }
        if (e->kind == ExprKind::Load && e->args.size() == 2) {
          ExprPtr ptr = mutate(e->args[0]);
          ExprPtr mask = drop(e->args[1]);
          std::vector<ExprPtr> args{ptr};
          if (mask) args.push_back(mask);
          return args.size() == e->args.size() && ptr == e->args[0] && mask == e->args[1]
                     ? e
                     : kir::with_args(*e, std::move(args));
        }
        ExprPtr out = KirMutator::mutate(e);
        if (is_binary(*out, BinOp::And))
          for (int i = 0; i < 2; ++i)
            if (is_mask(out->args[i])) {
              const ExprPtr& other = out->args[1 - i];
              if (other->type == out->type || e.get() == narrow_root) return other;
            }
        if (out->kind == ExprKind::Select && is_mask(out->args[0]) &&
            out->args[1]->type == out->type)
          return out->args[1];
        return out;
      }
    };
    StmtPtr copy = kir::clone(loop);
    True full(masks);
    full.fresh = [this](const std::string& base) { return fresh(base + "_full"); };
    full.bound_here = kir::binding_counts(copy->body);
    full.bound_here[copy->name] = 1;
    full.mutate(copy->body);
    if (full.unsafe || reads(copy->body, masks)) return nullptr;
    copy->full_tiles = true;
    return copy;
  }

  // Whether each thread holds at most kMaxPerThread elements of the loop's masked tiles (of
  // literal widths). Triton unrolls a tile's elements per thread; the peeled loop is compiled
  // twice, and a tile of hundreds of elements a thread (16384 on one warp) already takes a
  // minute to compile, for a schedule far slower than others.
  bool small_tiles(const Stmt& loop, const std::set<std::string>& masks) const {
    for (const StmtPtr& b : loop.body) {
      if (b->kind != StmtKind::Assign || !masks.count(b->name)) continue;
      long long elements = 1;
      for (const kir::Extent& w : b->value->type.shape) {
        if (!w.param.empty()) return false;
        elements *= w.n;
      }
      if (elements > kMaxPerThread * 32LL * k_.num_warps) return false;
    }
    return true;
  }
  static constexpr long long kMaxPerThread = 64;

  // `lo + max(hi - lo, 0) // step * step`, or `hi // step * step` from 0.
  static ExprPtr full_end(const Stmt& loop) {
    bool from_zero = loop.lo->kind == ExprKind::Int && loop.lo->value_int == 0;
    if (from_zero) return kir::mul(kir::binary(BinOp::FloorDiv, loop.hi, loop.step), loop.step);
    ExprPtr span = kir::maximum(kir::sub(loop.hi, loop.lo), kir::int_imm(0));
    return kir::add(loop.lo, kir::mul(kir::binary(BinOp::FloorDiv, span, loop.step), loop.step));
  }

  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int i = 2; bindings_.count(name) || params_.count(name); ++i)
      name = base + "_" + std::to_string(i);
    bindings_[name] = 1;
    return name;
  }

  void peel(std::vector<StmtPtr>& block, std::vector<const std::vector<StmtPtr>*> outer,
            std::vector<size_t> outer_from = {}) {
    outer.push_back(&block);
    outer_from.push_back(0);
    for (size_t i = 0; i < block.size(); ++i) {
      Stmt& s = *block[i];
      outer_from.back() = i + 1;
      if (s.kind != StmtKind::For) continue;
      Contents shape;
      for (const StmtPtr& b : s.body)
        shape.visit(*b);
      if (shape.loop) {
        peel(s.body, outer, outer_from);
        continue;
      }
      if (shape.dot || s.warp_specialize || s.flatten || s.full_tiles) continue;
      std::set<std::string> masks = tile_masks(s);
      if (masks.empty() || !small_tiles(s, masks) || read_later(outer, outer_from, masks)) continue;
      StmtPtr whole = full_tiles(s, masks);
      if (!whole) continue;
      std::string end = fresh(s.name + "_full");
      ExprPtr end_value = full_end(s);
      whole->hi = kir::var(end, end_value->type);
      StmtPtr& tail = block[i];
      tail->lo = kir::var(end, end_value->type);
      block.insert(block.begin() + static_cast<std::ptrdiff_t>(i), std::move(whole));
      block.insert(block.begin() + static_cast<std::ptrdiff_t>(i),
                   Stmt::assign(end, std::move(end_value)));
      i += 2; // past the assignment and the loop over full tiles, at the partial tile's loop
    }
  }

  kir::Kernel& k_;
  std::map<std::string, int> bindings_;
  std::map<std::string, ExprPtr> defs_;
  std::set<std::string> constexprs_, params_;
};

} // namespace

void peel_partial_tiles(kir::Kernel& kernel) {
  Peeler(kernel).run();
}

} // namespace dtc
