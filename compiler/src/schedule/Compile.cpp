// compile() (synonym: compile_to_kernel()): generate a wrapper for the Func and every kernel it
// needs. Which Funcs are compiled is part of the kernel definition, so it never prints in the
// canonical schedule.
#include "schedule/Primitive.h"

#include <algorithm>

namespace dtc {

Primitive compile_primitive() {
  Primitive p;
  p.name = "compile";
  p.apply = [](PrimitiveContext& ctx) {
    if (!ctx.stmt.args.empty()) {
      ctx.diags.error("compile-arguments", ctx.stmt.args[0].loc,
                      "in " + stmt_text(ctx.stmt) +
                          ": `compile` takes no "
                          "arguments");
      return false;
    }
    auto& list = ctx.schedule.compiled;
    if (std::find(list.begin(), list.end(), ctx.func) == list.end()) list.push_back(ctx.func);
    return true;
  };
  p.print = [](const FuncSchedule&, const ir::Program&) -> std::optional<std::string> {
    return std::nullopt;
  };
  return p;
}

} // namespace dtc
