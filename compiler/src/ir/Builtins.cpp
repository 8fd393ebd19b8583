#include "ir/Builtins.h"

#include <algorithm>

namespace dtc {

const std::vector<Builtin>& builtins() {
  static const std::vector<Builtin> table = {
      // triton.language math functions
      {"abs", 1, "tl.abs({0})", "torch.abs({0})", nullptr, "absolute value"},
      {"ceil", 1, "tl.ceil({0})", "torch.ceil({0})", nullptr, "round up"},
      {"floor", 1, "tl.floor({0})", "torch.floor({0})", nullptr, "round down"},
      {"cos", 1, "tl.cos({0})", "torch.cos({0})", nullptr, "cosine"},
      {"sin", 1, "tl.sin({0})", "torch.sin({0})", nullptr, "sine"},
      {"erf", 1, "tl.erf({0})", "torch.erf({0})", nullptr, "error function"},
      {"exp", 1, "tl.exp({0})", "torch.exp({0})", nullptr, "e to the power"},
      {"exp2", 1, "tl.exp2({0})", "torch.exp2({0})", nullptr, "2 to the power"},
      {"log", 1, "tl.log({0})", "torch.log({0})", nullptr, "natural logarithm"},
      {"log2", 1, "tl.log2({0})", "torch.log2({0})", nullptr, "base-2 logarithm"},
      {"rsqrt", 1, "tl.rsqrt({0})", "torch.rsqrt({0})", nullptr, "1 / sqrt"},
      {"sigmoid", 1, "tl.sigmoid({0})", "torch.sigmoid({0})", nullptr, "1 / (1 + exp(-v))"},
      {"sqrt", 1, "tl.sqrt({0})", "torch.sqrt({0})", nullptr, "square root"},
      {"sqrt_rn", 1, "tl.sqrt_rn({0})", "torch.sqrt({0})", nullptr,
       "square root, rounded to nearest"},
      {"maximum", 2, "tl.maximum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)",
       "torch.maximum({0}, {1})", nullptr, "element-wise maximum, NaN if either is NaN"},
      {"minimum", 2, "tl.minimum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)",
       "torch.minimum({0}, {1})", nullptr, "element-wise minimum, NaN if either is NaN"},
      {"fdiv", 2, "tl.fdiv({0}, {1})", "torch.div({0}, {1})", nullptr, "fast division"},
      {"div_rn", 2, "tl.div_rn({0}, {1})", "torch.div({0}, {1})", nullptr,
       "division, rounded to nearest"},
      {"clamp", 3,
       "tl.minimum(tl.maximum({0}, {1}, propagate_nan=tl.PropagateNan.ALL), {2}, "
       "propagate_nan=tl.PropagateNan.ALL)",
       "torch.minimum(torch.maximum({0}, {1}), {2})", nullptr, "clamp(v, lo, hi)"},
      {"fma", 3, "tl.fma({0}, {1}, {2})", "({0} * {1} + {2})", nullptr, "fused a * b + c"},
      {"where", 3, "tl.where({0} != 0, {1}, {2})", "torch.where({0} != 0, {1}, {2})", nullptr,
       "where(cond, a, b): a where cond is non-zero, else b"},
      // helpers built from triton.language operations
      {"tanh", 1, "_dt_tanh({0})", "torch.tanh({0})", "_dt_tanh", "hyperbolic tangent"},
      {"sinh", 1, "_dt_sinh({0})", "torch.sinh({0})", "_dt_sinh", "hyperbolic sine"},
      {"cosh", 1, "_dt_cosh({0})", "torch.cosh({0})", "_dt_cosh", "hyperbolic cosine"},
      {"tan", 1, "_dt_tan({0})", "torch.tan({0})", "_dt_tan", "tangent"},
      {"pow", 2, "_dt_pow({0}, {1})", "torch.pow({0}, {1})", "_dt_pow",
       "pow(v, e); a small integer literal e becomes repeated multiplication"},
      {"log1p", 1, "_dt_log1p({0})", "torch.log1p({0})", "_dt_log1p",
       "log(1 + v), accurate near 0"},
      {"expm1", 1, "_dt_expm1({0})", "torch.expm1({0})", "_dt_expm1",
       "exp(v) - 1, accurate near 0"},
      {"log10", 1, "_dt_log10({0})", "torch.log10({0})", "_dt_log10", "base-10 logarithm"},
      {"erfc", 1, "(1.0 - tl.erf({0}))", "torch.erfc({0})", nullptr, "1 - erf(v)"},
      {"sign", 1, "_dt_sign({0})", "torch.sign({0})", "_dt_sign", "-1, 0 or 1"},
      {"reciprocal", 1, "(1.0 / {0})", "torch.reciprocal({0})", nullptr, "1 / v"},
      {"square", 1, "({0} * {0})", "torch.square({0})", nullptr, "v * v"},
      {"relu", 1, "tl.maximum({0}, 0.0, propagate_nan=tl.PropagateNan.ALL)", "torch.relu({0})",
       nullptr, "max(v, 0)"},
      {"silu", 1, "_dt_silu({0})", "torch.nn.functional.silu({0})", "_dt_silu", "v * sigmoid(v)"},
      {"softplus", 1, "_dt_softplus({0})", "torch.nn.functional.softplus({0})", "_dt_softplus",
       "log(1 + exp(v)), without overflow"},
      {"gelu", 1, "_dt_gelu({0})", "torch.nn.functional.gelu({0})", "_dt_gelu",
       "GELU with erf: 0.5 v (1 + erf(v / sqrt 2))"},
      {"gelu_tanh", 1, "_dt_gelu_tanh({0})", "torch.nn.functional.gelu({0}, approximate='tanh')",
       "_dt_gelu_tanh", "GELU, tanh approximation"},
  };
  return table;
}

const Builtin* find_builtin(std::string_view name) {
  for (const Builtin& b : builtins())
    if (name == b.name) return &b;
  return nullptr;
}

std::string helper_source(std::string_view name) {
  struct Helper {
    const char* name;
    const char* source;
  };
  static const Helper helpers[] = {
      {"_dt_tanh", "def _dt_tanh(v):\n"
                   "    # 1 - 2 / (exp(2|v|) + 1), sign restored: no overflow for large |v|.\n"
                   "    e = tl.exp(-2.0 * tl.abs(v))\n"
                   "    t = (1.0 - e) / (1.0 + e)\n"
                   "    return tl.where(v < 0, -t, t)\n"},
      {"_dt_sinh", "def _dt_sinh(v):\n"
                   "    e = tl.exp(v)\n"
                   "    return 0.5 * (e - 1.0 / e)\n"},
      {"_dt_cosh", "def _dt_cosh(v):\n"
                   "    e = tl.exp(v)\n"
                   "    return 0.5 * (e + 1.0 / e)\n"},
      {"_dt_tan", "def _dt_tan(v):\n"
                  "    return tl.sin(v) / tl.cos(v)\n"},
      {"_dt_pow", R"py(def _dt_pow(v, e):
    # pow as IEEE 754 (C99 F.10.4.4) and torch.pow define it. |v|^e is 2^(e log2|v|) in
    # float64, right to the last float32 bit (in float32, log2's rounding would be multiplied
    # by e log2|v|). The base's sign for an odd integer exponent (of -0 and -inf too), NaN for
    # a finite negative base and a non-integer exponent; v^0, 1^e and (-1)^(+-inf) are 1,
    # NaN or not.
    # (Nested tl.where, not & and |: one of v and e may be a scalar, which the interpreter
    # does not broadcast in & and |. -m is 0 - m in Triton, +0 for m = 0: m * -1.0 is -0.)
    v = tl.cast(v, tl.float32)
    e = tl.cast(e, tl.float32)
    a = tl.abs(v)
    m = tl.exp2(e.to(tl.float64) * tl.log2(a.to(tl.float64))).to(tl.float32)
    integer = tl.floor(e) == e
    odd = tl.where(integer, tl.floor(e * 0.5) != e * 0.5, False)
    r = tl.where(v.to(tl.int32, bitcast=True) < 0, tl.where(odd, m * -1.0, m), m)
    finite_negative = tl.where(v < 0.0, v > float("-inf"), False)
    r = tl.where(finite_negative, tl.where(integer, r, float("nan")), r)
    one = tl.where(a == 1.0, tl.abs(e) == float("inf"), False)
    return tl.where(e == 0.0, 1.0, tl.where(v == 1.0, 1.0, tl.where(one, 1.0, r)))
)py"},
      {"_dt_pow_frac", R"py(def _dt_pow_frac(v, e):
    # v^e for a finite non-integer constant e (IEEE 754): |v|^e in float64 as in _dt_pow, +0
    # or +inf for -0 and -inf, NaN for a finite negative base.
    v = tl.cast(v, tl.float32)
    m = tl.exp2(e * tl.log2(tl.abs(v).to(tl.float64))).to(tl.float32)
    return tl.where((v < 0.0) & (v > float("-inf")), float("nan"), m)
)py"},
      {"_dt_pow_half", R"py(def _dt_pow_half(v):
    # v^0.5 as IEEE 754 defines it: sqrt v, but +0 for -0 and +inf for -inf.
    return tl.where(v == float("-inf"), float("inf"), tl.sqrt(v) + 0.0)
)py"},
      {"_dt_log1p",
       "def _dt_log1p(v):\n"
       "    # Series near 0, where log(1 + v) loses the low bits of v.\n"
       "    small = tl.abs(v) < 1e-4\n"
       "    return tl.where(small, v * (1.0 - v * (0.5 - v / 3.0)), tl.log(1.0 + v))\n"},
      {"_dt_expm1", "def _dt_expm1(v):\n"
                    "    # Series near 0, where exp(v) - 1 cancels.\n"
                    "    small = tl.abs(v) < 1e-5\n"
                    "    return tl.where(small, v * (1.0 + v * 0.5), tl.exp(v) - 1.0)\n"},
      {"_dt_log10", "def _dt_log10(v):\n"
                    "    return tl.log2(v) * 0.30102999566398120\n"},
      {"_dt_sign", "def _dt_sign(v):\n"
                   "    return tl.where(v > 0, 1.0, tl.where(v < 0, -1.0, 0.0))\n"},
      {"_dt_silu", "def _dt_silu(v):\n"
                   "    return v * tl.sigmoid(v)\n"},
      {"_dt_softplus", "def _dt_softplus(v):\n"
                       "    # max(v, 0) + log(1 + exp(-|v|)): exact for large |v|.\n"
                       "    return tl.maximum(v, 0.0) + tl.log(1.0 + tl.exp(-tl.abs(v)))\n"},
      {"_dt_gelu", "def _dt_gelu(v):\n"
                   "    return 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))\n"},
      {"_dt_gelu_tanh", "def _dt_gelu_tanh(v):\n"
                        "    inner = 0.7978845608028654 * (v + 0.044715 * v * v * v)\n"
                        "    e = tl.exp(-2.0 * tl.abs(inner))\n"
                        "    t = (1.0 - e) / (1.0 + e)\n"
                        "    return 0.5 * v * (1.0 + tl.where(inner < 0, -t, t))\n"},
  };
  for (const Helper& h : helpers)
    if (name == h.name) return h.source;
  return {};
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

std::string substitute(std::string_view pattern, const std::vector<std::string>& args) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '{' && i + 2 < pattern.size() && pattern[i + 2] == '}' &&
        pattern[i + 1] >= '0' && pattern[i + 1] <= '9') {
      out += args.at(pattern[i + 1] - '0');
      i += 2;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

} // namespace dtc
