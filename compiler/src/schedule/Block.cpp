// block(VAR:SIZE, ...): partitions the output into blocks of SIZE along VAR; each block is one
// program instance. Sizes need not divide the dimension: the last block is masked. Blocking an
// RVar splits the reduction over program instances (see docs/language.md, reductions).
#include "schedule/Primitive.h"

namespace dtc {

Primitive block_primitive() {
  Primitive p;
  p.name = "block";
  p.apply = [](PrimitiveContext& ctx) {
    if (ctx.stmt.args.empty()) {
      ctx.diags.error(ctx.stmt.loc, "in " + stmt_text(ctx.stmt) +
                                        ": `block` needs at least one "
                                        "`VAR:SIZE` argument");
      return false;
    }
    bool ok = true;
    std::map<ir::Label, long long> merged = ctx.target.block;
    for (const ast::ScheduleArg& a : ctx.stmt.args) {
      if (a.name.empty() || !a.has_value || !a.split_name.empty()) {
        ctx.diags.error(a.loc, "in " + stmt_text(ctx.stmt) +
                                   ": `block` arguments are "
                                   "`VAR:SIZE`, as in `block(x:64)`");
        ok = false;
        continue;
      }
      ir::Label l = schedule_label(ctx, a, "dimension");
      if (!l) {
        ok = false;
        continue;
      }
      if (a.value < 1) {
        ctx.diags.error(a.loc, "in " + stmt_text(ctx.stmt) + ": block size of `" + a.name +
                                   "` must be at least 1");
        ok = false;
        continue;
      }
      auto it = merged.find(l);
      if (it != merged.end() && it->second != a.value) {
        ctx.diags.error(a.loc, "in " + stmt_text(ctx.stmt) + ": `" + a.name +
                                   "` is already "
                                   "blocked with size " +
                                   std::to_string(it->second) +
                                   "; give each dimension one block size");
        ok = false;
        continue;
      }
      merged[l] = a.value;
    }
    if (ok) ctx.target.block = merged;
    return ok;
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
