// f.online(l): f's kernel computes its reductions over `l` in one pass over `l`, the way
// FlashAttention computes softmax(Q Kᵀ) V: a running maximum of the rmax over `l`, and every
// rsum or rdot over `l` that reads that maximum through `exp(... - max)` accumulated relative to
// the running maximum and rescaled by `exp(old - new)` whenever it grows. Without it each
// reduction over a looping `l` is a loop of its own (the maximum, the sum, the product: three
// passes over the keys). Whether the kernel's algorithm has that form is known only once the
// fused Funcs are inlined: lower/OnlineSoftmax.h checks it and reports what breaks it.
#include "schedule/Primitive.h"

namespace dtc {

Primitive online_primitive() {
  Primitive p;
  p.name = "online";
  p.apply = [](PrimitiveContext& ctx) {
    const auto& args = ctx.stmt.args;
    if (args.size() != 1 || args[0].name.empty() || args[0].has_value) {
      ctx.diags.error("online-bad-argument", ctx.stmt.loc,
                      "in " + stmt_text(ctx.stmt) +
                          ": `online` takes the reduction label to compute in one pass, as in "
                          "`attention.online(l)`");
      return false;
    }
    ir::Label l = schedule_label(ctx, args[0], "label");
    if (!l) return false;
    if (l->kind != ir::SymbolKind::RVar) {
      ctx.diags.error("online-not-reduction", args[0].loc,
                      "in " + stmt_text(ctx.stmt) + ": `" + l->name +
                          "` is a dimension, not a reduction label; `online` takes the label "
                          "the softmax reduces over (an RVar)");
      return false;
    }
    if (ctx.target.online && *ctx.target.online != l) {
      ctx.diags.error("online-twice", ctx.stmt.loc,
                      "in " + stmt_text(ctx.stmt) + ": `" + ctx.func->name +
                          "` is already computed online over `" + (*ctx.target.online)->name +
                          "`; a kernel has one online reduction label");
      return false;
    }
    ctx.target.online = l;
    return true;
  };
  p.validate = [](const FuncSchedule& fs, const ir::Program& program, DiagnosticEngine& diags) {
    ir::Label l = *fs.online;
    std::string stmt = "`" + fs.func->name + ".online(" + l->name + ")`";
    if (fs.block_of(l) && !ir::contains(program.def(fs.func).dims, l))
      diags.error("online-split", fs.where.at("online"),
                  "in " + stmt + ": `" + l->name +
                      "` is blocked, so program instances each reduce a block of it; one pass "
                      "over `" +
                      l->name +
                      "` needs it whole in each instance: drop its block size and "
                      "give it a tensor size, as in `" +
                      fs.func->name + ".tensorize(" + l->name + ":64)`");
    if (fs.fuse_at)
      diags.error("online-fused", fs.where.at("online"),
                  "in " + stmt + ": `" + fs.func->name + "` is fused into `" +
                      fs.fuse_at->into->name + "` and has no kernel of its own; schedule `" +
                      fs.fuse_at->into->name + ".online(" + l->name + ")` instead");
  };
  p.print = [](const FuncSchedule& fs, const ir::Program&) -> std::optional<std::string> {
    if (!fs.online) return std::nullopt;
    return (*fs.online)->name;
  };
  return p;
}

} // namespace dtc
