// precision(MODE): how tl.dot multiplies float32 operands in the Func's kernel (rdot): `tf32`
// (the default, Triton's: tensor cores with 10-bit mantissas, about 1e-3 relative error),
// `tf32x3` (three TF32 products, close to float32) or `ieee` (exact float32 arithmetic, slower).
// float16 and bfloat16 operands are unaffected. The generated module's DOT_PRECISION reports
// it, so checks can pick their tolerance.
#include "schedule/Primitive.h"

namespace dtc {

Primitive precision_primitive() {
  Primitive p;
  p.name = "precision";
  p.apply = [](PrimitiveContext& ctx) {
    const auto& args = ctx.stmt.args;
    if (args.size() != 1 || args[0].name.empty() || args[0].has_value ||
        (args[0].name != "tf32" && args[0].name != "tf32x3" && args[0].name != "ieee")) {
      ctx.diags.error("precision-invalid", args.empty() ? ctx.stmt.loc : args[0].loc,
                      "in " + stmt_text(ctx.stmt) +
                          ": `precision` takes tf32, tf32x3 or ieee, as "
                          "in `" +
                          ctx.func->name + ".precision(ieee)`");
      return false;
    }
    ctx.target.precision = args[0].name;
    return true;
  };
  p.print = [](const FuncSchedule& fs, const ir::Program&) -> std::optional<std::string> {
    if (!fs.precision || *fs.precision == "tf32") return std::nullopt;
    return *fs.precision;
  };
  return p;
}

} // namespace dtc
