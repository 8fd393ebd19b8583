// Prints a kernel whose product loop is warp-specialized a second time, in Gluon, for Hopper
// GPUs (kir/WarpPartitions.h says why and what the partitions are):
//
//   <name>_load    the producer, one warp: each operand tile copied by TMA into a ring of
//                  shared-memory buffers, `ready[slot]` told the bytes to expect, after waiting
//                  for the consumer to release the slot (`empty[slot]`);
//   <name>_mma     the consumer, the kernel's warps: waits for each slot, multiplies on the
//                  warpgroup instructions with one product in flight, releases the slot of the
//                  product that retired, then runs the block's epilogue as the Triton kernel does;
//   <name>_gluon   the kernel: the ring and its barriers, then both partitions;
//   <name>_hopper  the launch (dt_runtime.py's _DtHopper): the Gluon kernel on Hopper where the
//                  product qualifies (the wrapper's constexpr flags), the Triton kernel elsewhere.
//
// Both partitions walk the same blocks and the same steps of the product's loop, so a count of
// the tiles taken so far (`_dt_at`) names each one's slot (`_dt_at % STAGES`) and the phase of
// that slot's barriers (`_dt_at // STAGES & 1`) on both sides, block after block.
#include "codegen/PythonCodegen.h"
#include "kir/OnlinePartitions.h"
#include "kir/WarpPartitions.h"

#include <algorithm>
#include <functional>

namespace dtc {
namespace {

using kir::Dialect;

std::string block_text(const kir::Shape& shape) {
  std::string s;
  for (const kir::Extent& x : shape)
    s += (s.empty() ? "" : ", ") + kir::to_string(x);
  return s;
}

// The statements, each printed at `depth` (a loop with its body).
std::string print_all(const std::vector<const kir::Stmt*>& stmts, int depth) {
  std::string out;
  for (const kir::Stmt* s : stmts)
    out += kir::print(*s, depth, Dialect::Gluon);
  return out;
}

// The shared-memory layout of operand `o`'s ring: its descriptor's.
std::string ring_layout(const kir::WarpPartitions::Operand& o) {
  return kir::gluon_shared_layout(o.load->args[0]->type.shape, o.load->type.elem_of);
}

// The staged accumulator's layout: its swizzle repeats every 8 rows, so the whole tile and its
// chunks of 8 rows or more, viewed as [chunks, rows, columns], address the same memory alike.
constexpr const char* kStageLayout = "gl.SwizzledSharedLayout(4, 1, 8, [1, 0])";

class GluonPrinter {
public:
  GluonPrinter(const kir::Kernel& k, const kir::WarpPartitions& p)
      : k_(k), p_(p), stages_(std::to_string(k.num_stages)), rows_(p.a.load->type.shape[0].n),
        cols_(p.b.load->type.shape[1].n) {}

