// Prints a kernel whose online loop is warp-specialized a second time, in Gluon, for Hopper
// GPUs (kir/OnlinePartitions.h says why and what the partitions are):
//
//   <name>_load     the producer, one warp: the block's query tile, then each step's key and
//                   value tiles into a ring of `num_stages` buffers (TMA), each after waiting for
//                   the consumers to release its buffer (`k_empty`, `v_empty`: one arrival per
//                   consumer, the keys' once the step's scores are in, the values' once its
//                   update is);
//   <name>_online   a consumer, 4 warps, on its share of the block's rows (`_dt_which`): the
//                   scores on the warpgroup instructions, the loop's statements, the update of
//                   the accumulator (issued in the next step, beside its scores, where the
//                   loop allows: OnlinePartitions::Loop::pipelined), the statements after it;
//   <name>_gluon    the kernel: the buffers and barriers, then the partitions;
//   <name>_hopper   the launch (dt_runtime.py's _DtHopper).
//
// With persistent programs the producer and the consumers each run the loop over the blocks
// around the above; the query buffer is taken again once every consumer has run its loops.
//
// Every value is printed in its form (kir::Form): a tile over the rows and the keys in the
// layout the warpgroup instructions give the scores (`_dt_S`), one over the rows and the output
// columns in the accumulator's (`_dt_O`), vectors along the rows or columns in slices of those,
// scalars as they are; an operand of another form is broadcast (`[:, None]`, `[None, :]`) or,
// a row vector of the other product, converted.
#include "codegen/PythonCodegen.h"
#include "codegen/TritonMath.h"
#include "ir/IR.h"
#include "kir/OnlinePartitions.h"

#include <algorithm>
#include <cctype>

namespace dtc {
namespace {

using kir::Dialect;
using kir::Expr;
using kir::ExprKind;
using kir::Form;
using Kind = Form::Kind;
using Of = Form::Of;

/// A printed value and its form.
struct Value {
  std::string text;
  Form form;
};

class OnlinePrinter {
public:
  OnlinePrinter(const kir::Kernel& k, const kir::OnlinePartitions& p)
      : k_(k), p_(p), consumers_(std::max(1, k.num_warps / 4)), rows_(p.rows.n / consumers_),
        stages_(std::to_string(k.num_stages)) {}

