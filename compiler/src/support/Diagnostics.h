#pragma once
// Diagnostics: user errors carry a source location and are collected (never thrown), so a file
// reports all of its errors; internal errors are compiler bugs and are thrown as InternalError.
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dtc {

/// A position in a source text; line and column start at 1. Line 0 means "no location".
struct Loc {
  int line = 0;
  int col = 0;
  int source = 0; // which text of the DiagnosticEngine (0: the file; see add_source)
};

enum class Severity { Error, Warning, Note };

struct Diagnostic {
  Severity severity = Severity::Error;
  Loc loc;
  std::string message;
  /// A stable, machine-readable reason (`tensor-larger-than-block`, `syntax`, ...): the list is
  /// in docs/language.md. Errors reported without their own code get the engine's phase.
  std::string code;
};

/// Collects diagnostics for one source text and renders them as
/// `file:line:col: error: message`, followed by the source line and a caret.
class DiagnosticEngine {
public:
  DiagnosticEngine(std::string file_name, std::string_view source) {
    sources_.push_back({std::move(file_name), source});
  }

  /// Registers another text whose locations carry the returned id (e.g. a --schedule string).
  int add_source(std::string name, std::string_view text) {
    sources_.push_back({std::move(name), text});
    return static_cast<int>(sources_.size()) - 1;
  }

  /// An error; one identical to an earlier one (same place, same words) is dropped, with the
  /// notes that follow it.
  void error(Loc loc, std::string message);
  /// An error with its own stable code (see Diagnostic::code).
  void error(const char* code, Loc loc, std::string message);
  /// The code of errors reported without one from now on: the pipeline sets it per phase
  /// (`syntax`, `semantic`, `schedule`, `fusion`, `lowering`, `internal`).
  void set_phase(const char* code) { phase_ = code; }
  void warning(Loc loc, std::string message);
  void note(Loc loc, std::string message);

  bool has_errors() const { return error_count_ > 0; }
  int error_count() const { return error_count_; }
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }
  const std::string& file_name() const { return sources_.front().name; }
  /// The name of a text registered with add_source (0: the file).
  const std::string& source_name(int id) const {
    return sources_.at(id >= 0 && id < static_cast<int>(sources_.size()) ? id : 0).name;
  }

  /// Renders every diagnostic, in the order reported.
  std::string render() const;

  /// Caps the number of errors kept; past the cap one summary error is reported.
  static constexpr int kMaxErrors = 100;

private:
  struct Source {
    std::string name;
    std::string_view text;
  };
  std::vector<Source> sources_;
  std::vector<Diagnostic> diagnostics_;
  int error_count_ = 0;
  bool skipping_repeat_ = false; // the last error repeated an earlier one: its notes go too
  const char* phase_ = "syntax";
};

/// A bug in the compiler (a broken invariant), as opposed to a mistake in the user's program.
class InternalError : public std::logic_error {
public:
  using std::logic_error::logic_error;
};

#define DTC_ASSERT(cond, msg)                                                                      \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      throw ::dtc::InternalError(std::string("internal error: ") + (msg) + " (" #cond ") at " +    \
                                 __FILE__ + ":" + std::to_string(__LINE__));                       \
  } while (0)

} // namespace dtc
