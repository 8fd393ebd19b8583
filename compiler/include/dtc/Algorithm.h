#pragma once
// A DT program parsed and checked once, then given many schedules: what the explorer needs to
// expand a schedule template without re-reading the algorithm for every schedule.
//
// check_schedule applies and validates schedule statements only (no lowering, no code), so it
// costs microseconds; compile runs the whole pipeline. Both are const and thread-safe: one
// Algorithm may serve many threads.
#include "dtc/Compiler.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dtc {

/// One Func of the program, as a schedule can name it.
struct FuncInfo {
  std::string name;
  std::vector<std::string> dims;  // its dimensions, in definition order
  std::vector<std::string> rvars; // the reduction labels its definition uses
  bool compiled = false;          // compiled by the file's `compile` statements
};

/// The merged schedule of one label of a Func.
struct LabelSchedule {
  std::string label;
  bool reduction = false;
  long long block = 0;  // 0: not blocked (the whole dimension in one program instance)
  long long tensor = 1; // 0: the whole block; 1: not tensorized
  long long split = 0;  // `map(VAR:ID/FACTOR)`: FACTOR; 0 when not split
};

/// The merged schedule of one Func.
struct FuncScheduleInfo {
  std::string func;
  std::vector<LabelSchedule> labels; // schedulable labels, canonical order
  int num_warps = 4, num_stages = 3;
  std::string fused_into; // `fuse_at` target, empty when not fused
  std::string fused_at;
};

struct ScheduleInfo {
  bool ok = false;
  std::string canonical;         // the canonical text (spec section 1), when ok
  std::vector<Message> messages; // errors first in report order (the first names the reason)
  std::vector<FuncScheduleInfo> funcs;
  /// The schedule fuses Funcs, blocks a reduction or warp-specializes a loop: lowering checks
  /// more than check_schedule does, so only a `lower` check is conclusive.
  bool lowering_matters = false;
  /// The code of the first error ("" when ok).
  std::string reason() const;
};

/// Schedule statements parsed once, to be combined into many schedules (see
/// Algorithm::check_statements). Cheap to copy.
class Statements {
public:
  /// One parsed statement: `f.block(x:64, y)` is {f, block, {{x, true, 64}, {y}}}.
  struct Arg {
    std::string name; // empty for a bare integer
    bool has_value = false;
    long long value = 0;
    std::string split_name; // `x:xi/4`
  };
  struct Statement {
    std::string func, primitive;
    std::vector<Arg> args;
  };
  Statements();
  const std::vector<Statement>& statements() const;
  bool ok() const;                              // parsed without errors
  const std::string& text() const;              // as given
  const std::vector<Message>& messages() const; // the parse errors
  struct Impl;
  explicit Statements(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  const Impl& impl() const { return *impl_; }

private:
  std::shared_ptr<const Impl> impl_;
};

class Algorithm {
public:
  /// Parses and checks `source`. Never throws for bad input: ok() is false and the
  /// diagnostics say why.
  explicit Algorithm(std::string source, std::string file_name = "<input>");
  ~Algorithm();
  Algorithm(Algorithm&&) noexcept;
  Algorithm& operator=(Algorithm&&) noexcept;

  bool ok() const;
  const std::string& source() const;
  const std::string& file_name() const;
  /// Rendered diagnostics of the program itself (`file:line:col: error: ...`).
  const std::string& diagnostics() const;
  const std::vector<Message>& messages() const;
  /// The Funcs, in declaration order.
  const std::vector<FuncInfo>& funcs() const;
  /// The canonical text of the file's own schedule (empty when it has errors).
  const std::string& own_canonical() const;
  /// The sizes a call of each compiled Func takes (CallSizes), in `compile` order, as the
  /// default schedule's module has them: which labels need a size and which take another's.
  /// Empty when nothing is compiled or the default schedule does not lower. Computed on the
  /// first call (one compilation), then kept.
  const std::vector<CallSizes>& call_sizes() const;

  /// Applies `schedule` (statements separated by `;` or newlines; it replaces the file's
  /// schedule, whose `compile` statements are kept) and validates it. With `lower`, also runs
  /// fusion, reduction splitting and lowering, so every error code generation would report is
  /// found. Precondition: ok().
  ScheduleInfo check_schedule(std::string_view schedule, bool lower = false) const;

  /// Parses schedule statements without applying them.
  static Statements parse_statements(std::string_view text);
  /// Whether `name` is a scheduling primitive (`block`, `tma`, ...).
  static bool is_primitive(std::string_view name);
  /// check_schedule of the statements of `parts`, in order, without parsing them again: the
  /// explorer's fast path. Messages point into each part's own text.
  ScheduleInfo check_statements(const std::vector<const Statements*>& parts,
                                bool lower = false) const;

  /// The whole pipeline with `schedule` as in dtc::compile.
  CompileResult compile(std::string_view schedule, Emit emit = Emit::Python) const;

  struct Impl;

private:
  std::unique_ptr<Impl> impl_;
};

} // namespace dtc