  std::string run() {
    std::string out = helpers();
    out +=
        "\n\n" +
        partition("_load", "The producer of " + k_.name + "_gluon: the tiles into shared memory.") +
        producer();
    out += "\n\n" +
           partition("_online", "A consumer of " + k_.name +
                                    "_gluon: the loop on its rows, and what follows.") +
           consumer();
    out += "\n\n@gluon.jit\ndef " + k_.name + "_gluon(\n" + kernel_params_text(k_) + "):\n";
    out += "    \"\"\"" + k_.doc + ", warp-specialized for Hopper in Gluon.\"\"\"\n";
    auto buffer = [&](const std::string& name, const kir::Stmt& load, const std::string& count) {
      const Expr& desc = *load.value->args[0];
      std::string block;
      for (const kir::Extent& x : desc.type.shape)
        block += (block.empty() ? "" : ", ") + kir::to_string(x);
      return "    " + name + " = gl.allocate_shared_memory(" + load.value->type.elem_of +
             ".dtype.element_ty, [" + (count.empty() ? "" : count + ", ") + block + "],\n        " +
             kir::gluon_shared_layout(desc.type.shape, load.value->type.elem_of) + ")\n";
    };
    if (p_.blocks) out += query_buffers();
    out += buffer("_dt_q", *p_.q, p_.blocks ? "_dt_q_count" : "");
    out += buffer("_dt_k_ring", *p_.loops.front().k, stages_);
    out += buffer("_dt_v_ring", *p_.loops.front().v, stages_);
    for (const char* bar : {"_dt_q_ready", "_dt_q_empty"})
      out += "    " + std::string(bar) + " = gl.allocate_shared_memory(gl.int64, [" +
             (p_.blocks ? "_dt_q_count, " : "") + "1], mbarrier.MBarrierLayout())\n";
    for (const char* bar : {"_dt_k_ready", "_dt_v_ready", "_dt_k_empty", "_dt_v_empty"})
      out += "    " + std::string(bar) + " = gl.allocate_shared_memory(gl.int64, [" + stages_ +
             ", 1], mbarrier.MBarrierLayout())\n";
    if (p_.blocks) {
      out += "    for _dt_i in gl.static_range(_dt_q_count):\n";
      out += "        mbarrier.init(_dt_q_ready.index(_dt_i), count=1)\n";
      out += "        mbarrier.init(_dt_q_empty.index(_dt_i), count=" + std::to_string(consumers_) +
             ")\n";
    } else {
      out += "    mbarrier.init(_dt_q_ready, count=1)\n";
      out += "    mbarrier.init(_dt_q_empty, count=" + std::to_string(consumers_) + ")\n";
    }
    out += "    for _dt_i in gl.static_range(" + stages_ + "):\n";
    out += "        mbarrier.init(_dt_k_ready.index(_dt_i), count=1)\n";
    out += "        mbarrier.init(_dt_v_ready.index(_dt_i), count=1)\n";
    out += "        # every consumer reads every buffer\n";
    for (const char* bar : {"_dt_k_empty", "_dt_v_empty"})
      out += "        mbarrier.init(" + std::string(bar) +
             ".index(_dt_i), count=" + std::to_string(consumers_) + ")\n";
    const std::string args = partition_args(k_, shared_args());
    out += "    gl.warp_specialize([\n";
    for (int c = 0; c < consumers_; ++c)
      out += "        (" + k_.name + "_online, (" + args + ", " + std::to_string(c) + ")),\n";
    out += "        (" + k_.name + "_load, (" + args + ", 0)),\n";
    std::string warps, regs;
    for (int c = 1; c < consumers_; ++c) {
      warps += "4, ";
      regs += "240, ";
    }
    out += "    ], [" + warps + "1], [" + regs + "24])\n";
    return wrap(out);
  }

private:
  // With persistent programs, two query buffers where they fit in shared memory beside the ring
  // (a constant of the kernel, which knows the tiles' widths): the producer then loads the next
  // block's queries, and after them its keys and values, while the consumers work on this one.
  std::string query_buffers() const {
    auto bytes = [](const kir::Stmt& load) {
      std::string n;
      for (const kir::Extent& x : load.value->args[0]->type.shape)
        n += (n.empty() ? "" : " * ") + kir::to_string(x);
      return "(" + n + ") * " + load.value->type.elem_of + ".dtype.element_ty.primitive_bitwidth";
    };
    const kir::OnlinePartitions::Loop& l = p_.loops.front();
    return "    # the query buffers: two where they fit beside the ring (Hopper's 227 KiB, less "
           "scratch)\n    _dt_q_count: gl.constexpr = 2 if (2 * " +
           bytes(*p_.q) + " + " + stages_ + " * (" + bytes(*l.k) + " + " + bytes(*l.v) +
           ")) // 8 <= " + std::to_string(kQueryRingBytes) + " else 1\n";
  }
  static constexpr long kQueryRingBytes = 227 * 1024 - 4096;

  std::string shared_args() const {
    return "_dt_q, _dt_k_ring, _dt_v_ring, _dt_q_ready, _dt_q_empty, _dt_k_ready, _dt_v_ready, "
           "_dt_k_empty, _dt_v_empty";
  }

  std::string partition(const std::string& suffix, const std::string& doc) const {
    return "@gluon.jit\ndef " + k_.name + suffix + "(\n" + kernel_params_text(k_) + "    " +
           shared_args() + ",\n    _dt_which: gl.constexpr,\n):\n    \"\"\"" + doc + "\"\"\"\n";
  }

  // The NaN-propagating maximum of a row (torch.amax's), in Gluon.
  std::string helpers() const {
    return "@gluon.jit\ndef " + k_.name + "_rowmax(v):\n    return gl.reduce(v, 1, " + k_.name +
           "_maximum)\n\n\n@gluon.jit\ndef " + k_.name +
           "_maximum(a, b):\n    return gl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)\n";
  }

  std::string copy(const kir::Stmt& load, const std::string& barrier, const std::string& into) {
    const Expr& e = *load.value;
    std::string offsets;
    for (size_t i = 1; i + 1 < e.args.size(); ++i)
      offsets += (i > 1 ? ", " : "") + expr(*e.args[i]).text;
    return "tma.async_copy_global_to_shared(" + e.args[0]->name + ", [" + offsets + "], " +
           barrier + ", " + into + ")";
  }

