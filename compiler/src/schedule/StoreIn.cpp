// g.store_in(f): f's kernel also computes g, where its loops have bound every dimension of g,
// and stores it; f's wrapper returns (f, g). Several outputs of one kernel: a fused add and
// RMSNorm returning the sum and the normalized value, a cross-entropy returning the loss of each
// row with the gradient of the logits. Legal when g's dimensions are dimensions of f, f is
// compiled with a kernel of its own that is not split over a reduction, and g, if f reads it,
// is fused into f (so that f's kernel computes it once, not also a kernel of its own).
#include "schedule/Primitive.h"

#include <functional>
#include <set>

namespace dtc {
namespace {

/// Whether Func `h`'s definition reads `target`, directly or through other Funcs.
bool reads(const ir::Program& program, const ir::Symbol* h, const ir::Symbol* target) {
  std::set<const ir::Symbol*> seen;
  std::function<bool(const ir::Symbol*)> walk = [&](const ir::Symbol* x) {
    for (const ir::Symbol* d : program.def(x).deps)
      if (d == target || (seen.insert(d).second && walk(d))) return true;
    return false;
  };
  return walk(h);
}

} // namespace

Primitive store_in_primitive() {
  Primitive p;
  p.name = "store_in";
  p.apply = [](PrimitiveContext& ctx) {
    const auto& args = ctx.stmt.args;
    if (args.size() != 1 || args[0].name.empty() || args[0].has_value) {
      ctx.diags.error("store-bad-argument", ctx.stmt.loc,
                      "in " + stmt_text(ctx.stmt) +
                          ": `store_in` takes the Func whose kernel stores this one, as in "
                          "`sum.store_in(out)`");
      return false;
    }
    const ir::Symbol* f = ctx.program.find(args[0].name);
    if (!f || f->kind != ir::SymbolKind::Func || !ctx.program.funcs.count(f)) {
      ctx.diags.error("store-unknown-func", args[0].loc,
                      "in " + stmt_text(ctx.stmt) + ": `" + args[0].name +
                          "` is not a defined Func");
      return false;
    }
    if (f == ctx.func) {
      ctx.diags.error("store-into-itself", args[0].loc,
                      "in " + stmt_text(ctx.stmt) + ": a Func's own kernel stores it already");
      return false;
    }
    const ir::Labels& fdims = ctx.program.def(f).dims;
    for (ir::Label l : ctx.program.def(ctx.func).dims)
      if (!ir::contains(fdims, l)) {
        std::string dims;
        for (ir::Label d : fdims)
          dims += (dims.empty() ? "" : ", ") + d->name;
        ctx.diags.error("store-bad-dimension", args[0].loc,
                        "in " + stmt_text(ctx.stmt) + ": `" + ctx.func->name + "` varies along `" +
                            l->name + "`, which is not a dimension of `" + f->name + "` (" + dims +
                            "); a kernel stores only what its own loops cover");
        return false;
      }
    if (ctx.target.store_in && ctx.target.store_in->into != f) {
      ctx.diags.error("store-twice", ctx.stmt.loc,
                      "in " + stmt_text(ctx.stmt) + ": `" + ctx.func->name +
                          "` is already stored by `" + ctx.target.store_in->into->name +
                          "`; a Func is stored by one other kernel");
      return false;
    }
    if (ctx.target.store_in) return true; // the same statement again
    ctx.target.store_in = StoreIn{f, ctx.stmt.loc};
    ctx.schedule.of(f).stored.push_back(ctx.func);
    return true;
  };
  p.print = [](const FuncSchedule& fs, const ir::Program&) -> std::optional<std::string> {
    if (!fs.store_in) return std::nullopt;
    return fs.store_in->into->name;
  };
  return p;
}

void settle_stores(const ir::Program& program, Schedule& schedule, DiagnosticEngine& diags) {
  for (auto& [f, fs] : schedule.funcs) {
    if (fs.stored.empty()) continue;
    std::vector<const ir::Symbol*> kept;
    for (const ir::Symbol* g : fs.stored) {
      const FuncSchedule& gs = schedule.of(g);
      const Loc& loc = gs.store_in->loc;
      std::string stmt = "`" + g->name + ".store_in(" + f->name + ")`";
      auto fail = [&](const char* code, const std::string& why) {
        diags.error(code, loc, "in " + stmt + ": " + why);
      };
      bool compiled = std::find(schedule.compiled.begin(), schedule.compiled.end(), f) !=
                      schedule.compiled.end();
      if (!compiled) {
        fail("store-not-compiled", "`" + f->name + "` is not compiled, so no wrapper returns `" +
                                       g->name + "`; add `" + f->name + ".compile();`");
        continue;
      }
      if (fs.fuse_at) {
        fail("store-in-fused", "`" + f->name + "` is fused into `" + fs.fuse_at->into->name +
                                   "` and has no kernel of its own to store `" + g->name +
                                   "` in; store it in `" + fs.fuse_at->into->name + "`");
        continue;
      }
      bool split = fs.atomic.has_value();
      for (const auto& [l, b] : fs.block)
        split |= !ir::contains(program.def(f).dims, l);
      if (split) {
        fail("store-in-split", "`" + f->name +
                                   "` reduces over blocks of program instances (a blocked "
                                   "reduction label), and `" +
                                   g->name +
                                   "` would be stored before its values are complete; store it "
                                   "in a Func whose reduction is not split");
        continue;
      }
      // g is computed in f's kernel: a split of g's own reduction (a partial kernel, an atomic
      // combination) has no kernel to run in.
      const ir::Symbol* g_split = nullptr;
      for (const auto& [l, b] : gs.block)
        if (!ir::contains(program.def(g).dims, l)) g_split = l;
      if (g_split || gs.atomic) {
        fail("store-in-split",
             "`" + g->name + "` reduces over blocks of program instances (" +
                 (g_split ? "its reduction label `" + g_split->name + "` is blocked"
                          : std::string("its blocks combine atomically")) +
                 "), which needs kernels of its own, but `store_in` computes it in `" + f->name +
                 "`'s kernel; drop " +
                 (g_split ? "the block of `" + g_split->name + "`" : std::string("`atomic`")) +
                 " from `" + g->name + "`'s schedule, or compile `" + g->name + "` on its own");
        continue;
      }
      if (gs.fuse_at && gs.fuse_at->into != f) {
        fail("store-fused-elsewhere", "`" + g->name + "` is fused into `" + gs.fuse_at->into->name +
                                          "`; a stored Func is fused into the Func that stores "
                                          "it, or not fused at all");
        continue;
      }
      // g computed from f's own values: f's kernel holds them only at its own points, and
      // reading f's output back while it writes it is a race.
      if (reads(program, g, f)) {
        fail("store-reads-output", "`" + g->name + "` reads `" + f->name +
                                       "`, the output of the "
                                       "kernel that would store it; compile `" +
                                       g->name +
                                       "` on its own, or store it in a Func it does not read");
        continue;
      }
      bool computed_in_f = std::find(fs.fused.begin(), fs.fused.end(), g) != fs.fused.end();
      if (!computed_in_f && ir::contains(schedule.deps_of(program, f), g)) {
        fail("store-read-unfused", "`" + f->name + "` reads `" + g->name +
                                       "`, which would then also need a kernel of its own; fuse "
                                       "it into `" +
                                       f->name + "` (`" + g->name + ".fuse_at(" + f->name +
                                       ", ...)`) so that one kernel computes it");
        continue;
      }
      // Read through Funcs with kernels of their own (f reads h, h reads g): g would be
      // computed twice, by its own kernel and by f's, and the wrapper's two g collide.
      const ir::Symbol* through = nullptr;
      {
        std::set<const ir::Symbol*> seen;
        std::function<bool(const ir::Symbol*)> needs_g = [&](const ir::Symbol* h) {
          for (const ir::Symbol* d : schedule.deps_of(program, h))
            if (d == g || (seen.insert(d).second && needs_g(d))) return true;
          return false;
        };
        for (const ir::Symbol* h : schedule.deps_of(program, f))
          if (h != g && needs_g(h)) {
            through = h;
            break;
          }
      }
      if (through) {
        fail("store-read-unfused", "`" + f->name + "` reads `" + g->name + "` through `" +
                                       through->name +
                                       "`, which needs a kernel of its own, and so would `" +
                                       g->name + "`; fuse `" + through->name + "` and `" + g->name +
                                       "` into `" + f->name + "` so that one kernel computes them");
        continue;
      }
      kept.push_back(g);
      // f's wrapper now also computes what g reads beyond what f's kernel computes.
      if (!schedule.deps.count(f)) schedule.deps[f] = program.def(f).deps;
      std::vector<const ir::Symbol*>& deps = schedule.deps[f];
      std::set<const ir::Symbol*> seen;
      std::function<void(const ir::Symbol*)> walk = [&](const ir::Symbol* h) {
        for (const ir::Symbol* d : program.def(h).deps) {
          if (!seen.insert(d).second || d == f) continue;
          if (std::find(fs.fused.begin(), fs.fused.end(), d) != fs.fused.end())
            walk(d);
          else if (!ir::contains(deps, d))
            deps.push_back(d);
        }
      };
      walk(g);
    }
    // A stored Func, not fused into f, read by another one f stores (h reads g): h needs g
    // wherever it reads it, beyond the points f's kernel holds, so g would also need a kernel
    // of its own, and the wrapper's two g would collide.
    std::vector<const ir::Symbol*> apart;
    for (const ir::Symbol* g : kept) {
      const ir::Symbol* reader = nullptr;
      bool fused = std::find(fs.fused.begin(), fs.fused.end(), g) != fs.fused.end();
      for (const ir::Symbol* h : kept)
        if (h != g && reads(program, h, g)) {
          reader = h;
          break;
        }
      if (!reader || fused) { // fused into f: its readers in f's kernel compute it there
        apart.push_back(g);
        continue;
      }
      diags.error("store-read-by-stored", schedule.of(g).store_in->loc,
                  "in `" + g->name + ".store_in(" + f->name + ")`: `" + reader->name +
                      "`, which `" + f->name + "` stores too, reads `" + g->name + "`, so `" +
                      g->name + "` would also need a kernel of its own; compile `" + g->name +
                      "` on its own, or store only one of them in `" + f->name + "`");
    }
    fs.stored = apart;
  }
}

} // namespace dtc
