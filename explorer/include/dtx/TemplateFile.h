#pragma once
// Template files (YAML, see docs/templates.md and templates/): what an exploration needs, in
// one place: the kernel's name, the algorithm, the schedule template, shapes, dtype, baselines.
#include "dtx/Measurement.h"
#include "dtx/Space.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtx {

/// A template file that cannot be used; the message is `FILE:LINE:COL: error: ...` lines.
class TemplateFileError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct NamedBaseline {
  std::string name; // as written: `torch`, `torch.compile`, `reference`, `FILE.py:FUNC[:compile]`
  BaselineSpec spec;
};

struct TemplateFile {
  std::filesystem::path path; // empty for inline text
  std::string name;           // how messages name it (the path, or what the caller said)
  std::string kernel;
  std::string algorithm;            // the DT source
  std::string algorithm_name;       // its file name, for diagnostics
  std::vector<std::string> compile; // Funcs added to those the algorithm compiles
  std::string schedule;             // the template text
  int schedule_line = 0;            // template line 1 is this file line + 1
  int schedule_col = 0;             // column offset of a one-line template
  std::vector<ShapeSizes> shapes;
  std::vector<ShapeSizes> test_shapes; // small shapes for the interpreter
  std::string dtype = "float32";
  std::vector<NamedBaseline> baselines;
  std::string strategy;                // optional defaults for `dtx explore`
  std::optional<std::uint64_t> budget; // (0: no limit)

  /// The algorithm's source with the `compile` entries appended.
  std::string program() const;
  /// The Func to measure: the first `compile` entry, or "" for the module's first.
  std::string func() const { return compile.empty() ? "" : compile.front(); }
  /// Parses the template, with errors located in this file.
  Template parse_schedule() const;
};

/// Loads a template file; a relative `algorithm:` and baseline files are resolved beside it.
TemplateFile load_template_file(const std::filesystem::path& path);
/// Parses template-file YAML (`name` for messages, `dir` to resolve relative files).
TemplateFile parse_template_file(const std::string& yaml, const std::string& name,
                                 const std::filesystem::path& dir);
/// `torch` (FUNC named like the kernel in baselines.py beside the file), `torch.compile`,
/// `liger` and `helion` (FUNC named like the kernel in liger_baselines.py or helion_baselines.py
/// beside the file), `reference`,
/// `FILE.py:FUNC` and `FILE.py:FUNC:compile`.
NamedBaseline parse_baseline_entry(const std::string& text, const std::string& kernel,
                                   const std::filesystem::path& dir);

} // namespace dtx
