// The stages of lowering one Func (lower/LowerState.h), each run on its own: a program and a
// schedule in, the stage's output out.
#include "Pipeline.h"
#include "kir/CommonSubexpressions.h"
#include "kir/EliminateDeadCode.h"
#include "kir/FoldScaleConstants.h"
#include "kir/HoistLoopInvariants.h"
#include "kir/KeepReReadsInCache.h"
#include "kir/MaxBeforeScale.h"
#include "kir/OnlinePartitions.h"
#include "kir/PeelPartialTile.h"
#include "kir/RoundBeforeShift.h"
#include "kir/SimplifyMasks.h"
#include "kir/WarpPartitions.h"
#include "lower/FoldTiedReductions.h"
#include "lower/InlineFused.h"
#include "lower/LowerFunc.h"
#include "lower/LowerState.h"
#include "lower/OnlineSoftmax.h"
#include "lower/SplitReductions.h"

#include <gtest/gtest.h>

namespace dtc {
namespace {

using lowering::LowerState;

/// A program with `schedule` applied (replacing the file's), fused and split, ready to lower.
struct Prepared {
  /// `online`: also the pipeline's stages before lowering that an online loop needs.
  Prepared(const std::string& source, const std::string& schedule, bool online = false)
      : diags("test.dt", source), front(run_frontend(source, diags)) {
    EXPECT_TRUE(front) << diags.render();
    Schedule written;
    apply_schedule(replacement_schedule(front->ast, schedule, diags), front->program, written,
                   diags);
    plan = std::make_unique<KernelPlan>(written);
    py = std::make_unique<PythonNames>(front->program);
    inline_fused_funcs(front->program, *plan, diags);
    split_reductions(front->program, *plan, *py, diags);
    if (online) {
      fold_tied_reductions(front->program, *plan);
      plan_online(front->program, *plan, diags);
    }
    EXPECT_FALSE(diags.has_errors()) << diags.render();
  }
  const ir::Symbol* func(const std::string& name) const {
    const ir::Symbol* f = front->program.find(name);
    EXPECT_TRUE(f) << name;
    return f;
  }
  LowerState state(const std::string& name) {
    return LowerState(front->program, *plan, *py, func(name), diags);
  }
  kir::Kernel lower(const std::string& name) {
    return lower_func(front->program, *plan, *py, func(name), diags);
  }

  DiagnosticEngine diags;
  std::unique_ptr<Frontend> front;
  std::unique_ptr<KernelPlan> plan;
  std::unique_ptr<PythonNames> py;
};

const char* kRmsNorm = R"(
Func norm;
In X, W;
SIn Eps;
Var x, y;
RVar k;
norm[x, y] = X[x, y] * rsqrt(rsum(X[x, k] * X[x, k], k) / len(y) + Eps) * W[y];
norm.compile();
)";

const char* k2mm = R"(
Func _2mm, mm;
In A, B, C;
Var m, n;
RVar k, l;
mm[m, l] = rdot(A[m, k], B[k, l], k);
_2mm[m, n] = rdot(mm[m, l], C[l, n], l);
_2mm.compile();
)";

std::string axes_of(const lowering::KernelLayout& layout) {
  std::string s;
  for (const lowering::Axis& a : layout.axes)
    s += a.label->name + ":" + (a.width.param.empty() ? std::to_string(a.width.n) : a.width.param) +
         " ";
  return s;
}

std::string params_of(const kir::Kernel& k) {
  std::string s;
  for (const kir::Param& p : k.params)
    s += p.name + (p.is_constexpr ? "(constexpr) " : " ");
  return s;
}

/// Where `needle` first occurs in `text`, failing the test if it does not.
size_t at(const std::string& text, const std::string& needle) {
  size_t pos = text.find(needle);
  EXPECT_NE(pos, std::string::npos) << "no `" << needle << "` in:\n" << text;
  return pos;
}