  // The depth of the block's statements: 1, or 2 in the loop over blocks.
  int block_depth() const { return p_.blocks ? 2 : 1; }

  // The loop over blocks (persistent programs), after the statements before it, with the
  // count of blocks done (the query buffer's phase); nothing with one block per program.
  std::string blocks(const std::vector<const kir::Stmt*>& outer) {
    std::string out = statements(outer, 1);
    out += "    _dt_at = 0  # key and value tiles taken so far: the ring's slot and phase\n";
    if (!p_.blocks) return out;
    out += "    _dt_done = 0  # blocks done: the query buffer's phase\n";
    return out + "    for " + p_.blocks->name + " in " +
           kir::print_loop_head(*p_.blocks, Dialect::Gluon) + ":\n";
  }

  std::string producer() {
    names_.clear();
    const std::string in(4 * block_depth(), ' ');
    std::string out = p_.blocks ? "    _dt_q_count: gl.constexpr = _dt_q.shape[0]\n" : "";
    out += blocks(p_.producer_outer); // first: it gives the names their forms
    out += statements(p_.producer_before, block_depth());
    const std::string q = p_.q->value->args[0]->name;
    if (p_.blocks) { // the consumers are done with the queries that were in this buffer
      out += in + "_dt_q_slot = _dt_done % _dt_q_count\n";
      out +=
          in + "mbarrier.wait(_dt_q_empty.index(_dt_q_slot), (_dt_done // _dt_q_count & 1) ^ 1)\n";
      out += in + "mbarrier.expect(_dt_q_ready.index(_dt_q_slot), " + q + ".block_type.nbytes)\n";
      out += in + copy(*p_.q, "_dt_q_ready.index(_dt_q_slot)", "_dt_q.index(_dt_q_slot)") + "\n";
    } else {
      out += in + "mbarrier.expect(_dt_q_ready, " + q + ".block_type.nbytes)\n";
      out += in + copy(*p_.q, "_dt_q_ready", "_dt_q") + "\n";
    }
    for (const kir::OnlinePartitions::Loop& l : p_.loops) {
      out += in + "for " + l.loop->name + " in " + kir::print_loop_head(*l.loop, Dialect::Gluon) +
             ":\n";
      out += in + "    _dt_slot = _dt_at % " + stages_ + "\n";
      for (const auto& [load, ring, ready, empty] :
           {std::tuple{l.k, "_dt_k_ring", "_dt_k_ready", "_dt_k_empty"},
            {l.v, "_dt_v_ring", "_dt_v_ready", "_dt_v_empty"}}) {
        const std::string desc = load->value->args[0]->name;
        out += in + "    mbarrier.wait(" + std::string(empty) + ".index(_dt_slot), (_dt_at // " +
               stages_ + " & 1) ^ 1)\n";
        out += in + "    mbarrier.expect(" + std::string(ready) + ".index(_dt_slot), " + desc +
               ".block_type.nbytes)\n";
        out += in + "    " +
               copy(*load, std::string(ready) + ".index(_dt_slot)",
                    std::string(ring) + ".index(_dt_slot)") +
               "\n";
      }
      out += in + "    _dt_at += 1\n";
    }
    if (p_.blocks) out += in + "_dt_done += 1\n";
    return out;
  }

  // A tile of a ring's slot (or the query buffer) as the product reads it: 2-D, transposed
  // where the tensor holds it transposed.
  std::string view(const kir::Stmt& load, const std::string& buffer) const {
    const kir::Shape& block = load.value->args[0]->type.shape;
    std::string text = buffer + ".reshape([" + kir::to_string(block[block.size() - 2]) + ", " +
                       kir::to_string(block.back()) + "])";
    return load.value->value_int ? text + ".permute((1, 0))" : text;
  }

