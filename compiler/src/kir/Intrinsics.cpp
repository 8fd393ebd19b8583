#include "kir/Intrinsics.h"

#include "support/Diagnostics.h"

#include <array>

namespace dtc::kir {
namespace {

constexpr std::array<IntrinsicInfo, 34> kIntrinsics = {{
    {Intrinsic::Abs, "abs", 1},
    {Intrinsic::Ceil, "ceil", 1},
    {Intrinsic::Floor, "floor", 1},
    {Intrinsic::Cos, "cos", 1},
    {Intrinsic::Sin, "sin", 1},
    {Intrinsic::Erf, "erf", 1},
    {Intrinsic::Exp, "exp", 1},
    {Intrinsic::Exp2, "exp2", 1},
    {Intrinsic::Log, "log", 1},
    {Intrinsic::Log2, "log2", 1},
    {Intrinsic::Rsqrt, "rsqrt", 1},
    {Intrinsic::Sigmoid, "sigmoid", 1},
    {Intrinsic::Sqrt, "sqrt", 1},
    {Intrinsic::SqrtRn, "sqrt_rn", 1},
    {Intrinsic::Fdiv, "fdiv", 2},
    {Intrinsic::DivRn, "div_rn", 2},
    {Intrinsic::MulRn, "mul_rn", 2}, // the passes' own: not a DT builtin
    {Intrinsic::Fma, "fma", 3},
    {Intrinsic::Tanh, "tanh", 1},
    {Intrinsic::Sinh, "sinh", 1},
    {Intrinsic::Cosh, "cosh", 1},
    {Intrinsic::Tan, "tan", 1},
    {Intrinsic::Pow, "pow", 2},
    {Intrinsic::Log1p, "log1p", 1},
    {Intrinsic::Expm1, "expm1", 1},
    {Intrinsic::Log10, "log10", 1},
    {Intrinsic::Erfc, "erfc", 1},
    {Intrinsic::Sign, "sign", 1},
    {Intrinsic::Silu, "silu", 1},
    {Intrinsic::Softplus, "softplus", 1},
    {Intrinsic::Gelu, "gelu", 1},
    {Intrinsic::GeluTanh, "gelu_tanh", 1},
    {Intrinsic::PowHalf, "pow_half", 1},
    {Intrinsic::PowFrac, "pow_frac", 2},
}};

} // namespace

const IntrinsicInfo& info(Intrinsic fn) {
  for (const IntrinsicInfo& i : kIntrinsics)
    if (i.id == fn) return i;
  throw InternalError("an intrinsic without an entry in kIntrinsics");
}

std::optional<Intrinsic> intrinsic_named(std::string_view name) {
  for (const IntrinsicInfo& i : kIntrinsics)
    if (name == i.name && i.id != Intrinsic::PowHalf && i.id != Intrinsic::PowFrac &&
        i.id != Intrinsic::MulRn)
      return i.id;
  return std::nullopt;
}

} // namespace dtc::kir
