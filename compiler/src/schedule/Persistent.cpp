// persistent(ORDER): the Func's kernel runs as persistent programs. Without it (`none`, the
// default) the launch grid has one program instance per output block (`map`'s loop nest).
// With it the grid has at most one instance per streaming multiprocessor, and each instance
// loops over output blocks: `interleaved` takes blocks pid, pid + P, pid + 2P, ... (P instances),
// `blocked` a run of about blocks / P consecutive ones. The blocks are numbered as `map` numbers
// them, so its grouped orders carry over. What it saves is a launch's tail and the set-up of
// each instance (its descriptors, its hoisted values) repeated per block; the wrapper sizes the
// grid from the device's multiprocessor count (under the interpreter, 3 instances).
#include "schedule/Primitive.h"

namespace dtc {

Primitive persistent_primitive() {
  Primitive p = word_primitive("persistent", {"none", "interleaved", "blocked"},
                               "persistent-invalid", "interleaved", &FuncSchedule::persistent);
  p.validate = [](const FuncSchedule& fs, const ir::Program& program, DiagnosticEngine& diags) {
    if (!fs.persistent || *fs.persistent == "none" || !map_levels(fs, program).empty()) return;
    diags.error("persistent-one-program", fs.where.at("persistent"),
                "in `" + fs.func->name + ".persistent(" + *fs.persistent + ")`: `" + fs.func->name +
                    "` runs as one program instance (none of its labels is blocked), so there "
                    "are no blocks for persistent programs to loop over; block a label, or drop "
                    "`persistent`");
  };
  return p;
}

} // namespace dtc
