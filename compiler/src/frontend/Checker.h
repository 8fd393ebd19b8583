#pragma once
// Semantic analysis: ast::Program -> ir::Program. Resolves every name to its declaration,
// checks kinds, arities and shapes under label alignment, that every Func is defined exactly
// once and that Funcs do not depend on themselves. Schedule statements are not looked at here
// (see schedule/Schedule.h). All errors of a program are reported.
#include "frontend/AST.h"
#include "ir/IR.h"

namespace dtc {

/// Checks `program`. Returns the IR; it is meaningful only if no error was reported.
ir::Program check_program(const ast::Program& program, DiagnosticEngine& diags);

} // namespace dtc
