#pragma once
// From schedule statements (ScheduleSyntax.h, as the parser writes them) to a Schedule: each
// statement goes to its primitive (Primitive.h, one file each), which checks it and merges it
// into its Func's FuncSchedule.
#include "schedule/Schedule.h"
#include "schedule/ScheduleSyntax.h"

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
