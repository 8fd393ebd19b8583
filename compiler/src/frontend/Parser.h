#pragma once
// Parser: tokens -> ast::Program. Recursive descent with one function per grammar rule (the rule
// is written above each). On a syntax error it reports, skips to the end of the statement and
// goes on, so one run reports every malformed statement.
#include "frontend/AST.h"
#include "frontend/Lexer.h"

namespace dtc {

/// Parses a whole DT file.
ast::Program parse_program(std::string_view source, DiagnosticEngine& diags);

/// Parses schedule text only (`f.block(x:4); f.num_warps(8)`): statements separated by `;` or
/// newlines, as in the schedule shorthand. Declarations and definitions are errors here.
/// `source_id` is the DiagnosticEngine text the statements come from (see add_source).
std::vector<ast::ScheduleStmt> parse_schedule(std::string_view source, DiagnosticEngine& diags,
                                              int source_id = 0);

} // namespace dtc
