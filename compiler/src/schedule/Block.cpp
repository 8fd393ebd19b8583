// block(VAR:SIZE, ...): partitions the output into blocks of SIZE along VAR; each block is one
// program instance. Sizes need not divide the dimension: the last block is masked. Blocking an
// RVar splits the reduction over program instances (see docs/language.md, reductions).
#include "schedule/Primitive.h"

namespace dtc {

Primitive block_primitive() {
  Primitive p;
  p.name = "block";
  p.apply = [](PrimitiveContext& ctx) {
    return merge_sizes(ctx, ctx.target.block, "`VAR:SIZE`, as in `block(x:64)`", "block size",
                       [&](const ast::ScheduleArg& a) {
                         if (a.value >= 1) return true;
                         ctx.diags.error("block-too-small", a.loc,
                                         "in " + stmt_text(ctx.stmt) + ": block size of `" +
                                             a.name + "` must be at least 1");
                         return false;
                       });
  };
  p.print = [](const FuncSchedule& fs, const ir::Program& prog) -> std::optional<std::string> {
    std::string out;
    for (ir::Label l : schedulable_labels(prog, fs)) {
      auto b = fs.block_of(l);
      if (!b) continue;
      out += (out.empty() ? "" : ",") + l->name + ":" + std::to_string(*b);
    }
    if (out.empty()) return std::nullopt;
    return out;
  };
  return p;
}

} // namespace dtc
