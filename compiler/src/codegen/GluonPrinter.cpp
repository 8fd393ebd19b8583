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
#include "kir/WarpPartitions.h"

#include <algorithm>

namespace dtc {
namespace {

using kir::Dialect;

std::string extent_text(const kir::Extent& x) {
  return x.param.empty() ? std::to_string(x.n) : x.param;
}

std::string block_text(const kir::Shape& shape) {
  std::string s;
  for (const kir::Extent& x : shape)
    s += (s.empty() ? "" : ", ") + extent_text(x);
  return s;
}

// The statements, each printed at `depth` (a loop with its body).
std::string print_all(const std::vector<const kir::Stmt*>& stmts, int depth) {
  std::string out;
  for (const kir::Stmt* s : stmts)
    out += kir::print(*s, depth, Dialect::Gluon);
  return out;
}

// The names the loops of the partitions bind: not read from statements before them.
void drop_bound(const kir::WarpPartitions& p, std::set<std::string>& names) {
  if (p.blocks) names.erase(p.blocks->name);
  names.erase(p.product->name);
}

// The ring's element type and shared-memory layout for operand `o`'s descriptor.
std::string ring_layout(const kir::WarpPartitions::Operand& o) {
  const kir::Expr& desc = *o.load->args[0];
  return "gl.NVMMASharedLayout.get_default_for([" + block_text(desc.type.shape) + "], " +
         o.load->type.elem_of + ".dtype.element_ty)";
}

class GluonPrinter {
public:
  GluonPrinter(const kir::Kernel& k, const kir::WarpPartitions& p) : k_(k), p_(p) {}

  std::string run() {
    const std::string stages = std::to_string(k_.num_stages);
    std::string out;
    out += partition("_load",
                     "The producer of " + k_.name + "_gluon: the operand tiles into the ring.",
                     producer_body(stages));
    out += "\n\n" + partition("_mma",
                              "The consumer of " + k_.name +
                                  "_gluon: the products from the ring, and the epilogue.",
                              consumer_body(stages));
    out += "\n\n@gluon.jit\ndef " + k_.name + "_gluon(\n" + kernel_params_text(k_) + "):\n";
    out += "    \"\"\"" + k_.doc + ", warp-specialized for Hopper in Gluon.\"\"\"\n";
    const std::string shape_a = block_text(p_.a.load->args[0]->type.shape);
    const std::string shape_b = block_text(p_.b.load->args[0]->type.shape);
    out += "    _dt_a_ring = gl.allocate_shared_memory(" + p_.a.load->type.elem_of +
           ".dtype.element_ty, [" + stages + ", " + shape_a + "],\n        " + ring_layout(p_.a) +
           ")\n";
    out += "    _dt_b_ring = gl.allocate_shared_memory(" + p_.b.load->type.elem_of +
           ".dtype.element_ty, [" + stages + ", " + shape_b + "],\n        " + ring_layout(p_.b) +
           ")\n";
    out += "    _dt_ready = gl.allocate_shared_memory(gl.int64, [" + stages +
           ", 1], mbarrier.MBarrierLayout())\n";
    out += "    _dt_empty = gl.allocate_shared_memory(gl.int64, [" + stages +
           ", 1], mbarrier.MBarrierLayout())\n";
    out += "    for i in gl.static_range(" + stages + "):\n";
    out += "        mbarrier.init(_dt_ready.index(i), count=1)\n";
    out += "        mbarrier.init(_dt_empty.index(i), count=1)\n";
    // The arguments written out in each pair: a tuple bound to a name first would pass the
    // constexpr parameters on as run-time values.
    std::string args, line;
    for (const kir::Param& param : k_.params) {
      if (line.size() > 60) {
        args += line + "\n           ";
        line.clear();
      }
      line += " " + param.name + ",";
    }
    args += line + "\n            _dt_a_ring, _dt_b_ring, _dt_ready, _dt_empty)";
    out += "    gl.warp_specialize([\n";
    out += "        (" + k_.name + "_mma, (" + args.substr(1) + "),\n";
    out += "        (" + k_.name + "_load, (" + args.substr(1) + "),\n";
    out += "    ], [1], [24])\n";
    return wrap(out);
  }

private:
  std::string partition(const std::string& suffix, const std::string& doc,
                        const std::string& body) {
    return "@gluon.jit\ndef " + k_.name + suffix + "(\n" + kernel_params_text(k_) +
           "    _dt_a_ring, _dt_b_ring, _dt_ready, _dt_empty,\n):\n    \"\"\"" + doc + "\"\"\"\n" +
           body;
  }

  // What a partition runs: the statements it needs before the blocks, the loop over blocks (or
  // none), the block's statements it needs, then `inner` (at the block's depth).
  std::string blocks(std::set<std::string> needed, const std::string& inner_at_depth1,
                     const std::string& inner_at_depth2) {
    std::string out;
    // The block's statements first: what they read is needed before the blocks.
    if (p_.blocks) {
      for (const kir::ExprPtr* e : {&p_.blocks->lo, &p_.blocks->hi, &p_.blocks->step})
        kir::free_vars(**e, needed);
    }
    drop_bound(p_, needed);
    std::vector<const kir::Stmt*> setup = kir::slice(p_.setup, needed);
    drop_bound(p_, needed);
    std::vector<const kir::Stmt*> before = kir::slice(p_.before, needed);
    out += print_all(before, 1);
    out += "    _dt_at = 0  # operand tiles taken so far: the ring's slot and phase\n";
    if (!p_.blocks) return out + print_all(setup, 1) + inner_at_depth1;
    out += "    for " + p_.blocks->name + " in " +
           kir::print_loop_head(*p_.blocks, Dialect::Gluon) + ":\n";
    return out + print_all(setup, 2) + inner_at_depth2;
  }

