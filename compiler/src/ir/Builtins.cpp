// DT's builtin functions: what each computes. Lowering (lower/LowerExprs.cpp) makes each an
// intrinsic of the kernel IR (kir/Intrinsics.h) or other operations; the printers spell them for
// Triton (codegen/TritonMath.cpp) and for the PyTorch reference (codegen/ReferencePrinter.cpp).
#include "ir/Builtins.h"

#include <algorithm>

namespace dtc {

const std::vector<Builtin>& builtins() {
  static const std::vector<Builtin> table = {
      {"abs", 1, "absolute value"},
      {"ceil", 1, "round up"},
      {"floor", 1, "round down"},
      {"cos", 1, "cosine"},
      {"sin", 1, "sine"},
      {"erf", 1, "error function"},
      {"exp", 1, "e to the power"},
      {"exp2", 1, "2 to the power"},
      {"log", 1, "natural logarithm"},
      {"log2", 1, "base-2 logarithm"},
      {"rsqrt", 1, "1 / sqrt"},
      {"sigmoid", 1, "1 / (1 + exp(-v))"},
      {"sqrt", 1, "square root"},
      {"sqrt_rn", 1, "square root, rounded to nearest"},
      {"maximum", 2, "element-wise maximum, NaN if either is NaN"},
      {"minimum", 2, "element-wise minimum, NaN if either is NaN"},
      {"fdiv", 2, "fast division"},
      {"div_rn", 2, "division, rounded to nearest"},
      {"clamp", 3, "clamp(v, lo, hi)"},
      {"fma", 3, "fused a * b + c"},
      {"where", 3, "where(cond, a, b): a where cond is non-zero, else b"},
      {"tanh", 1, "hyperbolic tangent"},
      {"sinh", 1, "hyperbolic sine"},
      {"cosh", 1, "hyperbolic cosine"},
      {"tan", 1, "tangent"},
      {"pow", 2, "pow(v, e); a small integer literal e becomes repeated multiplication"},
      {"log1p", 1, "log(1 + v), accurate near 0"},
      {"expm1", 1, "exp(v) - 1, accurate near 0"},
      {"log10", 1, "base-10 logarithm"},
      {"erfc", 1, "1 - erf(v), accurate for large v"},
      {"sign", 1, "-1, 0 or 1"},
      {"reciprocal", 1, "1 / v"},
      {"square", 1, "v * v"},
      {"relu", 1, "max(v, 0)"},
      {"silu", 1, "v * sigmoid(v)"},
      {"softplus", 1, "log(1 + exp(v)), without overflow"},
      {"gelu", 1, "GELU with erf: 0.5 v (1 + erf(v / sqrt 2))"},
      {"gelu_tanh", 1, "GELU, tanh approximation"},
  };
  return table;
}

const Builtin* find_builtin(std::string_view name) {
  for (const Builtin& b : builtins())
    if (name == b.name) return &b;
  return nullptr;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_builtin(std::string_view name) {
  static const char* extra[] = {"rsum", "rmax", "rmin", "rdot", "len", "reshape", "program_id"};
  std::string best;
  size_t best_d = 3;
  auto consider = [&](std::string_view cand) {
    size_t d = edit_distance(name, cand);
    if (d < best_d) {
      best_d = d;
      best = std::string(cand);
    }
  };
  for (const Builtin& b : builtins())
    consider(b.name);
  for (const char* e : extra)
    consider(e);
  return best;
}

} // namespace dtc
