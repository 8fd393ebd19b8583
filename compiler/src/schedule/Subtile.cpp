// subtile(n:P): the Func's result tile leaves in P parts (2 or 4) along its last dimension `n`,
// each through the output's tensor descriptor: the tile is split in registers (a reshape, a
// permutation and tl.split: no data moves between threads) and each part stored by its own
// `desc.store`, so the descriptor store's shared-memory buffer is a part's size, not the tile's,
// and the store of one part overlaps the conversion of the next (Triton's epilogue subtiling).
// It needs the Func's own store through a descriptor (`tma(..., F)`); where the wrapper finds
// the output does not qualify, the whole tile is stored through pointers as without it. Each
// part must itself make a descriptor's block (at least 16 wide): lowering checks the widths.
// Triton 3.6 cannot warp-specialize such a kernel (compiling for sm_90 fails), so
// `warp_specialize` is refused with it.
#include "schedule/Primitive.h"

namespace dtc {

Primitive subtile_primitive() {
  Primitive p;
  p.name = "subtile";
  p.apply = [](PrimitiveContext& ctx) {
    const auto& args = ctx.stmt.args;
    const std::string example = ctx.func->name + ".subtile(n:2)";
    if (args.size() != 1 || args[0].name.empty() || !args[0].has_value ||
        !args[0].split_name.empty()) {
      ctx.diags.error("subtile-bad-argument", args.empty() ? ctx.stmt.loc : args[0].loc,
                      "in " + stmt_text(ctx.stmt) +
                          ": `subtile` takes the output's last dimension and the number of "
                          "parts its tile is stored in, as in `" +
                          example + "`");
      return false;
    }
    ir::Label l = schedule_label(ctx, args[0], "dimension");
    if (!l) return false;
    const ir::Labels& dims = ctx.program.def(ctx.func).dims;
    if (dims.empty() || dims.back() != l) {
      ctx.diags.error("subtile-bad-argument", args[0].loc,
                      "in " + stmt_text(ctx.stmt) + ": `" + l->name + "` is not " + ctx.func->name +
                          "'s last dimension" +
                          (dims.empty() ? "" : " (`" + dims.back()->name + "`)") +
                          "; a tile is stored in parts along its contiguous dimension");
      return false;
    }
    if (args[0].value != 2 && args[0].value != 4) {
      ctx.diags.error("subtile-bad-argument", args[0].loc,
                      "in " + stmt_text(ctx.stmt) + ": " + std::to_string(args[0].value) +
                          " parts; a tile is stored in 2 or 4");
      return false;
    }
    ctx.target.subtile = std::make_pair(l, static_cast<int>(args[0].value));
    return true;
  };
  p.validate = [](const FuncSchedule& fs, const ir::Program&, DiagnosticEngine& diags) {
    const std::string stmt = "in `" + fs.func->name + ".subtile(" + fs.subtile->first->name + ":" +
                             std::to_string(fs.subtile->second) + ")`: ";
    if (fs.warp_specialize) {
      // Compiled for sm_90, Triton 3.6's warp specialization pass fails on the split tile.
      diags.error("subtile-warp-specialize", fs.where.at("subtile"),
                  stmt + "Triton does not warp-specialize a loop whose result is stored in "
                         "parts (compiling for the H100 fails); drop `subtile` or "
                         "`warp_specialize`");
      return;
    }
    if (std::find(fs.tma.begin(), fs.tma.end(), fs.func) == fs.tma.end())
      diags.error("subtile-needs-tma", fs.where.at("subtile"),
                  stmt + "the parts are stored through " + fs.func->name +
                      "'s tensor descriptor; name `" + fs.func->name +
                      "` in its `tma(...)`, as in `" + fs.func->name + ".tma(A, B, " +
                      fs.func->name + ")`");
  };
  p.print = [](const FuncSchedule& fs, const ir::Program&) -> std::optional<std::string> {
    if (!fs.subtile) return std::nullopt;
    return fs.subtile->first->name + ":" + std::to_string(fs.subtile->second);
  };
  return p;
}

} // namespace dtc
