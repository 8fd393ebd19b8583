// atomic(k): with the reduction dimension k blocked, each program instance reduces its block of
// k and combines the result into the output with an atomic add (rsum, rdot), max (rmax) or min
// (rmin), instead of writing partial results for a second kernel. The strategy needs the
// reduction to be the Func's whole definition (its last operation), as the thesis notes
// (section 3.3.2); the output is accumulated in float32.
#include "schedule/Primitive.h"

namespace dtc {

Primitive atomic_primitive() {
  Primitive p;
  p.name = "atomic";
  p.apply = [](PrimitiveContext& ctx) {
    const auto& args = ctx.stmt.args;
    if (args.size() != 1 || args[0].name.empty() || args[0].has_value) {
      ctx.diags.error("atomic-bad-argument", ctx.stmt.loc,
                      "in " + stmt_text(ctx.stmt) +
                          ": `atomic` takes the blocked "
                          "reduction dimension, as in `sum_out.atomic(k)`");
      return false;
    }
    ir::Label l = schedule_label(ctx, args[0], "reduction dimension");
    if (!l) return false;
    const ir::FuncDef& def = ctx.program.def(ctx.func);
    const ir::Expr& v = *def.value;
    ir::Label top = v.as<ir::Reduce>() ? v.as<ir::Reduce>()->rvar
                    : v.as<ir::Dot>()  ? v.as<ir::Dot>()->rvar
                                       : nullptr;
    if (top != l) {
      ctx.diags.error("atomic-not-one-reduction", args[0].loc,
                      "in " + stmt_text(ctx.stmt) + ": atomic combination needs `" +
                          ctx.func->name + "` to be defined as one reduction over `" + l->name +
                          "` (its last operation); move the rest of the "
                          "expression into another Func");
      return false;
    }
    ctx.target.atomic = l;
    return true;
  };
  p.validate = [](const FuncSchedule& fs, const ir::Program&, DiagnosticEngine& diags) {
    if (fs.atomic && !fs.block_of(*fs.atomic))
      diags.error("atomic-not-blocked", fs.where.at("atomic"),
                  "in `" + fs.func->name + ".atomic(" + (*fs.atomic)->name + ")`: `" +
                      (*fs.atomic)->name +
                      "` is not blocked; "
                      "block it, as in `" +
                      fs.func->name + ".block(" + (*fs.atomic)->name + ":1024)`");
  };
  p.print = [](const FuncSchedule& fs, const ir::Program&) -> std::optional<std::string> {
    if (!fs.atomic) return std::nullopt;
    return (*fs.atomic)->name;
  };
  return p;
}

} // namespace dtc