  std::string consumer() {
    names_.clear();
    std::string out;
    out += "    _dt_S: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], "
           "warps_per_cta=[4, 1],\n        instr_shape=[16, " +
           kir::to_string(p_.score_cols) + ", 16])  # the scores'\n";
    out += "    _dt_O: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], "
           "warps_per_cta=[4, 1],\n        instr_shape=[16, " +
           kir::to_string(p_.out_cols) + ", 16])  # the accumulator's\n";
    if (p_.blocks)
      out += "    _dt_q_count: gl.constexpr = _dt_q.shape[0]\n";
    else
      out += "    " + q_tile();
    out += blocks(p_.consumer_outer); // first: it gives the names their forms
    out += statements(p_.consumer_before, block_depth());
    const std::string in(4 * block_depth(), ' ');
    if (p_.blocks) {
      out += in + "_dt_q_slot = _dt_done % _dt_q_count\n";
      out += in + "mbarrier.wait(_dt_q_ready.index(_dt_q_slot), _dt_done // _dt_q_count & 1)\n";
    } else {
      out += in + "mbarrier.wait(_dt_q_ready, 0)\n";
    }
    for (const kir::OnlinePartitions::Loop& l : p_.loops)
      out += loop(l);
    // The queries are read: the producer may load a later block's. Where the output leaves
    // through the query buffer (store_through_queries), once it has left.
    std::string release;
    if (p_.blocks)
      release =
          in + "mbarrier.arrive(_dt_q_empty.index(_dt_q_slot), count=1)\n" + in + "_dt_done += 1\n";
    if (!stores_through_queries()) return out + release + statements(p_.after, block_depth());
    return out + statements(p_.after, block_depth()) + release;
  }

  // This consumer's rows of the queries. With persistent programs, the block's query buffer
  // (`_dt_q_slot`), named again at the top of each loop's region: named once before two loops
  // (the causal kernel's), the second loop's products read the buffer of the last block whose
  // first loop ran, or outside shared memory where none had (Triton 3.6 on sm_90; seen in the
  // first query block of each row, whose first loop has no steps).
  std::string q_tile() const {
    std::string q = view(*p_.q, p_.blocks ? "_dt_q.index(_dt_q_slot)" : "_dt_q");
    if (consumers_ > 1)
      q += ".slice(_dt_which * " + std::to_string(rows_) + ", " + std::to_string(rows_) + ")";
    return "_dt_q_tile = " + q + "\n";
  }

  // A consumer's online loop: each step's scores, its statements, its update; pipelined
  // where the partitions allow it.
  std::string loop(const kir::OnlinePartitions::Loop& l) {
    if (l.pipelined) return pipelined_loop(l);
    const std::string in(4 * block_depth(), ' '), body = in + "    ";
    std::string out =
        in + "for " + l.loop->name + " in " + kir::print_loop_head(*l.loop, Dialect::Gluon) + ":\n";
    if (p_.blocks) out += body + q_tile();
    out += step_slot(body);
    for (const kir::Stmt* s : l.consumer) {
      if (s == l.scores) {
        out += issue_scores(l, body) + wait_scores(l, body, 0);
      } else if (s == l.update) {
        out += issue_update(l, body, "_dt_slot", "_dt_phase");
        out += wait_update(body, "_dt_slot");
      } else {
        out += statement(*s, block_depth() + 1);
      }
    }
    return out + body + "_dt_at += 1\n";
  }

  // The loop with each step's update issued in the next step, with its scores: the tensor cores
  // run the update while the consumer computes that step's exponentials (FlashAttention-3's
  // pipelining within a warpgroup). The first step's scores and statements come before the
  // loop, the last step's update after it, all under `if lo < hi` (a loop of no steps does
  // nothing). `_dt_prev` is the slot (and phase) whose update is pending.
  std::string pipelined_loop(const kir::OnlinePartitions::Loop& l) {
    const kir::Stmt& f = *l.loop;
    const std::string in(4 * block_depth(), ' '), b1 = in + "    ", b2 = b1 + "    ";
    const std::string lo = expr(*f.lo).text, hi = expr(*f.hi).text, step = expr(*f.step).text;
    std::string out = in + "if " + atom(lo) + " < " + atom(hi) +
                      ":  # the first step here, each step's update in the next step\n";
    if (p_.blocks) out += b1 + q_tile();
    out += b1 + f.name + " = " + lo + "\n" + step_slot(b1);
    for (const kir::Stmt* s : l.consumer) {
      if (s == l.scores)
        out += issue_scores(l, b1) + wait_scores(l, b1, 0);
      else if (s != l.update)
        out += statement(*s, block_depth() + 1);
    }
    out += b1 + "_dt_prev, _dt_prev_phase = _dt_slot, _dt_phase\n" + b1 + "_dt_at += 1\n";
    out += b1 + "for " + f.name + " in range(" + atom(lo) + " + " + atom(step) + ", " + hi + ", " +
           step + "):\n";
    out += step_slot(b2);
    for (const kir::Stmt* s : l.consumer) {
      if (s == l.scores) {
        out += issue_scores(l, b2);
        out += issue_update(l, b2, "_dt_prev", "_dt_prev_phase");
        out += wait_scores(l, b2, 1); // the older of the two
      } else if (s != l.update) {
        out += statement(*s, block_depth() + 2);
      }
    }
    out += wait_update(b2, "_dt_prev");
    out += b2 + "_dt_prev, _dt_prev_phase = _dt_slot, _dt_phase\n" + b2 + "_dt_at += 1\n";
    out += issue_update(l, b1, "_dt_prev", "_dt_prev_phase") + wait_update(b1, "_dt_prev");
    return out;
  }

