#pragma once
// Fusion: rewrites each consumer Func so that the Funcs fused into it (fuse_at) are computed in
// its own kernel. When the fuse level is innermost for the producer, or every dimension inside
// it is fully tensorized in the consumer, a fused access `f[a, b]` becomes f's definition with
// f's dimension labels renamed to a, b (no temporary, thesis listings 3.13 and 3.15); lowering
// then computes each reduction at the outermost loop level where its dimensions are bound, so a
// fused row reduction runs once per row block. Otherwise f stays an access and is recorded in
// the plan's `materialized` of the consumer: the consumer's kernel computes f into a global
// temporary at the fuse level and reads it back (listing 3.14).
//
// A temporary holds one iteration of the fuse level: every read of it (by the consumer or by
// another producer filled in the same kernel) must index the dimensions up to that level with
// the consumer's own labels, not rebound by a reduction around the read, and a producer that
// reads another's temporary must be filled at the same level or inside it; anything else is an
// error at the fuse_at. Temporaries are filled producers first. A producer filled into a
// temporary inlines what its consumer's kernel inlines. Expressions deeper than
// ir::kMaxExprHeight after inlining are an error.
//
// Preconditions: the schedule is applied and validated (fuse_at legality is checked there).
// Postcondition: no Func reads a Func fused into it; FuncDef::deps of each consumer are the
// dependencies after fusion.
#include "ir/IR.h"
#include "lower/KernelPlan.h"

namespace dtc {

void inline_fused_funcs(ir::Program& program, KernelPlan& plan, DiagnosticEngine& diags);

} // namespace dtc
