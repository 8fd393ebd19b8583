// Stage 3 of lowering a Func: which output block a program instance computes. The `map` loop
// nest (map_levels) turns the one program id into a block index per blocked label, the
// outermost level varying slowest; the kernel's launch grid is the product of the levels'
// extents. Under `persistent` the grid is smaller (the wrapper caps it at the device's
// multiprocessors) and each instance loops over block numbers, which the same nest decodes.
// Then the tl.arange index tensor of each axis of the layout.
#include "lower/LowerState.h"
#include "lower/Names.h"

#include <functional>

namespace dtc::lowering {

namespace {

// The loop of a persistent program instance over block numbers below `blocks`, binding `pid`
// (the block number the map nest decodes); returns its body.
Body* emit_persistent_loop(LowerState& s, Body& body, Value blocks) {
  Value first = s.index(kir::program_id(0)), programs = s.index(kir::num_programs(0));
  Value lo = first, hi = blocks, step = programs;
  if (*s.fs.persistent == "blocked") {
    // A run of ceil(blocks / programs) consecutive blocks each (the last ones fewer or none).
    Value run = s.let(body, "pid_run",
                      kir::binary(kir::BinOp::FloorDiv,
                                  kir::add(blocks, kir::sub(programs, kir::int_imm(1))), programs));
    lo = s.let(body, "pid_first", kir::mul(first, run));
    hi = kir::minimum(kir::add(lo, run), blocks);
    step = kir::int_imm(1);
  }
  s.used.insert("pid");
  s.types["pid"] = kir::loop_var_type(*lo, *hi, *step);
  body.push_back(kir::Stmt::loop("pid", lo, hi, step));
  body.back()->flatten = s.fs.flatten;
  return &body.back()->body;
}

} // namespace

Body* emit_program_mapping(LowerState& s, Body& outer) {
  std::vector<MapLevel> levels = map_levels(s.fs, s.prog);
  if (levels.empty()) return &outer; // one program instance
  const bool persistent = s.fs.persistent && *s.fs.persistent != "none";
  s.kernel.persistent = persistent;
  outer.push_back(kir::Stmt::comment(persistent
                                         ? "persistent program instances -> output blocks (map)"
                                         : "program instance -> output block (map)"));
  Value pid = persistent ? nullptr : s.let(outer, "pid", s.index(kir::program_id(0)));
  Body* at = &outer; // the block's code: under persistent, in the loop over block numbers
  std::map<Label, Value> blocks_var;
  for (Label l : s.labels) {
    auto b = s.fs.block_of(l);
    if (!b) continue;
    Value size = s.ref(s.py.size(l));
    blocks_var[l] =
        s.let(outer, s.py(l) + "_blocks",
              *b == 1 ? size
                      : kir::binary(kir::BinOp::FloorDiv, kir::add(size, kir::int_imm(*b - 1)),
                                    kir::int_imm(*b)));
  }
  // Extents of each level, in kernel code and in wrapper code.
  std::map<std::string, long long> split_factor; // ID -> factor
  for (const MapLevel& lv : levels)
    if (lv.factor) split_factor[lv.split_id] = lv.factor;
  std::vector<Value> extent(levels.size());
  std::vector<kir::GridFactor> grid(levels.size());
  for (size_t i = 0; i < levels.size(); ++i) {
    const MapLevel& lv = levels[i];
    if (lv.is_split_inner) {
      extent[i] = kir::int_imm(split_factor[lv.name]);
      grid[i] = {"", split_factor[lv.name]};
    } else {
      long long b = *s.fs.block_of(lv.dim);
      // ceil(ceil(size / b) / factor) = ceil(size / (b * factor)) for positive integers.
      grid[i] = {s.py(lv.dim), lv.factor ? b * lv.factor : b};
      if (lv.factor) {
        extent[i] = kir::binary(kir::BinOp::FloorDiv,
                                kir::add(blocks_var[lv.dim], kir::int_imm(lv.factor - 1)),
                                kir::int_imm(lv.factor));
      } else {
        extent[i] = blocks_var[lv.dim];
      }
    }
  }
  if (persistent) {
    Value blocks;
    for (const Value& e : extent)
      blocks = blocks ? kir::mul(blocks, e) : e;
    at = emit_persistent_loop(s, outer, s.let(outer, "blocks", blocks));
    pid = s.ref("pid");
  }
  Body& body = *at;
  // Innermost level varies fastest.
  Value stride;
  std::map<std::string, Value> pid_of; // level name -> variable
  for (size_t k = levels.size(); k-- > 0;) {
    const MapLevel& lv = levels[k];
    bool simple = !lv.factor && !lv.is_split_inner;
    std::string var = simple ? s.py(lv.dim) + "_block" : lv.name + "_pid";
    Value value = stride ? kir::binary(kir::BinOp::FloorDiv, pid, stride) : pid;
    if (k > 0) value = kir::binary(kir::BinOp::Mod, value, extent[k]);
    pid_of[lv.name] = s.let(body, var, value);
    stride = stride ? kir::mul(stride, extent[k]) : extent[k];
  }
  // Split dimensions: block index = outer * factor + inner, recursively.
  std::function<Value(const std::string&)> block_index = [&](const std::string& name) {
    for (const MapLevel& lv : levels)
      if (lv.name == name && lv.factor)
        return kir::add(kir::mul(pid_of[name], kir::int_imm(lv.factor)), block_index(lv.split_id));
    return pid_of[name];
  };
  for (const MapLevel& lv : levels)
    if (lv.factor && !lv.is_split_inner) s.let(body, s.py(lv.dim) + "_block", block_index(lv.name));
  s.kernel.grid = std::move(grid);
  for (Label l : s.labels) {
    auto b = s.fs.block_of(l);
    if (!b) continue;
    Value block = s.ref(s.py(l) + "_block");
    Value start =
        s.let(body, s.py(l) + "_start", *b == 1 ? block : kir::mul(block, kir::int_imm(*b)));
    s.let(body, s.py(l) + "_end",
          kir::minimum(kir::add(start, kir::int_imm(*b)), s.ref(s.py.size(l))));
  }
  return at;
}

void emit_aranges(LowerState& s, Body& body) {
  const std::vector<Axis>& axes = s.layout.axes;
  if (axes.empty()) return;
  body.push_back(kir::Stmt::comment("tensor axes: " + s.layout.text()));
  for (const Axis& a : s.layout.loop_tiles)
    s.let(body, s.py(a.label) + "_range", s.index(kir::arange(a.width)));
  for (size_t i = 0; i < axes.size(); ++i) {
    const std::string& name = s.py(axes[i].label);
    Value range = kir::arange(axes[i].width);
    if (axes.size() > 1 && s.layout.dot_labels.count(axes[i].label))
      s.let(body, name + "_range", s.index(range));
    if (axes.size() > 1) {
      std::vector<bool> keep(axes.size(), false);
      keep[i] = true;
      range = kir::expand(range, keep);
    }
    s.let(body, name + "_arange", s.index(range));
  }
}

} // namespace dtc::lowering
