#pragma once
// The DT compiler as a library: DT source (and optionally a replacement schedule) in, a Python
// module (or diagnostics) out. Thread-compatible: each call is independent.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dtc {

enum class Emit {
  Python,    // the generated module
  Ast,       // the syntax tree
  Ir,        // the checked algorithm IR
  Canonical, // the canonical schedule text
  Check,     // nothing: diagnostics only
};

/// A diagnostic as data: its stable code (the list is in docs/language.md), where it points
/// and what it says.
struct Message {
  std::string code;      // e.g. `tensor-larger-than-block`; errors of a phase: `syntax`, ...
  std::string severity;  // error, warning or note
  std::string source;    // the file name, or `<schedule>` for schedule text
  int line = 0, col = 0; // 0: no location
  std::string text;
};

struct CompileOptions {
  std::string file_name = "<input>";
  /// Replaces the file's schedule (its `compile` statements are kept) with these statements,
  /// separated by `;` or newlines.
  std::optional<std::string> schedule;
  Emit emit = Emit::Python;
  /// Kernel passes (kernel_passes(), or `all`) after which each kernel's IR is dumped into
  /// CompileResult::dumps.
  std::vector<std::string> dump_after;
};

/// The names of the passes over each kernel, in the order they run: `lower` (the kernel as
/// lowering built it), then each rewriting pass.
const std::vector<std::string>& kernel_passes();

/// The sizes a call of one compiled Func's wrapper (and of its `make_inputs`) takes: one for
/// each of `labels`, except that a label of `tied` may be left out: it takes the size of the
/// label it maps to, because both index one input dimension (rms_norm's `k` and `y`) or one
/// reads a Func along a dimension the other labels. Sizes given for tied labels must agree.
struct CallSizes {
  std::string func;
  std::vector<std::string> labels;         // declaration order; sizes the compiler derives
                                           // (split reductions) are not among them
  std::map<std::string, std::string> tied; // label -> the first label of `labels` it equals
};

struct CompileResult {
  bool ok = false;         // no errors
  std::string output;      // the requested emission (empty on error)
  std::string diagnostics; // rendered `file:line:col: error: ...` text, warnings included
  int error_count = 0;
  std::string canonical_schedule;
  /// The same diagnostics as data, each with its stable code .
  std::vector<Message> messages;
  /// Per compiled Func, in `compile` order: the sizes its wrapper takes (Python and Check
  /// emission, when ok).
  std::vector<CallSizes> call_sizes;
  /// The kernel IR after each pass of CompileOptions::dump_after, each headed
  /// `// after PASS: KERNEL`.
  std::string dumps;
};

/// Compiles one DT program. Never throws for bad input; an internal compiler error is reported
/// as a diagnostic too.
CompileResult compile(std::string_view source, const CompileOptions& options = {});

} // namespace dtc
