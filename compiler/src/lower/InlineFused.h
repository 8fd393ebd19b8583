#pragma once
// Fusion: rewrites each consumer Func so that the Funcs fused into it (fuse_at) are computed in
// its own kernel. A fused access `f[a, b]` becomes f's definition with f's dimension labels
// renamed to a, b. Lowering then computes each reduction at the outermost loop level where its
// dimensions are bound (the fuse_at level or outside it), so a fused reduction such as softmax's
// row sum is computed once per row block, and element-wise producers are computed where their
// consumer needs them, with no global temporary.
//
// Preconditions: the schedule is applied and validated (fuse_at legality is checked there).
// Postcondition: no Func reads a Func fused into it; FuncDef::deps of each consumer are the
// dependencies after fusion.
#include "ir/IR.h"
#include "schedule/Schedule.h"

namespace dtc {

void inline_fused_funcs(ir::Program& program, const Schedule& schedule, DiagnosticEngine& diags);

} // namespace dtc
