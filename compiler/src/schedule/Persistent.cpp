// persistent(ORDER): the Func's kernel runs as persistent programs. Without it (`none`, the
// default) the launch grid has one program instance per output block (`map`'s loop nest).
// With it the grid has at most one instance per streaming multiprocessor, and each instance
// loops over output blocks: `interleaved` takes blocks pid, pid + P, pid + 2P, ... (P instances),
// `blocked` a run of about blocks / P consecutive ones. The blocks are numbered as `map` numbers
// them, so its grouped orders carry over. What it saves is a launch's tail and the set-up of
// each instance (its descriptors, its hoisted values) repeated per block; the wrapper sizes the
// grid from the device's multiprocessor count (under the interpreter, 3 instances). With
// `flatten` (`persistent(interleaved, flatten)`) Triton fuses the loop over blocks with the loop
// inside it (a product's over k) into one, so the software pipeline runs on across blocks: the
// next block's first tiles load while this block's epilogue runs. It leaves a loop it cannot
// fuse as it is, and it does not warp-specialize inside a flattened loop.
#include "schedule/Primitive.h"

namespace dtc {

Primitive persistent_primitive() {
  static const std::vector<std::string> orders = {"none", "interleaved", "blocked"};
  Primitive p;
  p.name = "persistent";
  p.apply = [](PrimitiveContext& ctx) {
    const auto& args = ctx.stmt.args;
    auto word = [](const ast::ScheduleArg& a) {
      return a.name.empty() || a.has_value ? std::string() : a.name;
    };
    bool ok = (args.size() == 1 || args.size() == 2) &&
              std::find(orders.begin(), orders.end(), word(args[0])) != orders.end() &&
              (args.size() == 1 || word(args[1]) == "flatten");
    if (!ok) {
      ctx.diags.error("persistent-invalid", args.empty() ? ctx.stmt.loc : args.back().loc,
                      "in " + stmt_text(ctx.stmt) +
                          ": `persistent` takes none, interleaved or blocked, and `flatten` "
                          "after either of the last two, as in `" +
                          ctx.func->name + ".persistent(interleaved)` or `" + ctx.func->name +
                          ".persistent(interleaved, flatten)`");
      return false;
    }
    ctx.target.persistent = word(args[0]);
    ctx.target.flatten = args.size() == 2;
    return true;
  };
  p.validate = [](const FuncSchedule& fs, const ir::Program& program, DiagnosticEngine& diags) {
    const std::string stmt = "in `" + fs.func->name + ".persistent(" + *fs.persistent +
                             (fs.flatten ? ", flatten" : "") + ")`: ";
    if (fs.flatten && *fs.persistent == "none") {
      diags.error("persistent-invalid", fs.where.at("persistent"),
                  stmt + "`flatten` fuses the loop of persistent program instances with the " +
                      "loops inside it, and `none` has no such loop; use interleaved or blocked");
      return;
    }
    if (fs.flatten && fs.warp_specialize) {
      diags.error("persistent-flatten-warp-specialize", fs.where.at("persistent"),
                  stmt + "Triton does not warp-specialize the loop over `" +
                      (*fs.warp_specialize)->name +
                      "` inside a flattened loop (it leaves it as it is); drop `flatten` or "
                      "`warp_specialize`");
      return;
    }
    if (*fs.persistent == "none" || !map_levels(fs, program).empty()) return;
    diags.error("persistent-one-program", fs.where.at("persistent"),
                stmt + "`" + fs.func->name +
                    "` runs as one program instance (none of its labels is blocked), so there "
                    "are no blocks for persistent programs to loop over; block a label, or drop "
                    "`persistent`");
  };
  p.print = [](const FuncSchedule& fs, const ir::Program&) -> std::optional<std::string> {
    if (!fs.persistent || *fs.persistent == "none") return std::nullopt;
    return *fs.persistent + (fs.flatten ? ",flatten" : "");
  };
  return p;
}

} // namespace dtc
