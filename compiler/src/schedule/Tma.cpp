// tma(A, ...): the Func's kernel loads the tl.dot operand tiles of the named inputs through
// tensor descriptors (the Hopper tensor memory accelerator) instead of pointer arithmetic: one
// descriptor per input per program instance, each tile one `desc.load([row, column])` whose
// lanes outside the tensor read 0 (no masks). The wrapper checks per call (once per plan) that
// the tensor qualifies (its last stride 1, the others and its address multiples of 16 bytes)
// and passes a constexpr flag; a tensor that does not is read through pointers, as without
// `tma`. Only inputs read as a product's operand qualify, in tiles of their last two dimensions
// (of 2 to 5: a batch's and a head's at one index each; lowering reports `tma-unused` for
// another), in the online loop too; a reduction split into blocks (whose tiles must stop at the
// block's end) is refused. The Func itself, named among them, stores its result tiles through a
// descriptor (`desc.store`, whose writes stop at the tensor's edges), where the output
// qualifies: 2-D, each dimension one tile of 16 to 256 a program instance, no atomic
// combination.
#include "schedule/Primitive.h"

namespace dtc {

Primitive tma_primitive() {
  Primitive p;
  p.name = "tma";
  p.apply = [](PrimitiveContext& ctx) {
    const auto& args = ctx.stmt.args;
    if (args.empty()) {
      ctx.diags.error("tma-bad-argument", ctx.stmt.loc,
                      "in " + stmt_text(ctx.stmt) + ": `tma` takes the inputs whose tiles " +
                          ctx.func->name + "'s kernel loads through tensor descriptors, as in `" +
                          ctx.func->name + ".tma(A, B)`");
      return false;
    }
    std::vector<const ir::Symbol*> named;
    for (const ast::ScheduleArg& a : args) {
      const ir::Symbol* t = a.name.empty() || a.has_value ? nullptr : ctx.program.find(a.name);
      if (!t || (t != ctx.func && (t->kind != ir::SymbolKind::In || t->is_int))) {
        ctx.diags.error("tma-bad-argument", a.loc,
                        "in " + stmt_text(ctx.stmt) + ": `" +
                            (a.name.empty() ? std::string("?") : a.name) +
                            "` is neither a floating-point input (`In`) nor `" + ctx.func->name +
                            "` itself; `tma` takes inputs, and the Func for its own store, as "
                            "in `" +
                            ctx.func->name + ".tma(A, B, " + ctx.func->name + ")`");
        return false;
      }
      if (std::find(named.begin(), named.end(), t) == named.end()) named.push_back(t);
    }
    for (const ir::Symbol* t : named)
      if (std::find(ctx.target.tma.begin(), ctx.target.tma.end(), t) == ctx.target.tma.end())
        ctx.target.tma.push_back(t);
    return true;
  };
  p.validate = [](const FuncSchedule& fs, const ir::Program& program, DiagnosticEngine& diags) {
    if (fs.tma.empty()) return;
    const std::string at = "in `" + fs.func->name + ".tma(...)`: ";
    const ir::FuncDef& def = program.def(fs.func);
    for (ir::Label l : schedulable_labels(program, fs))
      if (!ir::contains(def.dims, l) && fs.block_of(l)) {
        diags.error("tma-split", fs.where.at("tma"),
                    at + "`" + l->name + "` is blocked, so each program instance reduces a block " +
                        "of it, and a descriptor's tiles read on to the tensor's end; drop the " +
                        "block of `" + l->name + "` or `tma`");
        return;
      }
  };
  p.print = [](const FuncSchedule& fs, const ir::Program&) -> std::optional<std::string> {
    if (fs.tma.empty()) return std::nullopt;
    // The inputs in declaration order, whatever the order written, then the Func itself.
    std::vector<const ir::Symbol*> sorted = fs.tma;
    std::sort(sorted.begin(), sorted.end(), [&](const ir::Symbol* a, const ir::Symbol* b) {
      return std::make_pair(a == fs.func, a->order) < std::make_pair(b == fs.func, b->order);
    });
    std::string text;
    for (const ir::Symbol* t : sorted)
      text += (text.empty() ? "" : ",") + t->name;
    return text;
  };
  return p;
}

} // namespace dtc