TEST(LowerLayout, AnAxisPerTensorizedLabelInScheduleOrder) {
  Prepared p(kRmsNorm, "norm.block(x:2); norm.tensorize(x:0, y:0, k:256);");
  LowerState s = p.state("norm");
  lowering::KernelLayout layout = lowering::plan_layout(s.prog, s.fs, s.def, s.py);
  // A blocked whole dimension is a literal power of two; an unblocked one a constexpr tile
  // width the wrapper computes; a partial one its tensor size.
  EXPECT_EQ(axes_of(layout), "x:2 y:y_TILE k:256 ");
  ASSERT_EQ(layout.tiles.size(), 1u);
  EXPECT_EQ(layout.tiles[0]->name, "y");
  EXPECT_TRUE(layout.dot_labels.empty());
  EXPECT_EQ(layout.axis_of(p.func("norm")), -1);
  kir::Shape shape = layout.shape_of({layout.axes[2].label});
  ASSERT_EQ(shape.size(), 3u);
  EXPECT_EQ(shape[0].n, 1);
  EXPECT_EQ(shape[2].n, 256);
}

TEST(LowerLayout, AnUntensorizedLabelHasNoAxisAndDotLabelsAreRecorded) {
  Prepared p(k2mm, "_2mm.block(m:32); _2mm.tensorize(m:0, n:64, k:32, l:0); mm.fuse_at(_2mm, m);");
  LowerState s = p.state("_2mm");
  lowering::KernelLayout layout = lowering::plan_layout(s.prog, s.fs, s.def, s.py);
  EXPECT_EQ(axes_of(layout), "m:32 n:64 l:l_TILE k:32 ");
  EXPECT_EQ(layout.dot_labels.size(), 4u);

  // A block of one is a tile of one; a label neither blocked nor tensorized has no axis.
  Prepared q(kRmsNorm, "norm.block(x:1); norm.tensorize(y:1024);");
  LowerState t = q.state("norm");
  EXPECT_EQ(axes_of(lowering::plan_layout(t.prog, t.fs, t.def, t.py)), "x:1 y:1024 ");
}

TEST(LowerSignature, TensorsThenScalarsThenSizesThenTileWidths) {
  Prepared p(kRmsNorm, "norm.block(x:1); norm.tensorize(x:0, y:0, k:0);");
  LowerState s = p.state("norm");
  s.layout = lowering::plan_layout(s.prog, s.fs, s.def, s.py);
  lowering::add_params(s);
  EXPECT_EQ(
      params_of(s.kernel),
      "X_ptr X_stride0 X_stride1 W_ptr W_stride0 Eps norm_ptr norm_stride0 norm_stride1 x_size "
      "y_size k_size y_TILE(constexpr) k_TILE(constexpr) ");
  // How the wrapper fills each: the tensor or scalar named, a size by its label.
  ASSERT_EQ(s.kernel.launch.size(), s.kernel.params.size());
  EXPECT_EQ(s.kernel.launch[0].kind, kir::LaunchArg::Kind::Tensor);
  EXPECT_EQ(s.kernel.launch[0].name, "X");
  EXPECT_EQ(s.kernel.launch[2].kind, kir::LaunchArg::Kind::Stride);
  EXPECT_EQ(s.kernel.launch[2].axis, 1u);
  EXPECT_EQ(s.kernel.launch[5].kind, kir::LaunchArg::Kind::Scalar);
  EXPECT_EQ(s.kernel.launch[9].kind, kir::LaunchArg::Kind::Size);
  EXPECT_EQ(s.kernel.launch[9].name, "x");
  EXPECT_EQ(s.kernel.launch[12].kind, kir::LaunchArg::Kind::Tile);
  EXPECT_EQ(s.kernel.launch[12].least, 1);
  // A fused producer computed into a temporary is a float32 tensor of the kernel, with its
  // sizes for the wrapper's allocation.
  Prepared q(k2mm, "_2mm.block(m:32); _2mm.tensorize(m:0, n:64, k:32, l:64); mm.fuse_at(_2mm, m);");
  LowerState t = q.state("_2mm");
  t.layout = lowering::plan_layout(t.prog, t.fs, t.def, t.py);
  lowering::add_params(t);
  EXPECT_NE(params_of(t.kernel).find("mm_fuse_ptr mm_fuse_stride0 mm_fuse_stride1"),
            std::string::npos)
      << params_of(t.kernel);
  ASSERT_EQ(t.kernel.scratch.size(), 1u);
  EXPECT_EQ(t.kernel.scratch[0].sizes, (std::vector<std::string>{"m", "l"}));
}