  std::string step_slot(const std::string& in) const {
    return in + "_dt_slot = _dt_at % " + stages_ + "\n" + in + "_dt_phase = _dt_at // " + stages_ +
           " & 1\n";
  }

  // The scores of the step in `_dt_slot`, issued on the warpgroup instructions.
  std::string issue_scores(const kir::OnlinePartitions::Loop& l, const std::string& in) {
    names_[l.scores->name] = p_.normal({Kind::Tile, Of::Scores});
    return in + "mbarrier.wait(_dt_k_ready.index(_dt_slot), _dt_phase)\n" + in + l.scores->name +
           " = warpgroup_mma(_dt_q_tile, " + view(*l.k, "_dt_k_ring.index(_dt_slot)") + ",\n" + in +
           "    gl.full([" + std::to_string(rows_) + ", " + kir::to_string(p_.score_cols) +
           "], 0.0, gl.float32, _dt_S), use_acc=False, is_async=True)\n";
  }

  // Waits for the scores of the step in `_dt_slot`, with `outstanding` younger products left
  // running, then releases its keys to the producer.
  std::string wait_scores(const kir::OnlinePartitions::Loop& l, const std::string& in,
                          int outstanding) const {
    const std::string& n = l.scores->name;
    return in + n + " = warpgroup_mma_wait(num_outstanding=" + std::to_string(outstanding) +
           ", deps=(" + n + ",))\n" + in +
           "mbarrier.arrive(_dt_k_empty.index(_dt_slot), count=1)\n";
  }

  // The update of the step in ring slot `slot` (its values' phase `phase`), issued. Its
  // probabilities are a register operand (`_dt_p`), which the wait names so that they stay
  // unchanged until the product is done (the next step's run beside it in the pipelined loop).
  std::string issue_update(const kir::OnlinePartitions::Loop& l, const std::string& in,
                           const std::string& slot, const std::string& phase) {
    const Expr& pv = *l.update->value;
    const Form o = p_.normal({Kind::Tile, Of::Output});
    std::string out = in + "mbarrier.wait(_dt_v_ready.index(" + slot + "), " + phase + ")\n";
    out += in + "_dt_p = gl.convert_layout(" +
           as(expr(*pv.args[0]), p_.normal({Kind::Tile, Of::Scores})) + ",\n" + in +
           "    gl.DotOperandLayout(operand_index=0, parent=_dt_O, k_width=2))\n";
    out += in + l.update->name + " = warpgroup_mma(_dt_p, " +
           view(*l.v, "_dt_v_ring.index(" + slot + ")") + ",\n" + in + "    " +
           as(expr(*pv.args[2]), o) + ", is_async=True)\n";
    names_[l.update->name] = o;
    return out;
  }

  // Waits for the update, then releases its values to the producer.
  std::string wait_update(const std::string& in, const std::string& slot) const {
    return in + p_.acc + ", _dt_p = warpgroup_mma_wait(num_outstanding=0, deps=(" + p_.acc +
           ", _dt_p))\n" + in + "mbarrier.arrive(_dt_v_empty.index(" + slot + "), count=1)\n";
  }

  std::string statements(const std::vector<const kir::Stmt*>& stmts, int depth) {
    std::string out;
    for (const kir::Stmt* s : stmts)
      out += statement(*s, depth);
    return out;
  }

