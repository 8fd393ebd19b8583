// The stages of lowering one Func (lower/LowerState.h), each run on its own: a program and a
// schedule in, the stage's output out.
#include "Pipeline.h"
#include "kir/WarpPartitions.h"
#include "lower/InlineFused.h"
#include "lower/LowerFunc.h"
#include "lower/LowerState.h"
#include "lower/SplitReductions.h"

#include <gtest/gtest.h>

namespace dtc {
namespace {

using lowering::LowerState;

/// A program with `schedule` applied (replacing the file's), fused and split, ready to lower.
struct Prepared {
  Prepared(const std::string& source, const std::string& schedule)
      : diags("test.dt", source), front(run_frontend(source, diags)) {
    EXPECT_TRUE(front) << diags.render();
    Schedule written;
    apply_schedule(replacement_schedule(front->ast, schedule, diags), front->program, written,
                   diags);
    plan = std::make_unique<KernelPlan>(written);
    py = std::make_unique<PythonNames>(front->program);
    inline_fused_funcs(front->program, *plan, diags);
    split_reductions(front->program, *plan, *py, diags);
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

} // namespace
} // namespace dtc
