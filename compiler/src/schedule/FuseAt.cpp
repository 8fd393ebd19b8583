// f.fuse_at(g, v): computes f inside g's kernel at g's loop level v instead of in a kernel of its
// own. Legal when g reads f, v is a dimension of both, and the dimensions outside v are the same
// in both shapes (the conditions of loop fusion).
#include "schedule/Primitive.h"

#include <set>

namespace dtc {

Primitive fuse_at_primitive() {
  Primitive p;
  p.name = "fuse_at";
  p.apply = [](PrimitiveContext& ctx) {
    const auto& args = ctx.stmt.args;
    if (args.size() != 2 || args[0].name.empty() || args[0].has_value || args[1].name.empty() ||
        args[1].has_value) {
      ctx.diags.error("fuse-bad-argument", ctx.stmt.loc,
                      "in " + stmt_text(ctx.stmt) +
                          ": `fuse_at` takes a Func and "
                          "a dimension label, as in `tmp.fuse_at(out, x)`");
      return false;
    }
    const ir::Symbol* g = ctx.program.find(args[0].name);
    if (!g || g->kind != ir::SymbolKind::Func || !ctx.program.funcs.count(g)) {
      ctx.diags.error("fuse-unknown-func", args[0].loc,
                      "in " + stmt_text(ctx.stmt) + ": `" + args[0].name +
                          "` is not a defined Func");
      return false;
    }
    const ir::FuncDef& fdef = ctx.program.def(ctx.func);
    const ir::FuncDef& gdef = ctx.program.def(g);
    if (g == ctx.func) {
      ctx.diags.error("fuse-into-itself", args[0].loc,
                      "in " + stmt_text(ctx.stmt) +
                          ": a Func cannot be fused into "
                          "itself");
      return false;
    }
    // Before the consumer check: once fused, f is no longer among g's dependencies.
    if (ctx.target.fuse_at) {
      if (ctx.target.fuse_at->into == g && ctx.target.fuse_at->at->name == args[1].name)
        return true; // the same statement again
      ctx.diags.error("fuse-twice", ctx.stmt.loc,
                      "in " + stmt_text(ctx.stmt) + ": `" + ctx.func->name +
                          "` is already fused into `" + ctx.target.fuse_at->into->name + "` at `" +
                          ctx.target.fuse_at->at->name + "`; a Func is fused at one place");
      return false;
    }
    const std::vector<const ir::Symbol*>& gdeps = ctx.schedule.deps_of(ctx.program, g);
    if (!ir::contains(gdeps, ctx.func)) {
      ctx.diags.error("fuse-not-a-consumer", args[0].loc,
                      "in " + stmt_text(ctx.stmt) + ": `" + g->name +
                          "` does not "
                          "read `" +
                          ctx.func->name +
                          "`, so there is nothing to fuse; "
                          "fuse a Func only into one of its consumers");
      return false;
    }
    ir::Label v = nullptr;
    for (ir::Label l : fdef.dims)
      if (l->name == args[1].name) v = l;
    size_t gpos = 0;
    bool in_g = false;
    for (; gpos < gdef.dims.size(); ++gpos)
      if (gdef.dims[gpos]->name == args[1].name) {
        in_g = true;
        break;
      }
    if (!v || !in_g) {
      ctx.diags.error("fuse-bad-dimension", args[1].loc,
                      "in " + stmt_text(ctx.stmt) + ": `" + args[1].name +
                          "` must be a dimension of both `" + ctx.func->name + "` and `" + g->name +
                          "`");
      return false;
    }
    size_t fpos = std::find(fdef.dims.begin(), fdef.dims.end(), v) - fdef.dims.begin();
    bool same_outer = fpos == gpos;
    for (size_t i = 0; same_outer && i < fpos; ++i)
      same_outer = fdef.dims[i] == gdef.dims[i];
    if (!same_outer) {
      ctx.diags.error("fuse-outer-dimensions-differ", args[1].loc,
                      "in " + stmt_text(ctx.stmt) + ": the dimensions outside `" + v->name +
                          "` differ between `" + ctx.func->name + "` and `" + g->name +
                          "`; loops can only be fused where their outer "
                          "dimensions are equal");
      return false;
    }
    ctx.target.fuse_at = FuseAt{g, v, ctx.stmt.loc};
    // Dependency update: g now reads what f read, instead of f.
    std::vector<const ir::Symbol*> updated;
    for (const ir::Symbol* d : gdeps)
      if (d != ctx.func) updated.push_back(d);
    for (const ir::Symbol* d : ctx.schedule.deps_of(ctx.program, ctx.func))
      if (!ir::contains(updated, d)) updated.push_back(d);
    ctx.schedule.deps[g] = updated;
    FuncSchedule& gs = ctx.schedule.of(g);
    gs.fused.push_back(ctx.func);
    // A set for membership: chains of fusions make these lists long.
    std::set<const ir::Symbol*> present(gs.fused.begin(), gs.fused.end());
    for (const ir::Symbol* inner : ctx.target.fused)
      if (present.insert(inner).second) gs.fused.push_back(inner);
    return true;
  };
  p.print = [](const FuncSchedule& fs, const ir::Program&) -> std::optional<std::string> {
    if (!fs.fuse_at) return std::nullopt;
    return fs.fuse_at->into->name + "," + fs.fuse_at->at->name;
  };
  return p;
}

} // namespace dtc
