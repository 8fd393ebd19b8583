#pragma once
// A request to expand or explore a template, and the rules its fields follow. dtx reads the
// fields from a template file and its command line, dtxd from a JSON body; both check them
// here, so a field means the same thing, and is refused for the same reason, wherever it is
// given (docs/templates.md, "The rules of a request").
#include "dtx/Template.h"
#include "dtx/TemplateFile.h"

#include <dtc/Algorithm.h>

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtx {

/// A field that breaks a rule. `field` is its name in a template file and in a request
/// (`kernel`, `shapes`, `schedule`, ...); `details` locate template and algorithm errors.
class RequestError : public std::runtime_error {
public:
  enum class Kind {
    BadField,       // a value the rules refuse (dtx: exit status 2; dtxd: 400)
    TemplateError,  // the template does not parse or does not fit the algorithm (1; 422)
    AlgorithmError, // the algorithm does not compile (1; 422)
  };
  struct Detail {
    int line = 0, col = 0; // in the template or the algorithm text
    std::string code, severity, message;
  };
  RequestError(Kind kind, std::string field, const std::string& message,
               std::vector<Detail> details = {}, std::string rendered = "");
  Kind kind;
  std::string field;
  std::vector<Detail> details;
  /// For a terminal: `FILE:LINE:COL: error: ...` lines where there are details, else empty.
  std::string rendered;
};

/// The range of a number.
struct NumberRule {
  double lo = 0, hi = 0;
  bool whole = true; // a count: no fraction
  /// "" when `v` follows the rule, else what it must be ("a whole number from 0 to 10").
  std::string problem(double v) const;
  /// The same for text, which must be all one number (digits only where whole; never NaN or
  /// infinity): "" or "`-5` is not a whole number from 0 to 10".
  std::string problem(const std::string& text) const;
  /// What the rule allows, in words: "a whole number from 0 to 10".
  std::string describe() const;
};

/// A number as the rules write it: `5`, `0.01`, `4611686018427387904`.
std::string number_text(double v);

/// The rule of an exploration setting that is a number, by its name (`budget`, `top`,
/// `screen_rep_ms`, ...: Settings.h describes them all). Throws std::out_of_range for another
/// name.
const NumberRule& setting_rule(const std::string& field);

/// The rule of a measurement pool's setting by its field name (`compile_workers`,
/// `startup_timeout_s`, `ray_interpreter_workers`, `ray_compile_per_node`), for dtx's options
/// and dtxd's options and configuration. Throws std::out_of_range for another name.
const NumberRule& pool_rule(const std::string& field);

/// The largest size a shape may give a label, 2^40: sizes are multiplied into element counts,
/// offsets and grids in 64-bit arithmetic, and a few sizes at this bound still fit.
constexpr long long kMaxShapeSize = 1LL << 40;
/// The most shapes one request may list (one exploration each).
constexpr std::size_t kMaxShapes = 64;
/// The longest label of a shape, and the longest baseline name (`FILE.py:FUNCTION:compile`).
constexpr std::size_t kMaxLabelLength = 100;
constexpr std::size_t kMaxBaselineLength = 200;
/// The longest device model a request may ask for (`device`, `--device`).
constexpr std::size_t kMaxDeviceLength = 200;

/// "" when the name follows the rule, else the rule. A kernel's name ends up in file names
/// (`dtx best KERNEL -o KERNEL.py`), generated code and the shell lines the page offers CI: it
/// is letters, digits, `_`, `.` and `-`, up to 100, starting with a letter, a digit or `_` (so
/// `2mm` is a name, `../x`, `-o` and `a b` are not).
std::string kernel_name_problem(const std::string& name);
/// The same for the algorithm's file name (used in diagnostics and the module's docstring).
std::string algorithm_name_problem(const std::string& name);
std::string dtype_problem(const std::string& dtype);       // float32, float16 or bfloat16
std::string strategy_problem(const std::string& strategy); // one of strategy_names()
/// A baseline as named in a request or a template file: at most kMaxBaselineLength characters
/// (what it means, parse_baseline_entry).
std::string baseline_name_problem(const std::string& name);
/// A device model to measure on (`device`, dtx explore's `--device`): at most kMaxDeviceLength
/// characters. It is kept with the exploration and quoted in every measurement's message when
/// no worker has that model.
std::string device_problem(const std::string& device);
/// A bearer token (`--token`, `tokens`): printable ASCII without spaces, which a header can
/// carry as it is.
std::string token_problem(const std::string& token);

/// A request whose fields follow the rules, its template and algorithm parsed.
struct CheckedRequest {
  std::shared_ptr<const dtc::Algorithm> algorithm;
  Template tmpl;
};

/// Checks the fields of `file` (kernel, algorithm name, dtype, strategy and budget where
/// given, baselines each named once, the algorithm, not empty, the template and that it fits
/// the algorithm) and `shapes` (at most kMaxShapes; each with labels of at most
/// kMaxLabelLength characters, sizes of at most kMaxShapeSize, and then shape_problem; none
/// listed twice), in that order. Throws RequestError for the first field that breaks a rule;
/// `shapes_field` is how errors of a shape name their field (`shapes`, `shape`, `--shape`).
/// `shapes` may be empty (dtx expand without a shape).
CheckedRequest check_request(const TemplateFile& file, const std::vector<ShapeSizes>& shapes,
                             const std::string& shapes_field = "shapes");

} // namespace dtx
