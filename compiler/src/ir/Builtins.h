#pragma once
// The element-wise math functions of DT: every math function of `triton.language`, plus the ones
// a kernel writer expects that it lacks (tanh, pow, gelu, ...). The latter are emitted as small
// `@triton.jit` helpers built from triton.language operations, so they run on the GPU and under
// the Triton interpreter alike (libdevice calls do not run in the interpreter).
#include <string>
#include <string_view>
#include <vector>

namespace dtc {

struct Builtin {
  const char* name;    // DT name
  int arity;           // number of arguments
  const char* triton;  // Triton expression; {0}, {1}, {2} stand for the arguments
  const char* torch;   // PyTorch expression for the reference, same placeholders
  const char* helper;  // name of the @triton.jit helper the Triton expression calls, or nullptr
  const char* summary; // one line, for the documentation
};

/// Looks a function up by its DT name; nullptr if there is none.
const Builtin* find_builtin(std::string_view name);
const std::vector<Builtin>& builtins();

/// Source of the @triton.jit helper `name` (e.g. "_dt_tanh"), for the generated module; "" if
/// there is none.
std::string helper_source(std::string_view name);

/// The helpers that helper `name`'s source calls (the module must carry them too).
std::vector<std::string> helper_uses(std::string_view name);

/// Levenshtein distance, for "did you mean" suggestions.
size_t edit_distance(std::string_view a, std::string_view b);

/// The closest builtin name to `name` (for "did you mean"), or "" if none is close.
std::string closest_builtin(std::string_view name);

/// Replaces {0}, {1}, ... in `pattern` with `args`.
std::string substitute(std::string_view pattern, const std::vector<std::string>& args);

} // namespace dtc