  std::string run() {
    std::string out;
    out += partition("_load",
                     "The producer of " + k_.name + "_gluon: the operand tiles into the ring.",
                     producer_body());
    out += "\n\n" + partition("_mma",
                              "The consumer of " + k_.name +
                                  "_gluon: the products from the ring, and the epilogue.",
                              consumer_body());
    out += "\n\n@gluon.jit\ndef " + k_.name + "_gluon(\n" + kernel_params_text(k_) + "):\n";
    out += "    \"\"\"" + k_.doc + ", warp-specialized for Hopper in Gluon.\"\"\"\n";
    const std::string shape_a = block_text(p_.a.load->args[0]->type.shape);
    const std::string shape_b = block_text(p_.b.load->args[0]->type.shape);
    out += "    _dt_a_ring = gl.allocate_shared_memory(" + p_.a.load->type.elem_of +
           ".dtype.element_ty, [" + stages_ + ", " + shape_a + "],\n        " + ring_layout(p_.a) +
           ")\n";
    out += "    _dt_b_ring = gl.allocate_shared_memory(" + p_.b.load->type.elem_of +
           ".dtype.element_ty, [" + stages_ + ", " + shape_b + "],\n        " + ring_layout(p_.b) +
           ")\n";
    if (k_.epilogue_rows) {
      out += "    # the accumulator in float32 for the epilogue, " +
             std::to_string(kir::staged_columns(p_)) + " columns at a time\n";
      out += "    _dt_stage = gl.allocate_shared_memory(gl.float32, [" + std::to_string(rows_) +
             ", " + std::to_string(kir::staged_columns(p_)) + "], " + kStageLayout + ")\n";
    }
    out += "    _dt_ready = gl.allocate_shared_memory(gl.int64, [" + stages_ +
           ", 1], mbarrier.MBarrierLayout())\n";
    out += "    _dt_empty = gl.allocate_shared_memory(gl.int64, [" + stages_ +
           ", 1], mbarrier.MBarrierLayout())\n";
    out += "    for _dt_i in gl.static_range(" + stages_ + "):\n";
    out += "        mbarrier.init(_dt_ready.index(_dt_i), count=1)\n";
    out += "        mbarrier.init(_dt_empty.index(_dt_i), count=1)\n";
    const std::string args = partition_args(k_, shared_args()) + ")";
    out += "    gl.warp_specialize([\n";
    out += "        (" + k_.name + "_mma, (" + args + "),\n";
    out += "        (" + k_.name + "_load, (" + args + "),\n";
    out += "    ], [1], [24])\n";
    return wrap(out);
  }

private:
  // The shared memory both partitions are given: the ring, its barriers and the epilogue's stage.
  std::string shared_args() const {
    return std::string("_dt_a_ring, _dt_b_ring, _dt_ready, _dt_empty") +
           (k_.epilogue_rows ? ", _dt_stage" : "");
  }

  std::string partition(const std::string& suffix, const std::string& doc,
                        const std::string& body) {
    return "@gluon.jit\ndef " + k_.name + suffix + "(\n" + kernel_params_text(k_) + "    " +
           shared_args() + ",\n):\n    \"\"\"" + doc + "\"\"\"\n" + body;
  }

  // What a partition runs: `before`, the loop over blocks (or none), `setup` in the block, then
  // `inner(depth)`, printed at the block's depth (1, or 2 in the loop over blocks).
  std::string blocks(const std::vector<const kir::Stmt*>& before,
                     const std::vector<const kir::Stmt*>& setup,
                     const std::function<std::string(int)>& inner) const {
    std::string out = print_all(before, 1);
    out += "    _dt_at = 0  # operand tiles taken so far: the ring's slot and phase\n";
    if (!p_.blocks) return out + print_all(setup, 1) + inner(1);
    out += "    for " + p_.blocks->name + " in " +
           kir::print_loop_head(*p_.blocks, Dialect::Gluon) + ":\n";
    return out + print_all(setup, 2) + inner(2);
  }

  // The loop over the reduction label at `depth`, its body `body` (each line at depth + 1).
  std::string product_loop(int depth, const std::vector<std::string>& body) const {
    std::string indent(4 * depth, ' ');
    std::string out = indent + "for " + p_.product->name + " in " +
                      kir::print_loop_head(*p_.product, Dialect::Gluon) + ":\n";
    for (const std::string& line : body)
      out += indent + "    " + line + "\n";
    return out;
  }

  std::string producer_body() const {
    std::set<std::string> needed;
    for (const kir::Expr* load : {p_.a.load, p_.b.load})
      for (size_t i = 0; i + 1 < load->args.size(); ++i)
        kir::free_vars(*load->args[i], needed);
    auto copy = [&](const kir::Expr& load, const std::string& ring) {
      std::string offsets;
      for (size_t i = 1; i + 1 < load.args.size(); ++i)
        offsets += (i > 1 ? ", " : "") + kir::print(*load.args[i], Dialect::Gluon);
      return "tma.async_copy_global_to_shared(" + kir::print(*load.args[0], Dialect::Gluon) +
             ", [" + offsets + "], _dt_ready.index(_dt_slot), " + ring + ".index(_dt_slot))";
    };
    auto inner = [&](int depth) {
      return product_loop(
          depth, {"_dt_slot = _dt_at % " + stages_,
                  "mbarrier.wait(_dt_empty.index(_dt_slot), (_dt_at // " + stages_ + " & 1) ^ 1)",
                  "mbarrier.expect(_dt_ready.index(_dt_slot), " +
                      kir::print(*p_.a.load->args[0], Dialect::Gluon) + ".block_type.nbytes + " +
                      kir::print(*p_.b.load->args[0], Dialect::Gluon) + ".block_type.nbytes)",
                  copy(*p_.a.load, "_dt_a_ring"), copy(*p_.b.load, "_dt_b_ring"), "_dt_at += 1"});
    };
    auto [before, setup] = kir::partition_slices(p_, needed);
    return blocks(before, setup, inner);
  }

