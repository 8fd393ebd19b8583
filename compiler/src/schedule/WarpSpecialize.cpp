// warp_specialize(k): the loop over reduction label `k` of the Func's products on tl.dot runs
// warp-specialized (`tl.range(..., warp_specialize=...)`): Triton splits the program's warps
// into a producer that issues the operand tiles' tensor-descriptor loads ahead and consumers
// that run the tensor-core products, each with the registers it needs (sm_90's setmaxnreg), so
// that loads and products overlap without the software pipeline's bookkeeping in the consumers.
//
// Triton 3.6 does this on the H100 only for a product of two input tiles read through tensor
// descriptors (with pointer loads its pass fails), whose result stays a 2-D [i, j] matrix to the
// store (`k` has no axis in the kernel's values: lower/LowerDots.cpp's loop tiles), in 16-bit
// floats (a TF32 product fails to compile), at 4 warps (at any other count it is silently
// off), on tiles of 64 rows or more (on fewer, off) other than 64 by 256 (which fails). The
// schedule checks what it can see (the label, `tma`, the warps); lowering checks the products
// (`warp-specialize-unsupported`); the dtype and the tensors' alignment are known per call, so the
// loop carries a flag the wrapper sets: the tensor-descriptor flags of both operands and a 16-bit
// dtype. Where they do not hold, the loop runs as without `warp_specialize`. The Triton interpreter
// runs the loop as a plain one.
#include "schedule/Primitive.h"

