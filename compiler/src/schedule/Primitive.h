#pragma once
// The interface every scheduling primitive implements; the table lists them in canonical order.
#include "schedule/ApplySchedule.h"

#include <functional>

namespace dtc {

struct PrimitiveContext {
  const ir::Program& program;
  Schedule& schedule;
  DiagnosticEngine& diags;
  const ast::ScheduleStmt& stmt;
  const ir::Symbol* func;
  FuncSchedule& target;
};

struct Primitive {
  const char* name;
  /// Checks one statement's arguments and merges it into ctx.target. Reports errors; returns
  /// false when the statement was rejected.
  std::function<bool(PrimitiveContext&)> apply;
  /// Checks the merged schedule of a Func once all statements are in (errors at the statement).
  std::function<void(const FuncSchedule&, const ir::Program&, DiagnosticEngine&)> validate;
  /// Canonical arguments (without parentheses) for a Func, or nullopt when at its default.
  std::function<std::optional<std::string>(const FuncSchedule&, const ir::Program&)> print;
};

// One per file in schedule/.
Primitive block_primitive();
Primitive tensorize_primitive();
Primitive map_primitive();
Primitive fuse_at_primitive();
Primitive store_in_primitive();
Primitive online_primitive();
Primitive atomic_primitive();
Primitive precision_primitive();
Primitive relayout_primitive();
Primitive tma_primitive();
Primitive subtile_primitive();
Primitive index_primitive();
Primitive persistent_primitive();
Primitive warp_specialize_primitive();
Primitive num_warps_primitive();
Primitive num_stages_primitive();
Primitive compile_primitive();

/// All primitives in canonical order: block, tensorize, map, fuse_at, store_in, online, atomic,
/// precision, relayout, tma, subtile, index, persistent, warp_specialize, num_warps, num_stages,
/// compile.
const std::vector<Primitive>& primitive_table();
/// Their names, as a sentence lists them: `block, tensorize, ... and compile`.
std::string primitive_names();

/// Once every statement is in: the checks of store_in that need the whole schedule (the
/// storing Func is compiled and has a kernel of its own, ...), and the dependencies it adds to
/// the storing Func (StoreIn.cpp).
void settle_stores(const ir::Program& program, Schedule& schedule, DiagnosticEngine& diags);

// Shared argument helpers.
ir::Label schedule_label(PrimitiveContext& ctx, const ast::ScheduleArg& arg, const char* what);
bool is_power_of_two(long long v);

/// Merges a statement's `VAR:SIZE` arguments into `sizes` (block sizes, tensor sizes). Reports a
/// statement without arguments, malformed arguments (`usage` shows the right form), labels the
/// Func cannot name, sizes `check` rejects (it reports its own error), and a label given two
/// sizes (`what` names the size). `sizes` changes only if every argument is good.
bool merge_sizes(PrimitiveContext& ctx, std::map<ir::Label, long long>& sizes, const char* usage,
                 const char* what, const std::function<bool(const ast::ScheduleArg&)>& check);
std::string stmt_text(const ast::ScheduleStmt& stmt);

/// A primitive taking one word of `words` (the first is the default, dropped from canonical
/// text) into `field`; anything else is error `code`, whose message shows `example`.
Primitive word_primitive(const char* name, std::vector<std::string> words, const char* code,
                         const char* example, std::optional<std::string> FuncSchedule::*field);

} // namespace dtc