TEST(LowerMapping, MapSplitsGiveTheGridAndTheBlockIndices) {
  Prepared p(k2mm, "_2mm.block(m:64, n:64); _2mm.tensorize(m:0, n:0, l:32);"
                   "_2mm.map(m:mi/4, n, mi);");
  LowerState s = p.state("_2mm");
  s.layout = lowering::plan_layout(s.prog, s.fs, s.def, s.py);
  lowering::add_params(s);
  lowering::Body body;
  lowering::emit_program_mapping(s, body);
  // Levels outermost first: m's outer part, n, m's inner part of 4; the grid multiplies them.
  ASSERT_EQ(s.kernel.grid.size(), 3u);
  EXPECT_EQ(s.kernel.grid[0].size, "m");
  EXPECT_EQ(s.kernel.grid[0].divisor, 256);
  EXPECT_EQ(s.kernel.grid[1].size, "n");
  EXPECT_EQ(s.kernel.grid[1].divisor, 64);
  EXPECT_EQ(s.kernel.grid[2].size, "");
  EXPECT_EQ(s.kernel.grid[2].divisor, 4);
  std::string text = kir::print(body);
  // The innermost level varies fastest, and m's block joins its two parts.
  size_t pid = at(text, "pid = ");
  EXPECT_LT(pid, at(text, "mi_pid = pid % 4"));
  EXPECT_LT(at(text, "mi_pid = pid % 4"), at(text, "m_block = "));
  EXPECT_LT(at(text, "m_start = "), at(text, "m_end = tl.minimum(m_start + 64, m_size)"));
}

TEST(LowerLoops, TheFusedProductIsComputedOncePerBlockOutsideTheNLoop) {
  // l is one whole tile of the second product, so the first (over k) is hoisted out of the
  // loop over n's tiles.
  Prepared p(k2mm, "_2mm.block(m:64); _2mm.tensorize(m:0, n:64, k:32, l:0); mm.fuse_at(_2mm, m);");
  std::string text = kir::print(p.lower("_2mm").body);
  size_t first = at(text, "tl.dot(A_tile, B_tile");
  size_t n_loop = at(text, "for n_iter in");
  EXPECT_LT(first, n_loop) << text;
  EXPECT_NE(text.find("tl.dot(", n_loop), std::string::npos) << text;
}

TEST(LowerReductions, AWholeTileReducesOnceAndALoopCarriesAnAccumulator) {
  Prepared whole(kRmsNorm, "norm.block(x:1); norm.tensorize(x:0, y:0, k:0);");
  std::string text = kir::print(whole.lower("norm").body);
  EXPECT_EQ(text.find("for k_iter"), std::string::npos) << text;
  at(text, "tl.sum(");

  Prepared looped(kRmsNorm, "norm.block(x:1); norm.tensorize(x:0, y:0, k:256);");
  text = kir::print(looped.lower("norm").body);
  size_t acc = at(text, "k_acc = tl.zeros(");
  size_t loop = at(text, "for k_iter in");
  // Masked lanes add the identity.
  size_t add = at(text, "k_acc = k_acc + tl.where(");
  EXPECT_LT(acc, loop);
  EXPECT_LT(loop, add);
}

TEST(LowerDots, AnRdotOfTensorizedLabelsRunsOnTlDotElseAsAReduction) {
  Prepared on(k2mm,
              "_2mm.block(m:32); _2mm.tensorize(m:0, n:64, k:32, l:32); mm.fuse_at(_2mm, m);");
  std::string text = kir::print(on.lower("_2mm").body);
  at(text, "tl.dot(");

  Prepared off(k2mm, "_2mm.block(m:1, n:1); mm.fuse_at(_2mm, m);");
  text = kir::print(off.lower("_2mm").body);
  EXPECT_EQ(text.find("tl.dot("), std::string::npos) << text;
}

TEST(LowerDots, ATileUnder16IsAnErrorAtTheTensorizeStatement) {
  Prepared p(k2mm, "_2mm.block(m:8); _2mm.tensorize(m:0, n:64, k:32, l:32); mm.fuse_at(_2mm, m);");
  p.lower("_2mm");
  ASSERT_TRUE(p.diags.has_errors());
  EXPECT_NE(p.diags.render().find("needs tensors of at least 16"), std::string::npos)
      << p.diags.render();
  EXPECT_NE(p.diags.render().find("<schedule>:1:18:"), std::string::npos) << p.diags.render();
}

const char* kGemmEpilogue = R"(
Func out, mm;
In A, W, bias;
Var m, n;
RVar k;
mm[m, n]  = rdot(A[m, k], W[k, n], k);
out[m, n] = gelu(mm[m, n] + bias[n]);
out.compile();
)";

