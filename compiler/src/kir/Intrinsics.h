#pragma once
// The element-wise functions a kernel calls, by what they compute. How Triton spells each (a
// triton.language function or a `@triton.jit` helper of the module) is the printer's business
// (codegen/TritonMath.h); the PyTorch reference spells DT's builtins itself.
#include <optional>
#include <string_view>

namespace dtc::kir {

enum class Intrinsic {
  Abs,
  Ceil,
  Floor,
  Cos,
  Sin,
  Erf,
  Exp,
  Exp2,
  Log,
  Log2,
  Rsqrt,
  Sigmoid,
  Sqrt,
  SqrtRn, // unary
  Fdiv,
  DivRn,
  MulRn, // binary (MulRn: a product never fused into a multiply-add, kir/RoundBeforeShift.h)
  Fma,   // ternary
  // Accurate helpers (codegen/TritonMath.cpp): float32 in, float32 out.
  Tanh,
  Sinh,
  Cosh,
  Tan,
  Pow,
  Log1p,
  Expm1,
  Log10,
  Erfc,
  Sign,
  Silu,
  Softplus,
  Gelu,
  GeluTanh,
  PowHalf, // v^0.5 as IEEE pow has it: +inf for -inf, +0 for -0
  PowFrac, // v^e for a constant e that is not a whole number
};

/// The signature of an intrinsic: its name in kernel IR dumps (and in names the passes derive,
/// `exp_A`), and its number of operands; every operand and the result are numbers of the
/// promoted type of the operands.
struct IntrinsicInfo {
  Intrinsic id;
  const char* name;
  int arity;
};

const IntrinsicInfo& info(Intrinsic fn);
/// The intrinsic computing the DT builtin `name` as a call of its operands, if there is one
/// (`exp`, `tanh`; not `relu` or `where`, which lower to other nodes).
std::optional<Intrinsic> intrinsic_named(std::string_view name);

} // namespace dtc::kir
