#include "kir/VerifyKernel.h"

#include "kir/Dump.h"
#include "kir/KirVisitor.h"
#include "support/Diagnostics.h"

#include <map>
#include <vector>

namespace dtc {
namespace {

class Verifier : public kir::KirVisitor {
public:
  using KirVisitor::visit;
  Verifier(const kir::Kernel& k, const std::string& after) : k_(k), after_(after) {}

  void run() {
    for (const kir::Param& p : k_.params) {
      if (!bound_.emplace(p.name, p.type).second) fail("duplicate parameter " + p.name);
      params_.insert(p.name);
      if (p.is_constexpr) constexprs_.insert(p.name);
    }
    if (k_.launch.size() != k_.params.size()) fail("launch arguments mismatch");
    visit(k_.body);
  }

private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InternalError("kernel verification failed for " + k_.name + " after " + after_ + ": " +
                        what);
  }

  void bind(const std::string& name, const kir::Type& type) {
    if (params_.count(name)) fail("assigns to parameter " + name);
    // A name bound before a loop and again inside it is carried across iterations, where
    // Triton requires one type.
    for (const auto& outer : loops_)
      if (auto it = outer.find(name); it != outer.end() && !(it->second == type))
        fail(name + " bound as " + kir::to_string(it->second) + " before a loop and as " +
             kir::to_string(type) + " inside it");
    bound_[name] = type;
  }

  void visit(const kir::Expr& e) override {
    if (e.kind == kir::ExprKind::Var) {
      auto it = bound_.find(e.name);
      if (it == bound_.end()) fail("reads " + e.name + " before binding it");
      if (!(it->second == e.type))
        fail("reads " + e.name + " as " + kir::to_string(e.type) + ", bound as " +
             kir::to_string(it->second));
    }
    if (e.kind == kir::ExprKind::Load && !e.args[0]->type.shape.empty() && e.args.size() < 2 &&
        !full_tiles_)
      fail("unmasked tensor load: " + kir::dump(e));
    KirVisitor::visit(e);
  }

  void visit(const kir::Stmt& stmt) override {
    const kir::Stmt* s = &stmt;
    {
      switch (s->kind) {
      case kir::StmtKind::Assign:
        visit(*s->value);
        bind(s->name, s->value->type);
        break;
      case kir::StmtKind::Store:
        visit(*s->ptr);
        visit(*s->value);
        if (s->mask) visit(*s->mask);
        if (!s->ptr->type.shape.empty() && !s->mask && !full_tiles_)
          fail("unmasked tensor store: " + kir::dump(*s->ptr));
        if (s->value->type.shape.size() > s->ptr->type.shape.size())
          fail("stores a " + kir::to_string(s->value->type) + " to " +
               kir::to_string(s->ptr->type));
        if (s->desc) {
          visit(*s->desc);
          for (const kir::Stmt::DescPart& part : s->desc_parts) {
            for (const kir::ExprPtr& o : part.offsets)
              visit(*o);
            visit(*part.value);
          }
          if (!constexprs_.count(s->desc_flag))
            fail("descriptor store under " + s->desc_flag + ", not a constexpr parameter");
          // The parts tile the pointer store's [r, c] (its axes of more than one element):
          // blocks of [1, ..., 1, r, c / parts]; c a parameter only where there is one part.
          const kir::Shape& block = s->desc->type.shape;
          kir::Shape tile;
          for (const kir::Extent& x : s->ptr->type.shape)
            if (!x.is_one()) tile.push_back(x);
          const size_t rank = block.size(), parts = s->desc_parts.size();
          bool tiles = rank >= 2 && tile.size() == 2 && block[rank - 2] == tile[0];
          for (size_t i = 0; tiles && i + 2 < rank; ++i)
            tiles = block[i].is_one();
          if (tiles)
            tiles = parts == 1 ? block[rank - 1] == tile[1]
                               : block[rank - 1].param.empty() && tile[1].param.empty() &&
                                     block[rank - 1].n * static_cast<long long>(parts) == tile[1].n;
          for (const kir::Stmt::DescPart& part : s->desc_parts)
            tiles = tiles && part.value->type.shape == block && part.offsets.size() == rank;
          if (!tiles)
            fail("descriptor store of " + std::to_string(s->desc_parts.size()) + " " +
                 kir::to_string(s->desc->type) + " blocks where the pointer store writes " +
                 kir::to_string(s->ptr->type));
        }
        break;
      case kir::StmtKind::For: {
        visit(*s->lo);
        visit(*s->hi);
        visit(*s->step);
        const kir::Expr& step = *s->step;
        // A positive literal, a parameter (a tile width), or the grid's extent (persistent
        // programs), converted or not.
        const kir::Expr& bare = step.kind == kir::ExprKind::Cast ? *step.args[0] : step;
        bool positive = (bare.kind == kir::ExprKind::Int && bare.value_int > 0) ||
                        (bare.kind == kir::ExprKind::Var && params_.count(bare.name)) ||
                        bare.kind == kir::ExprKind::NumPrograms;
        if (!positive) fail("loop " + s->name + " steps by " + kir::dump(step));
        if (s->warp_specialize) {
          // Triton takes a constexpr: the condition reads constexpr parameters only.
          std::set<std::string> names;
          kir::free_vars(*s->warp_specialize, names);
          for (const std::string& n : names)
            if (!constexprs_.count(n))
              fail("loop " + s->name + " is warp-specialized under `" + n +
                   "`, not a constexpr parameter");
        }
        bind(s->name, kir::loop_var_type(*s->lo, *s->hi, *s->step));
        loops_.push_back(bound_);
        const int outer = full_tiles_;
        full_tiles_ += s->full_tiles;
        visit(s->body);
        full_tiles_ = outer;
        loops_.pop_back();
        break;
      }
      case kir::StmtKind::Comment:
      case kir::StmtKind::Barrier:
        break;
      }
    }
  }

  const kir::Kernel& k_;
  const std::string& after_;
  std::set<std::string> params_;
  std::set<std::string> constexprs_;
  std::map<std::string, kir::Type> bound_;
  std::vector<std::map<std::string, kir::Type>> loops_; // names bound before each open loop
  int full_tiles_ = 0; // open loops over whole tiles: their loads and stores need no mask
};

} // namespace

void verify_kernel(const kir::Kernel& kernel, const std::string& after) {
  Verifier(kernel, after).run();
}

} // namespace dtc