namespace dtc {

std::string FuncSchedule::warp_specialize_text() const {
  return func->name + ".warp_specialize(" + (*warp_specialize)->name +
         (epilogue_rows
              ? ", " + epilogue_rows->first->name + ":" + std::to_string(epilogue_rows->second)
              : "") +
         ")";
}

Primitive warp_specialize_primitive() {
  Primitive p;
  p.name = "warp_specialize";
  p.apply = [](PrimitiveContext& ctx) {
    const auto& args = ctx.stmt.args;
    if (args.empty() || args.size() > 2 || args[0].name.empty() || args[0].has_value) {
      ctx.diags.error("warp-specialize-bad-argument", args.empty() ? ctx.stmt.loc : args[0].loc,
                      "in " + stmt_text(ctx.stmt) +
                          ": `warp_specialize` takes the reduction label of a product (rdot) "
                          "whose loop is specialized, as in `" +
                          ctx.func->name + ".warp_specialize(k)`");
      return false;
    }
    ir::Label l = schedule_label(ctx, args[0], "reduction label");
    if (!l) return false;
    if (l->kind != ir::SymbolKind::RVar) {
      ctx.diags.error("warp-specialize-bad-argument", args[0].loc,
                      "in " + stmt_text(ctx.stmt) + ": `" + l->name +
                          "` is a dimension, not a reduction label; `warp_specialize` takes "
                          "the label a product (rdot) reduces over, as in `" +
                          ctx.func->name + ".warp_specialize(k)`");
      return false;
    }
    ctx.target.warp_specialize = l;
    ctx.target.epilogue_rows.reset();
    if (args.size() == 2) {
      // The epilogue in chunks of rows: the Func's first dimension, a power of two from 8 to 64.
      const ast::ScheduleArg& rows = args[1];
      const ir::Labels& dims = ctx.program.def(ctx.func).dims;
      if (rows.name.empty() || !rows.has_value || !rows.split_name.empty()) {
        ctx.diags.error("warp-specialize-bad-argument", rows.loc,
                        "in " + stmt_text(ctx.stmt) +
                            ": the second argument is the rows of the tile its epilogue runs on "
                            "at a time, as in `" +
                            ctx.func->name + ".warp_specialize(" + l->name + ", " +
                            (dims.empty() ? std::string("m") : dims.front()->name) + ":16)`");
        return false;
      }
      ir::Label m = schedule_label(ctx, rows, "dimension");
      if (!m) return false;
      if (dims.size() != 2 || dims.front() != m) {
        ctx.diags.error("warp-specialize-bad-argument", rows.loc,
                        "in " + stmt_text(ctx.stmt) + ": `" + m->name + "` is not the rows of " +
                            ctx.func->name + "'s 2-D tile" +
                            (dims.size() == 2 ? " (`" + dims.front()->name + "`)" : "") +
                            "; the epilogue runs on chunks of its rows");
        return false;
      }
      if (rows.value != 8 && rows.value != 16 && rows.value != 32 && rows.value != 64) {
        ctx.diags.error("warp-specialize-bad-argument", rows.loc,
                        "in " + stmt_text(ctx.stmt) + ": chunks of " + std::to_string(rows.value) +
                            " rows; use 8, 16, 32 or 64");
        return false;
      }
      ctx.target.epilogue_rows = std::make_pair(m, static_cast<int>(rows.value));
    }
    return true;
  };
  p.validate = [](const FuncSchedule& fs, const ir::Program& program, DiagnosticEngine& diags) {
    ir::Label k = *fs.warp_specialize;
    const Loc at = fs.where.at("warp_specialize");
    const std::string stmt = "in `" + fs.warp_specialize_text() + "`: ";
    if (fs.tma.empty()) {
      diags.error("warp-specialize-needs-tma", at,
                  stmt +
                      "Triton specializes the warps of a loop whose operand tiles load "
                      "through tensor descriptors; add `" +
                      fs.func->name + ".tma(...)` naming the product's inputs");
      return;
    }
    if (fs.warps() != 4 && fs.warps() != 8) {
      diags.error("warp-specialize-warps", at,
                  stmt + "the product's warps are one or two warpgroups: 4 or 8 warps (not " +
                      std::to_string(fs.warps()) + "); use `" + fs.func->name +
                      ".num_warps(4)` or `" + fs.func->name + ".num_warps(8)`");
      return;
    }
    if (fs.stages() < 2) {
      diags.error("warp-specialize-stages", at,
                  stmt +
                      "the producer fills a ring of `num_stages` buffers while the product "
                      "reads another, so it needs 2 stages or more; use `" +
                      fs.func->name + ".num_stages(2)` or more");
      return;
    }
    if (fs.epilogue_rows) {
      const auto& [m, rows] = *fs.epilogue_rows;
      std::optional<long long> block = fs.block_of(m);
      if (!block || *block <= rows || *block % rows) {
        diags.error("warp-specialize-bad-argument", at,
                    stmt + "the epilogue's chunks of " + std::to_string(rows) + " rows of `" +
                        m->name + "` do not divide its tile" +
                        (block ? " of " + std::to_string(*block) : std::string(" (unblocked)")) +
                        " in more than one; use fewer rows or a larger `" + fs.func->name +
                        ".block(" + m->name + ":...)`");
        return;
      }
    }
    if (fs.online && *fs.online != k) {
      diags.error("warp-specialize-online", at,
                  stmt + "the online loop runs over `" + (*fs.online)->name +
                      "`, so it is the loop to specialize; use `" + fs.func->name +
                      ".warp_specialize(" + (*fs.online)->name + ")`");
      return;
    }
    if (fs.online && fs.epilogue_rows) {
      diags.error("warp-specialize-bad-argument", at,
                  stmt + "the online loop's epilogue runs on the whole tile; drop the rows (`" +
                      fs.func->name + ".warp_specialize(" + k->name + ")`)");
      return;
    }
    if (fs.block_of(k)) {
      diags.error("warp-specialize-split", at,
                  stmt + "`" + k->name + "` is blocked, so each program instance reduces a " +
                      "block of it; drop the block of `" + k->name + "` or `warp_specialize`");
      return;
    }
    if (fs.fully_tensorized(k))
      diags.error("warp-specialize-no-loop", at,
                  stmt + "`" + k->name + "` is one whole tile, so there is no loop over it to " +
                      "specialize; give it a tensor size, as in `" + fs.func->name + ".tensorize(" +
                      k->name + ":64)`, or drop `warp_specialize`");
    (void)program;
  };
  p.print = [](const FuncSchedule& fs, const ir::Program&) -> std::optional<std::string> {
    if (!fs.warp_specialize) return std::nullopt;
    return (*fs.warp_specialize)->name + (fs.epilogue_rows
                                              ? "," + fs.epilogue_rows->first->name + ":" +
                                                    std::to_string(fs.epilogue_rows->second)
                                              : "");
  };
  return p;
}

} // namespace dtc