  std::string statement(const kir::Stmt& s, int depth) {
    const std::string indent(4 * depth, ' ');
    switch (s.kind) {
    case kir::StmtKind::Comment:
      return indent + "# " + s.text + "\n";
    case kir::StmtKind::Assign: {
      if (s.value->kind == ExprKind::MakeDesc) {
        names_[s.name] = Form{}; // a descriptor: no layout
        return kir::print(*consumers_desc(s), depth, Dialect::Gluon);
      }
      Value v = expr(*s.value);
      auto it = names_.find(s.name);
      if (it == names_.end()) {
        names_[s.name] = v.form;
        return indent + s.name + " = " + v.text + "\n";
      }
      return indent + s.name + " = " + as(v, it->second) + "\n"; // carried: its first form
    }
    case kir::StmtKind::Store: {
      // In the form of its operands together: the output's tile, or a row vector (a
      // log-sum-exp stored beside it).
      Value ptr = expr(*s.ptr), value = expr(*s.value);
      std::optional<Value> mask;
      if (s.mask) mask = expr(*s.mask);
      std::optional<Form> f =
          kir::combine_forms(p_, mask ? std::vector<Form>{ptr.form, value.form, mask->form}
                                      : std::vector<Form>{ptr.form, value.form});
      if (!f) throw InternalError("an online consumer's store of operands that do not combine");
      std::string plain = "gl.store(" + as(ptr, *f) + ", " + as(value, *f) +
                          (mask ? ", mask=" + as(*mask, *f) : "") + ")\n";
      if (!through_queries(s)) return indent + plain;
      return store_through_queries(s, value, depth) + indent + "else:\n" + indent + "    " + plain;
    }
    default:
      throw InternalError("an online consumer's statement of an unexpected kind");
    }
  }

  // A store through a descriptor (`tma(..., out)`) leaves through the block's query buffer: each
  // consumer writes its rows of the output into its rows of the queries (read for the last time
  // by the loops' products), and one TMA store copies them out, before the buffer is released.
  // It needs the queries' block and the output's of one rank with the rows at the same place
  // (both [1, ..., rows, cols]) and the columns and element type alike, the last two checked
  // in the kernel (constexpr); else, and where the wrapper finds the output does not qualify,
  // the pointer store.
  bool through_queries(const kir::Stmt& s) const {
    if (s.kind != kir::StmtKind::Store || !s.desc || s.desc->kind != ExprKind::Var ||
        s.desc_parts.size() != 1)
      return false;
    const kir::Expr& q_desc = *p_.q->value->args[0];
    return q_desc.type.shape.size() == s.desc->type.shape.size();
  }
  bool stores_through_queries() const {
    for (const kir::Stmt* s : p_.after)
      if (through_queries(*s)) return true;
    return false;
  }

  std::string store_through_queries(const kir::Stmt& s, const Value& value, int depth) {
    const std::string indent(4 * depth, ' '), in = indent + "    ";
    const kir::Shape& block = s.desc->type.shape;
    const size_t rank = block.size();
    const kir::Expr& q_desc = *p_.q->value->args[0];
    const std::string q_elem = p_.q->value->type.elem_of + ".dtype.element_ty",
                      elem = s.desc->type.elem_of + ".dtype.element_ty";
    std::string shape;
    for (size_t i = 0; i < rank; ++i)
      shape += (i ? ", " : "") + (i + 2 == rank ? std::to_string(rows_) : kir::to_string(block[i]));
    std::string at;
    const kir::Stmt::DescPart& part = s.desc_parts.front();
    for (size_t i = 0; i < rank; ++i) {
      std::string o = expr(*part.offsets[i]).text;
      if (i + 2 == rank && consumers_ > 1) o = atom(o) + " + _dt_which * " + std::to_string(rows_);
      at += (i ? ", " : "") + o;
    }
    std::string buffer = p_.blocks ? "_dt_q.index(_dt_q_slot)" : "_dt_q";
    if (consumers_ > 1)
      buffer += ".slice(_dt_which * " + std::to_string(rows_) + ", " + std::to_string(rows_) +
                ", dim=" + std::to_string(rank - 2) + ")";
    std::string out = indent + "if " + s.desc_flag + " and " + kir::to_string(block.back()) +
                      " == " + kir::to_string(q_desc.type.shape.back()) + " and " + elem +
                      " == " + q_elem + ":  # through the query buffer\n";
    out += in + "_dt_o = " + buffer + "\n";
    out += in + "_dt_o.store(" + atom(as(value, p_.normal({Kind::Tile, Of::Output}))) + ".to(" +
           elem + ").reshape([" + shape + "]))\n";
    out += in + "fence_async_shared()\n";
    out += in + "tma.async_copy_shared_to_global(" + s.desc->name + ", [" + at + "], _dt_o)\n";
    return out + in + "tma.store_wait(0)\n";
  }

