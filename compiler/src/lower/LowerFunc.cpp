// Lowering one Func to a kernel: the stages of LowerState.h, in order.
#include "lower/LowerFunc.h"

#include "lower/LowerState.h"
#include "lower/Names.h"

namespace dtc {

long long next_power_of_two(long long v) {
  long long p = 1;
  while (p < v)
    p <<= 1;
  return p;
}

namespace lowering {
namespace {

std::string dims_text(const ir::Labels& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + dims[i]->name;
  return s + "]";
}

// SplitReductions leaves no blocked reduction label but the one it records.
void check_supported(const LowerState& s) {
  for (Label l : schedulable_labels(s.prog, s.fs))
    DTC_ASSERT(ir::contains(s.def.dims, l) || !s.fs.block_of(l) || s.is_split(l),
               "blocked reduction label reached lowering unsplit");
}

// The largest literal tile or block width times the largest map split factor: how far past a
// size an index can reach, which the wrapper's choice of index type allows for.
long long index_slack(const LowerState& s) {
  long long width = 1, factor = 1;
  for (const std::vector<Axis>* axes : {&s.layout.axes, &s.layout.loop_tiles})
    for (const Axis& a : *axes)
      width = std::max(width, a.width.param.empty() ? a.width.n : 1);
  for (Label l : s.labels) {
    if (auto b = s.fs.block_of(l)) width = std::max(width, next_power_of_two(*b));
    width = std::max(width, s.fs.tensor_of(l));
  }
  for (const MapLevel& lv : map_levels(s.fs, s.prog))
    factor = std::max(factor, lv.factor);
  return width * factor;
}

// Under `tma(F)` for the Func F itself: the block a descriptor stores its tile as, or empty
// where it cannot (the reason in `why`): the kernel's tensor axes of the output's dimensions its
// last two in order, each a literal width of 16 to 256 (a TMA box), the block 1 along the
// dimensions before them (each stored an index at a time: FlashAttention's [b, h, m, n] output
// in blocks of [1, 1, rows, n]), no atomic combination. Other tensor axes are the reductions'
// (one element in the value stored, which store_value checks).
kir::Shape store_block(const LowerState& s, std::string& why) {
  const ir::Labels& dims = s.def.dims;
  if (s.split && !s.split->part) {
    why = "its blocks combine atomically into the output";
    return {};
  }
  if (dims.size() < 2) {
    why = "its output has " + std::to_string(dims.size()) +
          (dims.size() == 1 ? " dimension" : " dimensions") + ", not 2 or more";
    return {};
  }
  const Label row = dims[dims.size() - 2], col = dims.back();
  std::vector<Axis> axes; // the output's axes but those of one element before its last two
  for (const Axis& a : s.layout.axes)
    if (ir::contains(dims, a.label) &&
        (a.label == row || a.label == col || !a.width.param.empty() || a.width.n != 1))
      axes.push_back(a);
  if (axes.size() != 2 || axes[0].label != row || axes[1].label != col) {
    why = "its values are not [" + row->name + ", " + col->name + "] tiles (" +
          (s.layout.axes.empty() ? std::string("it tensorizes no label")
                                 : "tensor axes " + s.layout.text()) +
          ")";
    return {};
  }
  kir::Shape block(dims.size() - 2, kir::Extent{1, ""});
  for (const Axis& a : axes) {
    // A width that is a parameter (a whole dimension) is bounded per call (LaunchArg::boxes).
    if (a.width.param.empty() && (a.width.n < 16 || a.width.n > 256)) {
      why = "the tile of `" + a.label->name + "` is " + std::to_string(a.width.n) +
            " wide, where a descriptor's block is 16 to 256";
      return {};
    }
    // A tile that reaches past its block's end (a block of 48 in tiles of 32 or 64) is masked
    // there by a pointer store; a descriptor's store stops only at the tensor's edge, so it
    // would write the next block's elements.
    if (auto b = s.fs.block_of(a.label); b && a.width.param.empty() && *b % a.width.n) {
      why = "the block of `" + a.label->name + "` (" + std::to_string(*b) +
            ") is not a multiple of its tile (" + std::to_string(a.width.n) +
            "), and a descriptor's store would write past the block's end into the next one's";
      return {};
    }
    block.push_back(a.width);
  }
  return block;
}

// Under `tma(F)`: F's store of `stored` at `ptr` with a descriptor path (in parts under
// `subtile`), or null where it cannot have one (the reason in s.tma_store_refused, or a
// subtile-too-narrow error).
kir::StmtPtr descriptor_store(LowerState& s, const Value& ptr, const Value& stored) {
  const ir::FuncDef& def = s.def;
  const std::vector<const ir::Symbol*>& tma = s.fs.tma;
  if (std::find(tma.begin(), tma.end(), s.func) == tma.end()) return nullptr;
  // After an error (a product's tile too small for tl.dot, say) the value stored may be a
  // stand-in without the tile's shape; the kernel is not printed, so no descriptor is needed.
  if (s.diags.has_errors()) {
    s.tma_used.insert(s.func);
    return nullptr;
  }
  kir::Shape block = store_block(s, s.tma_store_refused);
  if (block.empty()) return nullptr;
  // The value stored is a tile of the kernel's tensor axes: the output's two, and one element
  // along the others (its reductions'), which the block's shape drops.
  kir::Shape tile, want;
  for (const kir::Extent& x : stored->type.shape)
    if (!x.is_one()) tile.push_back(x);
  for (size_t i = block.size() - 2; i < block.size(); ++i)
    if (!block[i].is_one()) want.push_back(block[i]);
  if (tile != want) {
    s.tma_store_refused = "its value is not one tile of the output's last two dimensions";
    return nullptr;
  }
  const size_t col = block.size() - 1;
  int parts = s.fs.subtile ? s.fs.subtile->second : 1;
  if (parts > 1 && (stored->type.shape.size() != 2 || !block[col].param.empty())) {
    s.diags.error(
        "subtile-not-2d", s.fs.where.at("subtile"),
        "in `" + s.func->name + ".subtile(" + def.dims.back()->name + ":" + std::to_string(parts) +
            ")`: a tile is stored in parts only where the " +
            "kernel's values are 2-D tiles of literal widths, and here " +
            (block[col].param.empty()
                 ? "they are tiles of " + std::to_string(stored->type.shape.size()) + " axes"
                 : "`" + def.dims.back()->name + "` is one whole tile") +
            "; drop it");
    s.tma_used.insert(s.func);
    return nullptr;
  }
  if (parts > 1 && block[col].n / parts < 16) {
    s.diags.error("subtile-too-narrow", s.fs.where.at("subtile"),
                  "in `" + s.func->name + ".subtile(" + def.dims.back()->name + ":" +
                      std::to_string(parts) + ")`: the tile of `" + def.dims.back()->name +
                      "` is " + std::to_string(block[col].n) + " wide, so its parts are " +
                      std::to_string(block[col].n / parts) +
                      ", narrower than a descriptor's block (16); store it in fewer parts or "
                      "widen the tile");
    s.tma_used.insert(s.func);
    return nullptr;
  }
  // The tile's column parts in order: halves, or halves of halves.
  std::vector<Value> values{stored};
  for (int n = 1; n < parts; n *= 2) {
    std::vector<Value> split;
    for (const Value& v : values)
      for (int which : {0, 1})
        split.push_back(kir::half(v, which));
    values = std::move(split);
  }
  long long width = block[col].n / parts;
  block[col].n = width;
  std::vector<kir::Stmt::DescPart> desc_parts;
  for (size_t i = 0; i < values.size(); ++i) {
    std::vector<Value> offsets;
    for (Label l : def.dims)
      offsets.push_back(s.tile_origin(l));
    if (i) offsets[col] = kir::add(offsets[col], kir::int_imm(static_cast<long long>(i) * width));
    // In the output's dtype (a descriptor stores its element type only), in the block's shape.
    Value v = kir::cast(values[i], kir::Scalar::Elem, s.ptr_var(s.func)->name);
    if (v->type.shape != block) v = kir::reshape(v, block);
    desc_parts.push_back({std::move(offsets), std::move(v)});
  }
  s.tma_used.insert(s.func);
  for (const kir::Extent& w : block)
    if (!w.param.empty()) s.bound_box(s.tma_flag(s.func), w.param);
  return kir::Stmt::store(ptr, stored, s.mask_of(def.dims), s.descriptor(s.func, def.dims, block),
                          std::move(desc_parts), s.tma_flag(s.func));
}

// The last stage: the definition's value at the innermost output loop, stored to the output
// (atomically under atomic(k); through a descriptor as well under tma(F)).
void emit_store(LowerState& s, Body& body) {
  const ir::FuncDef& def = s.def;
  Value v = number(s, *def.value, body);
  bool scalar_store = true;
  for (Label l : def.dims)
    scalar_store &= !s.tensorized(l);
  // With no tensorized output dimension the value is a [1, ..., 1] tensor; store a scalar. A
  // value of constants and scalar inputs is one already (a Python number has no shape).
  Value value = scalar_store && !s.layout.axes.empty() && !is_scalar_value(*def.value)
                    ? kir::reshape(v, {})
                    : v;
  if (!scalar_store) value = broadcast(s, value, *def.value, def.dims);
  Value stored = s.let(body, s.py(s.func), value);
  Value ptr = kir::add(s.ptr_var(s.func), s.offset_expr(s.func, def.dims));
  kir::StmtPtr store = kir::Stmt::store(ptr, stored, s.mask_of(def.dims));
  if (kir::StmtPtr through = descriptor_store(s, ptr, stored)) store = std::move(through);
  if (s.split && !s.split->part) {
    // atomic(k): combine this block's partial result into the output.
    ir::ReduceOp op = s.split->op;
    store->atomic = op == ir::ReduceOp::Sum   ? kir::Atomic::Add
                    : op == ir::ReduceOp::Max ? kir::Atomic::Max
                                              : kir::Atomic::Min;
    s.kernel.output_init = identity_of(op);
  }
  body.push_back(std::move(store));
}

} // namespace
} // namespace lowering

kir::Kernel lower_func(const ir::Program& program, const KernelPlan& plan, const PythonNames& py,
                       const ir::Symbol* func, DiagnosticEngine& diags) {
  using namespace lowering;
  LowerState s(program, plan, py, func, diags);
  s.kernel.name = s.py.kernel(func);
  s.kernel.num_warps = s.fs.warps();
  s.kernel.num_stages = s.fs.stages();
  if (s.fs.epilogue_rows) s.kernel.epilogue_rows = s.fs.epilogue_rows->second;
  s.kernel.doc = func->name + dims_text(s.def.dims) + " = " + ir::to_dt(*s.def.value);
  check_supported(s);
  s.layout = plan_layout(program, s.fs, s.def, py);
  plan_loop_tiles(s);
  add_params(s);
  Body* body = emit_program_mapping(s, s.kernel.body);
  emit_aranges(s, *body);
  body = emit_output_loops(s, *body);
  emit_store(s, *body);
  DTC_ASSERT(!s.online || s.online_done || diags.has_errors(),
             "online(" + s.fs.online.value()->name + ") checked but its loop never emitted");
  s.kernel.index_slack = index_slack(s);
  if (s.fs.warp_specialize && !s.warp_specialized && !diags.has_errors()) {
    const std::string k = (*s.fs.warp_specialize)->name;
    diags.error("warp-specialize-unsupported", s.fs.where.at("warp_specialize"),
                "in `" + s.fs.warp_specialize_text() + "`: " +
                    (s.warp_specialize_refused.empty()
                         ? func->name + "'s kernel has no product (rdot on tl.dot) over `" + k +
                               "` with a loop over it"
                         : s.warp_specialize_refused) +
                    "; drop `warp_specialize`");
  }
  for (const ir::Symbol* t : s.fs.tma)
    if (t == func && !s.tma_used.count(t) && !diags.has_errors())
      diags.error("tma-unused", s.fs.where.at("tma"),
                  "in `" + func->name + ".tma(...)`: " + func->name +
                      "'s kernel cannot store its tiles through a tensor descriptor: " +
                      s.tma_store_refused + "; drop `" + func->name + "` from `tma`");
    else if (t != func && !s.tma_used.count(t))
      diags.error("tma-unused", s.fs.where.at("tma"),
                  "in `" + func->name + ".tma(...)`: " + func->name +
                      "'s kernel loads no tile of `" + t->name +
                      "` that a tensor descriptor can: `tma` takes inputs read as a product's "
                      "operand (rdot on tl.dot) in tiles of their last two dimensions, 16 to 256 "
                      "(or whole dimensions) along each, any others at one index; tensorize "
                      "those dimensions so, or drop `" +
                      t->name + "` from `tma`");
  return std::move(s.kernel);
}

} // namespace dtc
