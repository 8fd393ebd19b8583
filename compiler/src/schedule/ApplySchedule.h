#pragma once
// From schedule statements (the front end's AST) to a Schedule: each statement goes to its
// primitive (Primitive.h, one file each), which checks it and merges it into its Func's
// FuncSchedule. The only part of the schedule layer that sees the AST.
#include "frontend/AST.h"
#include "schedule/Schedule.h"

namespace dtc {

/// Applies schedule statements, in order, to `schedule`. Statements with errors are reported
/// and skipped; the rest still apply. Then validates each Func's merged schedule, and drops
/// what the canonical text does not print (the statements of a Func fused into another with no
/// kernel of its own, but its fuse_at), so that the code depends on the canonical text alone.
void apply_schedule(const std::vector<ast::ScheduleStmt>& stmts, const ir::Program& program,
                    Schedule& schedule, DiagnosticEngine& diags);
/// The same over statements held elsewhere (the explorer's parsed-once statements).
void apply_schedule(const std::vector<const ast::ScheduleStmt*>& stmts, const ir::Program& program,
                    Schedule& schedule, DiagnosticEngine& diags);

} // namespace dtc
