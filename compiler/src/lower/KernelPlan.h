#pragma once
// The kernel plan: what lowering decides about the kernels, starting from the schedule as
// written. The Schedule keeps what the statements say (the canonical text is printed from it)
// and no pass writes it; the passes before kernels are built write the plan instead:
//   - InlineFused.h: which fused Funcs a consumer's kernel computes into global temporaries;
//   - SplitReductions.h: the Func a split reduction adds (`f_partial`) with its schedule, the
//     split Func's schedule without the split label, and how the partial results combine.
// LowerFunc.h and the module printer read it.
#include "schedule/Schedule.h"

namespace dtc {

/// A reduction over a blocked RVar: each program instance reduces one block of it. Either the
/// partial results go to a temporary with one entry per block (`part`, a label made for it) and
/// a second kernel reduces them, or (`part` null) they combine into the output atomically.
struct SplitReduction {
  ir::Label rvar = nullptr;
  long long block = 0;
  ir::Label part = nullptr;
  ir::ReduceOp op = ir::ReduceOp::Sum;
};

/// online(l) (OnlineSoftmax.h): the reductions over `rvar` that one loop computes, the running
/// maximum first when there is one.
struct OnlineGroup {
  ir::Label rvar = nullptr;
  struct Member {
    const ir::Expr* e;     // a node of the kernel's value, or of a stored Func's
    std::string key;       // ir::to_dt(*e): a copy of the member inlined elsewhere is the same
    bool rescaled = false; // a sum read through exp(Y - max): kept relative to the running max
  };
  std::vector<Member> members;
  const ir::Expr* max = nullptr; // the running maximum: the rescaled members read it
  /// A causal mask, `where(l <= m, x, -inf)` as the maximum's operand and in every sum: keys
  /// past the last `m` of a program's block add nothing, and the loop stops there. Else null.
  ir::Label causal = nullptr;
  std::string causal_condition; // the mask's condition (`l <= m`), as ir::to_dt prints it
  /// The member `e` is (by its text), or null.
  const Member* member(const ir::Expr& e) const;
};

/// A fused Func computed into a global temporary at a loop level of its consumer's kernel.
using Materialized = std::vector<std::pair<const ir::Symbol*, ir::Label>>;

struct KernelPlan {
  explicit KernelPlan(const Schedule& written) : schedule(written) {}

  /// Each Func's schedule as its kernel is built with it: the written one, as the passes
  /// refine it.
  Schedule schedule;
  /// Per consumer: the Funcs fused into it whose inner dimensions are not all fully
  /// tensorized, in the order they are computed (InlineFused.h).
  std::map<const ir::Symbol*, Materialized> materialized;
  /// Per Func whose reduction is split over program instances (SplitReductions.h).
  std::map<const ir::Symbol*, SplitReduction> split;
  /// Per Func scheduled online(l): the reductions its loop over l computes (OnlineSoftmax.h).
  std::map<const ir::Symbol*, OnlineGroup> online;

  const FuncSchedule& of(const ir::Symbol* f) const { return schedule.of(f); }
  const Materialized& materialized_of(const ir::Symbol* f) const {
    static const Materialized none;
    auto it = materialized.find(f);
    return it == materialized.end() ? none : it->second;
  }
  const OnlineGroup* online_of(const ir::Symbol* f) const {
    auto it = online.find(f);
    return it == online.end() ? nullptr : &it->second;
  }
  const SplitReduction* split_of(const ir::Symbol* f) const {
    auto it = split.find(f);
    return it == split.end() ? nullptr : &it->second;
  }
};

} // namespace dtc