  // The output's descriptor as a consumer makes it: a block of its own rows.
  kir::StmtPtr consumers_desc(const kir::Stmt& s) const {
    kir::ExprPtr value = s.value;
    for (const kir::Stmt* a : p_.after)
      if (through_queries(*a) && a->desc->name == s.name) {
        const kir::Expr& d = *s.value;
        const size_t rank = d.type.shape.size();
        std::vector<kir::ExprPtr> sizes(d.args.begin() + 1, d.args.begin() + 1 + rank),
            strides(d.args.begin() + 1 + rank, d.args.end());
        kir::Shape block = d.type.shape;
        block[rank - 2] = kir::Extent{rows_, ""};
        value = kir::make_desc(d.args[0], sizes, strides, block, d.name);
      }
    return kir::Stmt::assign(s.name, value);
  }

  static std::string layout(Of of) { return of == Of::Scores ? "_dt_S" : "_dt_O"; }

  // `v` as a value of form `to`: broadcast along the other axis, a row vector converted to the
  // other product's layout.
  std::string as(const Value& v, const Form& to) const {
    const Form& f = v.form;
    if (f.kind == Kind::Scalar || f == to) return v.text;
    switch (f.kind) {
    case Kind::Rows: {
      std::string rows = f.of == to.of ? v.text
                                       : "gl.convert_layout(" + v.text + ", gl.SliceLayout(1, " +
                                             layout(to.of) + "))";
      return to.kind == Kind::Tile ? atom(rows) + "[:, None]" : rows;
    }
    case Kind::Cols:
      if (to.kind == Kind::Tile && f.of == to.of) return atom(v.text) + "[None, :]";
      break;
    default:
      break;
    }
    throw InternalError("an online consumer's value of a form it cannot take");
  }

  static std::string atom(const std::string& text) {
    bool simple = std::all_of(text.begin(), text.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
    });
    return simple ? text : "(" + text + ")";
  }

  // The form the analysis gives `e` here (names as printed so far).
  Form form(const Expr& e) const {
    std::optional<Form> f = kir::online_form(p_, e, names_);
    if (!f) throw InternalError("an online consumer's expression without a form: " + kir::print(e));
    return *f;
  }

  // The operands of `e` as values of its form, each printed.
  std::vector<std::string> operands(const Expr& e, const Form& f, size_t from = 0) {
    std::vector<std::string> out;
    for (size_t i = from; i < e.args.size(); ++i)
      out.push_back(as(expr(*e.args[i]), f));
    return out;
  }

  // The vector along axis `form` of a range of `extent`: the consumer's rows from its first.
  std::string range(const Form& f, const kir::Extent& extent) const {
    if (f.kind == Kind::Rows)
      return consumers_ > 1
                 ? "(gl.arange(0, " + std::to_string(rows_) +
                       ", layout=gl.SliceLayout(1, _dt_S)) + _dt_which * " + std::to_string(rows_) +
                       ")"
                 : "gl.arange(0, " + std::to_string(rows_) + ", layout=gl.SliceLayout(1, _dt_S))";
    return "gl.arange(0, " + kir::to_string(extent) + ", layout=gl.SliceLayout(0, " + layout(f.of) +
           "))";
  }