const char* kWarpSpecialized =
    "out.block(m:128, n:256); out.tensorize(m:0, n:0, k:64); mm.fuse_at(out, n); "
    "out.tma(A, W); out.persistent(interleaved); out.num_warps(8); ";

std::vector<std::string> bound(const std::vector<const kir::Stmt*>& stmts) {
  std::vector<std::string> names;
  for (const kir::Stmt* s : stmts)
    if (s->kind == kir::StmtKind::Assign) names.push_back(s->name);
  return names;
}

bool has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

TEST(WarpPartitions, AFusedProductSplitsIntoTheProducersAndTheConsumersParts) {
  Prepared p(kGemmEpilogue, std::string(kWarpSpecialized) + "out.warp_specialize(k)");
  kir::Kernel k = p.lower("out");
  std::string why;
  std::optional<kir::WarpPartitions> parts = kir::warp_partitions(k, why);
  ASSERT_TRUE(parts) << why;
  ASSERT_TRUE(parts->blocks);
  EXPECT_EQ(parts->blocks->name, "pid");
  EXPECT_EQ(parts->product->name, "k_iter");
  EXPECT_EQ(parts->acc, "k_acc");
  EXPECT_EQ(parts->a.tile, "A_tile");
  EXPECT_EQ(parts->b.tile, "W_tile");
  // The flags the Gluon kernel runs under: descriptors and 16-bit floats, not the device's.
  EXPECT_EQ(parts->flags, (std::vector<std::string>{"A_HALF", "A_TMA", "W_HALF", "W_TMA"}));
  // The producer needs the descriptors and the blocks' starts; the consumer the epilogue's
  // indices and masks, and neither the other's.
  std::set<std::string> offsets;
  for (const kir::Expr* load : {parts->a.load, parts->b.load})
    for (size_t i = 0; i + 1 < load->args.size(); ++i)
      kir::free_vars(*load->args[i], offsets);
  kir::Slices producer = kir::partition_slices(*parts, offsets);
  kir::Slices consumer = kir::consumer_slices(*parts);
  EXPECT_TRUE(has(bound(producer.before), "A_desc") && has(bound(producer.before), "W_desc"));
  EXPECT_TRUE(has(bound(producer.setup), "m_start") && !has(bound(producer.setup), "m_mask"));
  EXPECT_FALSE(has(bound(consumer.before), "A_desc"));
  EXPECT_TRUE(has(bound(consumer.setup), "m_mask") && has(bound(consumer.setup), "n_idx"));
}

TEST(WarpPartitions, AStagedEpilogueMovesWhatDependsOnTheChunkAndShiftsItsRanges) {
  Prepared p(kGemmEpilogue, std::string(kWarpSpecialized) + "out.warp_specialize(k, m:16)");
  kir::Kernel k = p.lower("out");
  EXPECT_EQ(k.epilogue_rows, 16);
  std::string why;
  std::optional<kir::WarpPartitions> parts = kir::warp_partitions(k, why);
  ASSERT_TRUE(parts) << why;
  EXPECT_EQ(kir::staged_columns(*parts), 128); // a 256-column tile in two parts
  std::optional<kir::StagedEpilogue> second =
      kir::stage_epilogue(*parts, 16, 1, "_dt_row", "_dt_rows", why);
  ASSERT_TRUE(second) << why;
  std::string chunk;
  for (const kir::StmtPtr& s : second->chunk)
    chunk += kir::print(*s, 0, kir::Dialect::Gluon);
  EXPECT_NE(chunk.find("m_arange = (gl.arange(0, 16)[:, None] + tl.cast(_dt_row, tl.int32))"),
            std::string::npos)
      << chunk;
  EXPECT_NE(chunk.find("n_arange = (gl.arange(0, 128)[None, :] + tl.cast(128, tl.int32))"),
            std::string::npos)
      << chunk;
  EXPECT_NE(chunk.find("k_dot = _dt_rows"), std::string::npos) << chunk;
  // What does not depend on the chunk stays in the block.
  EXPECT_TRUE(has(bound(second->setup), "m_end") && has(bound(second->setup), "m_start"));
  EXPECT_FALSE(has(bound(second->setup), "m_idx"));
}