  std::string consumer_body() const {
    auto [before, setup] = kir::consumer_slices(p_);
    // The staged epilogue of each part of the columns (kir/WarpPartitions.h).
    std::vector<kir::StagedEpilogue> staged;
    const long long part_cols = kir::staged_columns(p_);
    for (int part = 0; k_.epilogue_rows && part < cols_ / part_cols; ++part) {
      std::string why;
      std::optional<kir::StagedEpilogue> e =
          kir::stage_epilogue(p_, k_.epilogue_rows, part, "_dt_row", "_dt_rows", why);
      DTC_ASSERT(e, "a staged epilogue the pipeline accepted: " + why);
      staged.push_back(std::move(*e));
    }
    if (!staged.empty()) {
      before = staged[0].before;
      setup = staged[0].setup;
    }
    const std::string rows = std::to_string(rows_), cols = std::to_string(cols_);
    const std::string last = std::to_string(k_.num_stages - 1);
    auto inner = [&](int depth) {
      std::string indent(4 * depth, ' ');
      std::string out;
      out += indent + "# the warpgroup instructions' accumulator: the epilogue's layout\n";
      out += indent + p_.acc + " = gl.zeros([" + rows + ", " + cols +
             "], gl.float32, gl.NVMMADistributedLayout(\n" + indent +
             "    version=[3, 0], warps_per_cta=[gl.num_warps(), 1], instr_shape=[16, " + cols +
             ", 16]))\n";
      out += indent + "_dt_first = _dt_at\n";
      out += product_loop(
          depth, {"_dt_slot = _dt_at % " + stages_,
                  "mbarrier.wait(_dt_ready.index(_dt_slot), _dt_at // " + stages_ + " & 1)",
                  p_.acc + " = warpgroup_mma(" + operand(p_.a, "_dt_a_ring") + ", " +
                      operand(p_.b, "_dt_b_ring") + ", " + p_.acc + ", is_async=True)",
                  p_.acc + " = warpgroup_mma_wait(num_outstanding=1, deps=(" + p_.acc + ",))",
                  "# the product before this one has retired: its slot is free",
                  "mbarrier.arrive(_dt_empty.index((_dt_at + " + last + ") % " + stages_ +
                      "), count=1, pred=_dt_at > _dt_first)",
                  "_dt_at += 1"});
      out += indent + p_.acc + " = warpgroup_mma_wait(num_outstanding=0, deps=(" + p_.acc + ",))\n";
      out += indent + "mbarrier.arrive(_dt_empty.index((_dt_at + " + last + ") % " + stages_ +
             "), count=1, pred=_dt_at > _dt_first)\n";
      if (staged.empty()) return out + print_all(p_.after, depth);
      // The epilogue R rows at a time in a loop: its code once for a chunk, where on the whole
      // tile it is inlined for every element a thread holds (more than the instruction cache
      // keeps for a long epilogue such as the exact GELU's).
      const int r = k_.epilogue_rows;
      const std::string chunks = std::to_string(rows_ / r);
      out += indent + "# the epilogue " + std::to_string(r) + " rows" +
             (staged.size() > 1 ? " and " + std::to_string(part_cols) + " columns" : "") +
             " at a time, through shared memory\n";
      if (staged.size() > 1)
        out += indent + "_dt_part0, _dt_part1 = " + p_.acc + ".reshape([" + rows + ", 2, " +
               std::to_string(part_cols) + "]).permute(0, 2, 1).split()\n";
      for (size_t part = 0; part < staged.size(); ++part) {
        out += indent + "_dt_stage.store(" +
               (staged.size() > 1 ? "_dt_part" + std::to_string(part) : p_.acc) + ")\n";
        out += indent + "gl.thread_barrier()\n";
        out += indent + "_dt_chunks = _dt_stage._reinterpret(gl.float32, [" + chunks + ", " +
               std::to_string(r) + ", " + std::to_string(part_cols) + "], " + kStageLayout + ")\n";
        out += indent + "for _dt_chunk in range(" + chunks + "):\n";
        out += indent + "    _dt_row = _dt_chunk * " + std::to_string(r) + "\n";
        out += indent + "    _dt_rows = _dt_chunks.index(_dt_chunk).load(" + chunk_layout() + ")\n";
        for (const kir::StmtPtr& st : staged[part].chunk)
          out += kir::print(*st, depth + 1, Dialect::Gluon);
        out += indent + "gl.thread_barrier()  # every chunk read: the stage is free\n";
      }
      return out;
    };
    return blocks(before, setup, inner);
  }

