// num_stages(N): the num_stages launch parameter of the Func's Triton kernel (default 3): how
// many iterations of a loop the compiler software-pipelines.
#include "schedule/Primitive.h"

namespace dtc {

bool single_int_arg(PrimitiveContext& ctx, long long& value);

Primitive num_stages_primitive() {
  Primitive p;
  p.name = "num_stages";
  p.apply = [](PrimitiveContext& ctx) {
    long long n;
    if (!single_int_arg(ctx, n)) return false;
    if (n < 1 || n > 16) {
      ctx.diags.error("num-stages-invalid", ctx.stmt.args[0].loc,
                      "in " + stmt_text(ctx.stmt) +
                          ": num_stages must be "
                          "from 1 to 16, not " +
                          std::to_string(n));
      return false;
    }
    if (ctx.target.num_stages && *ctx.target.num_stages != n) {
      ctx.diags.error("num-stages-repeated", ctx.stmt.args[0].loc,
                      "in " + stmt_text(ctx.stmt) + ": num_stages is " + "already " +
                          std::to_string(*ctx.target.num_stages) + "; give it one value");
      return false;
    }
    ctx.target.num_stages = static_cast<int>(n);
    return true;
  };
  p.print = [](const FuncSchedule& fs, const ir::Program&) -> std::optional<std::string> {
    if (fs.stages() == 3) return std::nullopt;
    return std::to_string(fs.stages());
  };
  return p;
}

} // namespace dtc