TEST(WarpPartitions, TwoSpecializedProductsDoNotSplit) {
  Prepared p(R"(
Func c;
In A, B, D, E;
Var m, n;
RVar k;
c[m, n] = rdot(A[m, k], B[k, n], k) + rdot(D[m, k], E[k, n], k);
c.compile();
)",
             "c.block(m:128, n:128); c.tensorize(m:0, n:0, k:64); c.tma(A, B, D, E); "
             "c.warp_specialize(k)");
  std::string why;
  EXPECT_FALSE(kir::warp_partitions(p.lower("c"), why));
  EXPECT_EQ(why, "the kernel has 2 warp-specialized loops");
}

TEST(WarpPartitions, ASliceKeepsEveryBindingANeededNameDependsOn) {
  // a = 1; b = a + 1; c = 2; a = b * 2; d = a + c: d needs both bindings of a, b and c.
  kir::Type index{kir::Scalar::Index, "", {}};
  std::vector<kir::StmtPtr> owned;
  owned.push_back(kir::Stmt::assign("a", kir::int_imm(1)));
  owned.push_back(kir::Stmt::assign("b", kir::add(kir::var("a", index), kir::int_imm(1))));
  owned.push_back(kir::Stmt::assign("c", kir::int_imm(2)));
  owned.push_back(kir::Stmt::assign("e", kir::int_imm(3)));
  owned.push_back(kir::Stmt::assign("a", kir::mul(kir::var("b", index), kir::int_imm(2))));
  std::vector<const kir::Stmt*> stmts;
  for (const kir::StmtPtr& s : owned)
    stmts.push_back(s.get());
  std::set<std::string> needed{"a", "c"};
  EXPECT_EQ(bound(kir::slice(stmts, needed)), (std::vector<std::string>{"a", "b", "c", "a"}));
  EXPECT_FALSE(needed.count("e"));
}

// FlashAttention over [b, h, s, d] (templates/flash_attention.dt), its online loop specialized.
const char* kFlash = R"(Func out, qk, mx, e, s, p;
In   Q, K, V;
Var  b, h, m, n;
RVar k, l;
qk[b, h, m, l] = rdot(Q[b, h, m, k], K[b, h, l, k], k) / sqrt(len(k));
mx[b, h, m]    = rmax(qk[b, h, m, l], l);
e[b, h, m, l]  = exp(qk[b, h, m, l] - mx[b, h, m]);
s[b, h, m]     = rsum(e[b, h, m, l], l);
p[b, h, m, l]  = e[b, h, m, l] / s[b, h, m];
out[b, h, m, n] = rdot(p[b, h, m, l], V[b, h, l, n], l);
out.compile();
)";

const char* kFlashSchedule =
    "p.fuse_at(out, m); e.fuse_at(out, m); s.fuse_at(out, m); qk.fuse_at(out, m); "
    "mx.fuse_at(out, m); out.block(b:1, h:1, m:128); out.tensorize(m:0, n:0, k:0, l:64); "
    "out.map(b, h, m); out.online(l); out.tma(Q, K, V); out.warp_specialize(l); "
    "out.num_warps(8); out.num_stages(2)";

/// `kernel` after the kernel passes, in the order of Lower.cpp's kKernelPasses (the form the
/// partitions are found in).
kir::Kernel passed(kir::Kernel kernel) {
  fold_scale_constants(kernel);
  max_before_scale(kernel);
  hoist_loop_invariants(kernel);
  eliminate_common_subexpressions(kernel);
  simplify_masks(kernel);
  eliminate_dead_code(kernel);
  keep_rereads_in_cache(kernel);
  peel_partial_tiles(kernel);
  round_before_shift(kernel);
  return kernel;
}

/// The online partitions of `out`'s kernel of `source` under `schedule` (`why` where none);
/// they point into `kernel`, which this owns.
struct Partitioned {
  Partitioned(const std::string& source, const std::string& schedule)
      : prepared(source, schedule, true), kernel(passed(prepared.lower("out"))),
        parts(kir::online_partitions(kernel, why)) {}
  Prepared prepared;
  kir::Kernel kernel;
  std::string why;
  std::optional<kir::OnlinePartitions> parts;
};