  // The loop over the reduction label at `depth`, its body `body` (each line at depth + 1).
  std::string product_loop(int depth, const std::vector<std::string>& body) {
    std::string indent(4 * depth, ' ');
    std::string out = indent + "for " + p_.product->name + " in " +
                      kir::print_loop_head(*p_.product, Dialect::Gluon) + ":\n";
    for (const std::string& line : body)
      out += indent + "    " + line + "\n";
    return out;
  }

  std::string producer_body(const std::string& stages) {
    std::set<std::string> needed;
    for (const kir::Expr* load : {p_.a.load, p_.b.load})
      for (size_t i = 0; i + 1 < load->args.size(); ++i)
        kir::free_vars(*load->args[i], needed);
    for (const kir::ExprPtr* e : {&p_.product->lo, &p_.product->hi, &p_.product->step})
      kir::free_vars(**e, needed);
    auto inner = [&](int depth) {
      auto copy = [&](const kir::Expr& load, const std::string& ring) {
        std::string offsets;
        for (size_t i = 1; i + 1 < load.args.size(); ++i)
          offsets += (i > 1 ? ", " : "") + kir::print(*load.args[i], Dialect::Gluon);
        return "tma.async_copy_global_to_shared(" + kir::print(*load.args[0], Dialect::Gluon) +
               ", [" + offsets + "], _dt_ready.index(_dt_slot), " + ring + ".index(_dt_slot))";
      };
      return product_loop(
          depth, {"_dt_slot = _dt_at % " + stages,
                  "mbarrier.wait(_dt_empty.index(_dt_slot), (_dt_at // " + stages + " & 1) ^ 1)",
                  "mbarrier.expect(_dt_ready.index(_dt_slot), " +
                      kir::print(*p_.a.load->args[0], Dialect::Gluon) + ".block_type.nbytes + " +
                      kir::print(*p_.b.load->args[0], Dialect::Gluon) + ".block_type.nbytes)",
                  copy(*p_.a.load, "_dt_a_ring"), copy(*p_.b.load, "_dt_b_ring"), "_dt_at += 1"});
    };
    return blocks(needed, inner(1), inner(2));
  }

  std::string consumer_body(const std::string& stages) {
    std::set<std::string> needed;
    for (const kir::Stmt* s : p_.after)
      kir::reads(*s, needed);
    for (const kir::ExprPtr* e : {&p_.product->lo, &p_.product->hi, &p_.product->step})
      kir::free_vars(**e, needed);
    needed.erase(p_.acc);
    const kir::Shape& acc = p_.a.load->type.shape; // rows of A's tile, columns of B's
    const std::string rows = extent_text(acc[0]);
    const std::string cols = extent_text(p_.b.load->type.shape[1]);
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
          depth,
          {"_dt_slot = _dt_at % " + stages,
           "mbarrier.wait(_dt_ready.index(_dt_slot), _dt_at // " + stages + " & 1)",
           p_.acc + " = warpgroup_mma(_dt_a_ring.index(_dt_slot), _dt_b_ring.index(_dt_slot), " +
               p_.acc + ", is_async=True)",
           p_.acc + " = warpgroup_mma_wait(num_outstanding=1, deps=(" + p_.acc + ",))",
           "# the product before this one has retired: its slot is free",
           "mbarrier.arrive(_dt_empty.index((_dt_at + " + std::to_string(k_.num_stages - 1) +
               ") % " + stages + "), count=1, pred=_dt_at > _dt_first)",
           "_dt_at += 1"});
      out += indent + p_.acc + " = warpgroup_mma_wait(num_outstanding=0, deps=(" + p_.acc + ",))\n";
      out += indent + "mbarrier.arrive(_dt_empty.index((_dt_at + " +
             std::to_string(k_.num_stages - 1) + ") % " + stages +
             "), count=1, pred=_dt_at > _dt_first)\n";
      out += print_all(p_.after, depth);
      return out;
    };
    return blocks(needed, inner(1), inner(2));
  }

  // The launch: the Gluon kernel where the flags hold on a Hopper GPU, the Triton kernel else.
  std::string wrap(const std::string& kernels) {
    std::string flags;
    for (size_t i = 0; i < k_.params.size(); ++i)
      if (std::count(p_.flags.begin(), p_.flags.end(), k_.params[i].name))
        flags += (flags.empty() ? "" : ", ") + std::to_string(i);
    if (p_.flags.size() == 1) flags += ",";
    // Registers: the producer's warpgroup keeps 24 a thread; the kernel's warps share the rest
    // of the 64K, which ptxas is told where its own cap (the threads' share) is lower.
    int groups = k_.num_warps / 4 + 1;
    int maxnreg = 65536 / (128 * groups) / 8 * 8;
    return kernels + "\n\n" + k_.name + "_hopper = _DtHopper(" + k_.name + ", " + k_.name +
           "_gluon, (" + flags + "), " + (maxnreg >= 256 ? "None" : std::to_string(maxnreg)) +
           ")\n";
  }

  const kir::Kernel& k_;
  const kir::WarpPartitions& p_;
};

} // namespace

std::string print_gluon_kernel(const kir::Kernel& kernel) {
  std::string why;
  std::optional<kir::WarpPartitions> p = kir::warp_partitions(kernel, why);
  if (!p) return "";
  return GluonPrinter(kernel, *p).run();
}

std::string launched_kernel_name(const kir::Kernel& kernel) {
  std::string why;
  return kernel.name + (kir::warp_partitions(kernel, why) ? "_hopper" : "");
}

} // namespace dtc