  Value expr(const Expr& e) {
    const Form f = form(e);
    switch (e.kind) {
    case ExprKind::Var:
    case ExprKind::Int:
    case ExprKind::Float:
    case ExprKind::ProgramId:
    case ExprKind::NumPrograms:
      return {kir::print(e, Dialect::Gluon), f};
    case ExprKind::Arange:
      return {range(f, e.type.shape[0]), f};
    case ExprKind::Expand: {
      // A range along one axis (the others of one element): the vector of its form.
      const Expr* a = e.args[0].get();
      std::vector<const Expr*> casts;
      for (; a->kind == ExprKind::Cast; a = a->args[0].get())
        casts.push_back(a);
      std::string text = f.kind == Kind::Scalar ? "0" : range(f, a->type.shape[0]);
      for (auto c = casts.rbegin(); c != casts.rend(); ++c)
        text = f.kind == Kind::Scalar ? text : atom(text) + ".to(" + dtype((*c)->type) + ")";
      return {text, f};
    }
    case ExprKind::Full: {
      const std::string value = ir::python_float(e.value_float);
      if (f.kind == Kind::Scalar) return {value, f};
      if (f.kind == Kind::Rows)
        return {"gl.full([" + std::to_string(rows_) + "], " + value +
                    ", gl.float32, gl.SliceLayout(1, " + layout(f.of) + "))",
                f};
      return {"gl.full([" + std::to_string(rows_) + ", " +
                  kir::to_string(f.of == Of::Scores ? p_.score_cols : p_.out_cols) + "], " + value +
                  ", gl.float32, " + layout(f.of) + ")",
              f};
    }
    case ExprKind::Reshape:
      return {expr(*e.args[0]).text, f};
    case ExprKind::Reduce: {
      std::string tile = as(expr(*e.args[0]), Form{Kind::Tile, Of::Scores});
      if (e.reduce == kir::ReduceOp::Max) return {k_.name + "_rowmax(" + tile + ")", f};
      return {"gl.sum(" + tile + ", axis=1)", f};
    }
    case ExprKind::Neg:
      return {"-" + atom(expr(*e.args[0]).text), f};
    case ExprKind::Binary: {
      std::vector<std::string> a = operands(e, f);
      if ((e.op == kir::BinOp::Max || e.op == kir::BinOp::Min) && e.type.is_float())
        return {std::string(e.op == kir::BinOp::Max ? "gl.maximum(" : "gl.minimum(") + a[0] + ", " +
                    a[1] + ", propagate_nan=tl.PropagateNan.ALL)",
                f};
      if (e.op == kir::BinOp::Max || e.op == kir::BinOp::Min)
        return {std::string(e.op == kir::BinOp::Max ? "gl.maximum(" : "gl.minimum(") + a[0] + ", " +
                    a[1] + ")",
                f};
      return {atom(a[0]) + " " + kir::op_text(e.op) + " " + atom(a[1]), f};
    }
    case ExprKind::Select: {
      std::vector<std::string> a = operands(e, f);
      return {"gl.where(" + a[0] + ", " + a[1] + ", " + a[2] + ")", f};
    }
    case ExprKind::Call: {
      std::vector<std::string> a = operands(e, f);
      std::string args;
      for (const std::string& x : a)
        args += (args.empty() ? "" : ", ") + x;
      return {std::string(triton_function(e.fn)) + "(" + args + ")", f};
    }
    case ExprKind::Cast: {
      Value a = expr(*e.args[0]);
      if (f.kind == Kind::Scalar) return {"tl.cast(" + a.text + ", " + dtype(e.type) + ")", f};
      return {atom(as(a, f)) + ".to(" + dtype(e.type) + ")", f};
    }
    default:
      throw InternalError("an online consumer's expression of an unexpected kind");
    }
  }

  static std::string dtype(const kir::Type& t) { return kir::dtype_text(t); }

  // The launch: the Gluon kernel where the flags hold on a Hopper GPU, the Triton kernel else;
  // started with 4 warps (the first consumer's), each partition setting its own registers.
  std::string wrap(const std::string& kernels) const {
    std::set<std::string> names;
    kir::free_vars(*p_.loops.front().loop->warp_specialize, names);
    std::vector<std::string> flags;
    for (const std::string& name : names)
      if (name.rfind("WARP_SPECIALIZE", 0) != 0) flags.push_back(name);
    return kernels + "\n\n" + print_hopper_launch(k_, flags, consumers_ + 1, 4);
  }

  const kir::Kernel& k_;
  const kir::OnlinePartitions& p_;
  const int consumers_;
  const long long rows_; // each consumer's
  const std::string stages_;
  std::map<std::string, Form> names_; // the forms of the names printed so far
};

} // namespace

std::string print_gluon_online_kernel(const kir::Kernel& kernel) {
  std::string why;
  std::optional<kir::OnlinePartitions> p = kir::online_partitions(kernel, why);
  if (!p) return "";
  return OnlinePrinter(kernel, *p).run();
}

} // namespace dtc
