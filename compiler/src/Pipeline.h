#pragma once
// The pipeline's stages, shared by dtc::compile (Lower.cpp) and dtc::Algorithm (Algorithm.cpp).
// Lower.cpp is still the one place that fixes their order.
#include "dtc/Algorithm.h"
#include "frontend/AST.h"
#include "ir/IR.h"
#include "schedule/ApplySchedule.h"
#include "support/Diagnostics.h"

#include <memory>
#include <optional>

namespace dtc {

struct Frontend {
  ast::Program ast;
  ir::Program program; // checked, constants folded
};

/// parse -> check -> fold constants (verify IR). Null on errors. With
/// `stop_after_parse`, returns after parsing (the IR left empty).
std::unique_ptr<Frontend> run_frontend(std::string_view source, DiagnosticEngine& diags,
                                       bool stop_after_parse = false);

/// The statements of a replacement schedule: the file's `compile` statements, then those of
/// `text` (its locations point into a `<schedule>` source added to `diags`).
std::vector<ast::ScheduleStmt> replacement_schedule(const ast::Program& ast, std::string_view text,
                                                    DiagnosticEngine& diags);

/// The diagnostics of an engine as data.
std::vector<Message> messages_of(const DiagnosticEngine& diags);

} // namespace dtc