TEST(OnlinePartitions, FlashAttentionSplitsIntoAProducerAndConsumers) {
  Partitioned partitioned(kFlash, kFlashSchedule);
  ASSERT_TRUE(partitioned.parts) << partitioned.why;
  const kir::OnlinePartitions* parts = &*partitioned.parts;
  ASSERT_EQ(parts->loops.size(), 1u);
  const kir::OnlinePartitions::Loop& l = parts->loops[0];
  EXPECT_EQ(parts->q->name, "Q_tile");
  EXPECT_EQ(l.k->name, "K_tile");
  EXPECT_EQ(l.v->name, "V_tile");
  EXPECT_EQ(l.v_read, "dot_V"); // the values cast to the queries' dtype
  EXPECT_EQ(parts->acc, "l_acc");
  // Values over [b, h, m, n, l, k]: rows m, keys l, the output's columns n.
  EXPECT_EQ(parts->rank_of_values, 6);
  EXPECT_EQ(parts->row_axis, 2);
  EXPECT_EQ(parts->score_axis, 4);
  EXPECT_EQ(parts->out_axis, 3);
  EXPECT_EQ(parts->rows, (kir::Extent{128, ""}));
  EXPECT_EQ(parts->score_cols, (kir::Extent{64, ""}));
  EXPECT_EQ(parts->out_cols.param, "n_TILE");
  // The producer: the descriptors and the blocks' starts; the consumer: the indices and masks
  // of the output, the running values' zeros, none of the loads or the pointer loads' masks.
  std::vector<std::string> producer = bound(parts->producer_before);
  std::vector<std::string> consumer = bound(parts->consumer_before);
  std::vector<std::string> in_loop = bound(l.consumer);
  EXPECT_TRUE(has(producer, "Q_desc") && has(producer, "K_desc") && has(producer, "m_start"));
  EXPECT_FALSE(has(producer, "m_mask") || has(producer, "l_max"));
  EXPECT_TRUE(has(consumer, "m_mask") && has(consumer, "l_max") && has(consumer, "l_acc"));
  EXPECT_FALSE(has(consumer, "Q_desc") || has(consumer, "Q_tile") || has(consumer, "m_vec_mask"));
  EXPECT_TRUE(has(in_loop, "k_dot") && has(in_loop, "l_acc") && has(in_loop, "l_max"));
  EXPECT_FALSE(has(in_loop, "K_tile") || has(in_loop, "dot_V") || has(in_loop, "l_vec_mask"));
}

TEST(OnlinePartitions, EveryValueHasTheFormOfItsAxes) {
  Partitioned partitioned(kFlash, kFlashSchedule);
  ASSERT_TRUE(partitioned.parts) << partitioned.why;
  const kir::OnlinePartitions* parts = &*partitioned.parts;
  using Kind = kir::Form::Kind;
  using Of = kir::Form::Of;
  const kir::Extent one{1, ""}, rows{128, ""}, keys{64, ""}, cols{0, "n_TILE"}, d{0, "k_TILE"};
  auto form = [&](kir::Shape shape) { return kir::form_of_shape(*parts, shape); };
  EXPECT_EQ(form({one, one, rows, one, one, one}), (kir::Form{Kind::Rows, Of::Scores}));
  EXPECT_EQ(form({one, one, one, one, keys, one}), (kir::Form{Kind::Cols, Of::Scores}));
  EXPECT_EQ(form({one, one, rows, one, keys, one}), (kir::Form{Kind::Tile, Of::Scores}));
  EXPECT_EQ(form({one, one, rows, cols, one, one}), (kir::Form{Kind::Tile, Of::Output}));
  EXPECT_EQ(form({one, one, one, one, one, one}), (kir::Form{}));
  EXPECT_EQ(form({rows, cols}), (kir::Form{Kind::Tile, Of::Output})); // the accumulator
  EXPECT_FALSE(form({one, one, rows, one, one, d}));                  // over k: the producer's
  EXPECT_FALSE(form({one, one, rows, cols, keys, one}));              // two column axes
  // Operands together: a row and a column vector make a tile; two column axes do not combine;
  // row vectors of either product do (the other is converted).
  const kir::Form r{Kind::Rows, Of::Scores}, ro{Kind::Rows, Of::Output}, co{Kind::Cols, Of::Output},
      ts{Kind::Tile, Of::Scores};
  EXPECT_EQ(kir::combine_forms(*parts, {r, co}), (kir::Form{Kind::Tile, Of::Output}));
  EXPECT_FALSE(kir::combine_forms(*parts, {ts, co}));
  EXPECT_EQ(kir::combine_forms(*parts, {r, ro}), r);
  EXPECT_EQ(kir::combine_forms(*parts, {kir::Form{}, ts}), ts);
}