  // Operand `o`'s tile in its ring's slot, as the product reads it: the slot itself, or a
  // transposed view of it where the tensor holds the tile transposed (the warpgroup
  // instructions read either order of 16-bit tiles from shared memory).
  static std::string operand(const kir::WarpPartitions::Operand& o, const std::string& ring) {
    return ring + ".index(_dt_slot)" + (o.load->value_int ? ".permute((1, 0))" : "");
  }

  // The layout a chunk of the staged tile is read in: 4 consecutive columns a thread, a warp
  // across the columns (up to 128 of them), the warps down the rows.
  std::string chunk_layout() const {
    long long across = std::min<long long>(32, kir::staged_columns(p_) / 4);
    return "gl.BlockedLayout([1, 4], [" + std::to_string(32 / across) + ", " +
           std::to_string(across) + "], [gl.num_warps(), 1], [1, 0])";
  }

  // The launch: the Gluon kernel where the flags hold on a Hopper GPU, the Triton kernel else.
  std::string wrap(const std::string& kernels) const {
    return kernels + "\n\n" + print_hopper_launch(k_, p_.flags, k_.num_warps / 4 + 1, 0);
  }

  const kir::Kernel& k_;
  const kir::WarpPartitions& p_;
  const std::string stages_;
  const long long rows_, cols_; // the accumulator's tile
};

} // namespace

std::string partition_args(const kir::Kernel& kernel, const std::string& shared) {
  // Written out in each pair: a tuple bound to a name first would pass the constexpr
  // parameters on as run-time values.
  std::string args, line;
  for (const kir::Param& param : kernel.params) {
    if (line.size() > 60) {
      args += line + "\n            ";
      line.clear();
    }
    line += (line.empty() && args.empty() ? "" : " ") + param.name + ",";
  }
  return args + line + "\n            " + shared;
}

std::string print_hopper_launch(const kir::Kernel& kernel, const std::vector<std::string>& flags,
                                int warpgroups, int warps) {
  std::string positions;
  for (size_t i = 0; i < kernel.params.size(); ++i)
    if (std::count(flags.begin(), flags.end(), kernel.params[i].name))
      positions += (positions.empty() ? "" : ", ") + std::to_string(i);
  if (flags.size() == 1) positions += ",";
  // Registers: the producer's warpgroup keeps 24 a thread; the others share the rest of the
  // 64K, which ptxas is told where its own cap (the threads' share) is lower.
  int maxnreg = 65536 / (128 * warpgroups) / 8 * 8;
  return kernel.name + "_hopper = _DtHopper(" + kernel.name + ", " + kernel.name + "_gluon, (" +
         positions + "), " + (maxnreg >= 256 ? "None" : std::to_string(maxnreg)) +
         (warps ? ", " + std::to_string(warps) : "") + ")\n";
}

std::string print_gluon_kernel(const kir::Kernel& kernel) {
  if (kir::has_online_loop(kernel)) return print_gluon_online_kernel(kernel);
  std::string why;
  std::optional<kir::WarpPartitions> p = kir::warp_partitions(kernel, why);
  if (!p) return "";
  return GluonPrinter(kernel, *p).run();
}

std::string launched_kernel_name(const kir::Kernel& kernel) {
  std::string why;
  if (kir::has_online_loop(kernel))
    return kernel.name + (kir::online_partitions(kernel, why) ? "_hopper" : "");
  return kernel.name + (kir::warp_partitions(kernel, why) ? "_hopper" : "");
}

} // namespace dtc
