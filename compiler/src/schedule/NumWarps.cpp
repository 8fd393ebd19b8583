// num_warps(N): the num_warps launch parameter of the Func's Triton kernel (default 4).
#include "schedule/Primitive.h"

namespace dtc {

bool single_int_arg(PrimitiveContext& ctx, long long& value) {
  if (ctx.stmt.args.size() != 1 || !ctx.stmt.args[0].name.empty()) {
    ctx.diags.error("num-warps-bad-argument", ctx.stmt.loc,
                    "in " + stmt_text(ctx.stmt) + ": `" + ctx.stmt.primitive.text +
                        "` takes one integer, as in `" + ctx.stmt.primitive.text + "(4)`");
    return false;
  }
  value = ctx.stmt.args[0].value;
  return true;
}

Primitive num_warps_primitive() {
  Primitive p;
  p.name = "num_warps";
  p.apply = [](PrimitiveContext& ctx) {
    long long n;
    if (!single_int_arg(ctx, n)) return false;
    if (!is_power_of_two(n) || n > 32) {
      ctx.diags.error("num-warps-invalid", ctx.stmt.args[0].loc,
                      "in " + stmt_text(ctx.stmt) +
                          ": num_warps must be a "
                          "power of two from 1 to 32, not " +
                          std::to_string(n));
      return false;
    }
    if (ctx.target.num_warps && *ctx.target.num_warps != n) {
      ctx.diags.error("num-warps-repeated", ctx.stmt.args[0].loc,
                      "in " + stmt_text(ctx.stmt) + ": num_warps is already " +
                          std::to_string(*ctx.target.num_warps) + "; give it one value");
      return false;
    }
    ctx.target.num_warps = static_cast<int>(n);
    return true;
  };
  p.print = [](const FuncSchedule& fs, const ir::Program&) -> std::optional<std::string> {
    if (fs.warps() == 4) return std::nullopt;
    return std::to_string(fs.warps());
  };
  return p;
}

} // namespace dtc