TEST(OnlinePartitions, TheCausalLoopsShareOneRing) {
  std::string causal = kFlash;
  causal.replace(causal.find("rdot(Q[b, h, m, k], K[b, h, l, k], k) / sqrt(len(k))"),
                 std::string("rdot(Q[b, h, m, k], K[b, h, l, k], k) / sqrt(len(k))").size(),
                 "where(l <= m, rdot(Q[b, h, m, k], K[b, h, l, k], k) / sqrt(len(k)), -inf)");
  Partitioned partitioned(causal, kFlashSchedule);
  ASSERT_TRUE(partitioned.parts) << partitioned.why;
  const kir::OnlinePartitions* parts = &*partitioned.parts;
  ASSERT_EQ(parts->loops.size(), 2u); // before the diagonal, and the diagonal under the mask
  EXPECT_EQ(parts->loops[0].loop->name, "l_iter");
  EXPECT_EQ(parts->loops[1].loop->name, "r2_l_iter");
  EXPECT_EQ(parts->loops[1].k->name, "K_tile_2");
  EXPECT_TRUE(has(bound(parts->consumer_before), "l_diagonal"));
}

TEST(OnlinePartitions, EveryRingPipelinesTheUpdate) {
  // The update runs one step late (its product beside the next step's exponentials) at every
  // ring warp_specialize allows (2 stages or more): a consumer releases a step's keys once its
  // scores are in and its values once its update is, so the producer loads ahead of both.
  for (int stages : {2, 3, 4}) {
    std::string schedule = kFlashSchedule;
    schedule.replace(schedule.find("num_stages(2)"), 13,
                     "num_stages(" + std::to_string(stages) + ")");
    Partitioned partitioned(kFlash, schedule);
    ASSERT_TRUE(partitioned.parts) << partitioned.why;
    const kir::OnlinePartitions* parts = &*partitioned.parts;
    EXPECT_TRUE(parts->loops[0].pipelined) << stages;
  }
}

TEST(OnlinePartitions, PersistentProgramsLoopOverBlocks) {
  // persistent(...): the online loop is in the loop over blocks. What does not change from
  // block to block (the descriptors, the ranges, the scale) is the partitions' `outer`, each
  // taking what it reads; the block's starts and the running values are in the block.
  Partitioned partitioned(kFlash, std::string(kFlashSchedule) + "; out.persistent(interleaved)");
  ASSERT_TRUE(partitioned.parts) << partitioned.why;
  const kir::OnlinePartitions* parts = &*partitioned.parts;
  ASSERT_TRUE(parts->blocks);
  EXPECT_EQ(parts->blocks->name, "pid");
  ASSERT_EQ(parts->loops.size(), 1u);
  EXPECT_EQ(parts->q->name, "Q_tile");
  std::vector<std::string> producer_outer = bound(parts->producer_outer);
  std::vector<std::string> consumer_outer = bound(parts->consumer_outer);
  EXPECT_TRUE(has(producer_outer, "Q_desc") && has(producer_outer, "V_desc") &&
              has(producer_outer, "blocks") && has(producer_outer, "m_blocks"));
  EXPECT_FALSE(has(producer_outer, "m_arange") || has(producer_outer, "inverse"));
  EXPECT_TRUE(has(consumer_outer, "m_arange") && has(consumer_outer, "inverse") &&
              has(consumer_outer, "blocks"));
  EXPECT_FALSE(has(consumer_outer, "Q_desc"));
  EXPECT_TRUE(has(bound(parts->producer_before), "m_start"));
  EXPECT_TRUE(has(bound(parts->consumer_before), "l_max") &&
              has(bound(parts->consumer_before), "m_mask"));
  // Without persistent programs there is no loop over blocks and nothing before it.
  Partitioned per_block_of(kFlash, kFlashSchedule);
  ASSERT_TRUE(per_block_of.parts) << per_block_of.why;
  const kir::OnlinePartitions* per_block = &*per_block_of.parts;
  EXPECT_FALSE(per_block->blocks);
  EXPECT_TRUE(per_block->outer.empty() && per_block->consumer_outer.empty());
}

} // namespace
} // namespace dtc
