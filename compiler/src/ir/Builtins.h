#pragma once
// The element-wise math functions of DT: every math function of `triton.language`, plus the ones
// a kernel writer expects that it lacks (tanh, pow, gelu, ...). What they compute, not how a
// target spells them: the printers do (codegen/TritonMath.h, codegen/ReferencePrinter.cpp).
#include <string>
#include <string_view>
#include <vector>

namespace dtc {

struct Builtin {
  const char* name;    // DT name
  int arity;           // number of arguments
  const char* summary; // one line, for the documentation
};

/// Looks a function up by its DT name; nullptr if there is none.
const Builtin* find_builtin(std::string_view name);
const std::vector<Builtin>& builtins();

/// Levenshtein distance, for "did you mean" suggestions.
size_t edit_distance(std::string_view a, std::string_view b);

/// The closest builtin name to `name` (for "did you mean"), or "" if none is close.
std::string closest_builtin(std::string_view name);

} // namespace dtc
