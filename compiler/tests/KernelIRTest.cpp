// The kernel IR: factories infer types and reject ill-typed operands; the printer writes Python
// with the parentheses precedence needs; the verifier; each kernel pass, IR in and IR out.
#include "kir/KernelIR.h"
#include "codegen/PythonCodegen.h"
#include "kir/CommonSubexpressions.h"
#include "kir/Dump.h"
#include "kir/EliminateDeadCode.h"
#include "kir/HoistLoopInvariants.h"
#include "kir/KirVisitor.h"
#include "kir/MaxBeforeScale.h"
#include "kir/PeelPartialTile.h"
#include "kir/RoundBeforeShift.h"
#include "kir/SimplifyMasks.h"
#include "kir/VerifyKernel.h"
#include "support/Diagnostics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

namespace dtc {
namespace {

using namespace kir;

Type scalar(Scalar s) {
  Type t;
  t.scalar = s;
  return t;
}
Type tile(Scalar s, Shape shape) {
  Type t;
  t.scalar = s;
  t.shape = std::move(shape);
  return t;
}
Type pointer(const std::string& param) {
  Type t;
  t.scalar = Scalar::Ptr;
  t.elem_of = param;
  return t;
}

/// A small kernel under construction: parameters A_ptr, A_stride0, out_ptr and n_size.
struct KernelBuilder {
  Kernel k;
  KernelBuilder() {
    k.name = "test_kernel";
    param("A_ptr", pointer("A_ptr"));
    param("A_stride0", scalar(Scalar::Int));
    param("out_ptr", pointer("out_ptr"));
    param("n_size", scalar(Scalar::Int));
  }
  void param(const std::string& name, Type t) {
    k.params.push_back({name, false, t});
    k.launch.push_back({kir::LaunchArg::Kind::Size, name, 0, 0, 1, name});
  }
  ExprPtr p(const std::string& name) {
    for (const Param& x : k.params)
      if (x.name == name) return var(name, x.type);
    throw std::runtime_error("no parameter " + name);
  }
  ExprPtr let(std::vector<StmtPtr>& body, const std::string& name, ExprPtr value) {
    Type t = value->type;
    body.push_back(Stmt::assign(name, std::move(value)));
    return var(name, t);
  }
  std::string text() const { return print(k.body); }
};

// ---- types ----------------------------------------------------------------------------------

TEST(KernelIRTypes, ArithmeticBroadcastsAndPromotes) {
  ExprPtr rows = expand(cast(arange({4, ""}), Scalar::I64), {true, false});
  ExprPtr cols = expand(cast(arange({0, "n_TILE"}), Scalar::I64), {false, true});
  ExprPtr sum = add(rows, cols);
  EXPECT_EQ(to_string(sum->type), "i64[4, n_TILE]");
  EXPECT_EQ(to_string(lt(sum, var("n", scalar(Scalar::Int)))->type), "i1[4, n_TILE]");
  Type half = tile(Scalar::Elem, {{4, ""}});
  half.elem_of = "A_ptr";
  ExprPtr x = var("x", half);
  EXPECT_EQ(to_string(load(add(var("A_ptr", pointer("A_ptr")), rows), nullptr)->type),
            "elem(A_ptr)[4, 1]");
  EXPECT_EQ(to_string(mul(x, float_imm(2.0))->type), "f32[4]");
  EXPECT_EQ(to_string(binary(BinOp::Div, int_imm(1), int_imm(2))->type), "f32");
}

TEST(KernelIRTypes, IllTypedOperandsAreInternalErrors) {
  ExprPtr a = var("a", tile(Scalar::F32, {{4, ""}}));
  ExprPtr b = var("b", tile(Scalar::F32, {{8, ""}}));
  EXPECT_THROW(add(a, b), InternalError);                          // shapes [4] and [8]
  EXPECT_THROW(binary(BinOp::And, a, a), InternalError);           // & of floats
  EXPECT_THROW(load(a, nullptr), InternalError);                   // not a pointer
  EXPECT_THROW(mul(var("p", pointer("A_ptr")), a), InternalError); // only + moves a pointer
  EXPECT_THROW(reduce(ReduceOp::Sum, a, 1), InternalError);        // no axis 1
  EXPECT_THROW(reshape(a, {{3, ""}}), InternalError);              // 4 elements into 3
  ExprPtr m = var("m", tile(Scalar::F32, {{16, ""}, {32, ""}}));
  EXPECT_THROW(dot(m, m, nullptr, ""), InternalError); // [16, 32] x [16, 32]
  EXPECT_EQ(to_string(dot(m, trans(m), nullptr, "")->type), "f32[16, 16]");
}

// ---- printing -------------------------------------------------------------------------------

TEST(KernelIRPrinter, ParenthesizesOnlyWherePrecedenceNeedsIt) {
  ExprPtr a = var("a", scalar(Scalar::F32)), b = var("b", scalar(Scalar::F32));
  ExprPtr c = var("c", scalar(Scalar::F32));
  EXPECT_EQ(print(*mul(add(a, b), c)), "(a + b) * c");
  EXPECT_EQ(print(*add(a, mul(b, c))), "a + b * c");
  EXPECT_EQ(print(*sub(a, sub(b, c))), "a - (b - c)");
  EXPECT_EQ(print(*sub(sub(a, b), c)), "a - b - c");
  EXPECT_EQ(print(*neg(add(a, b))), "-(a + b)");
  // `&` binds tighter than `<` in Python: conditions combined with & are parenthesized.
  ExprPtr ab = lt(a, b), bc = lt(b, c);
  EXPECT_EQ(print(*and_(ab, bc)), "(a < b) & (b < c)");
  EXPECT_EQ(print(*lt(lt(a, b), bc)), "(a < b) < (b < c)"); // never a chained comparison
  EXPECT_EQ(print(*cast(add(a, b), Scalar::I64)), "tl.cast(a + b, tl.int64)");
  ExprPtr t = var("t", tile(Scalar::F32, {{4, ""}}));
  EXPECT_EQ(print(*cast(add(t, a), Scalar::I64)), "(t + a).to(tl.int64)");
  EXPECT_EQ(print(*expand(add(t, a), {true, false})), "(t + a)[:, None]");
  EXPECT_EQ(print(*float_imm(-std::numeric_limits<double>::infinity())), "float(\"-inf\")");
  EXPECT_EQ(print(*full({{4, ""}, {0, "n_TILE"}}, 0.0)), "tl.zeros([4, n_TILE], tl.float32)");
  EXPECT_EQ(print(*reduce(ReduceOp::Sum, t, 0)), "tl.sum(t, axis=0, keep_dims=True)");
}

// tl.maximum, tl.max and tl.atomic_max skip NaN on the GPU; kernel IR's maxima and minima are
// torch's, NaN where an operand is NaN, and print as such.
TEST(KernelIRPrinter, MaximaAndMinimaPropagateNaN) {
  ExprPtr a = var("a", scalar(Scalar::F32)), t = var("t", tile(Scalar::F32, {{4, ""}}));
  EXPECT_EQ(print(*maximum(t, a)), "tl.maximum(t, a, propagate_nan=tl.PropagateNan.ALL)");
  EXPECT_EQ(print(*minimum(a, float_imm(0.0))),
            "tl.minimum(a, 0.0, propagate_nan=tl.PropagateNan.ALL)");
  // Integers have no NaN: a block's end stays a plain tl.minimum.
  ExprPtr i = var("i", scalar(Scalar::Int));
  EXPECT_EQ(print(*minimum(add(i, int_imm(4)), i)), "tl.minimum(i + 4, i)");
  EXPECT_THROW(maximum(lt(a, a), a), InternalError);
  EXPECT_EQ(print(*reduce(ReduceOp::Max, t, 0)), "_dt_max(t, axis=0)");
  EXPECT_EQ(print(*reduce(ReduceOp::Min, t, 0)), "_dt_min(t, axis=0)");

  KernelBuilder b;
  ExprPtr idx = b.let(b.k.body, "idx", cast(arange({8, ""}), Scalar::I64));
  ExprPtr mask = b.let(b.k.body, "mask", lt(idx, b.p("n_size")));
  ExprPtr v = b.let(b.k.body, "v", load(add(b.p("A_ptr"), idx), mask));
  b.k.body.push_back(Stmt::assign("m", reduce(ReduceOp::Min, v, 0)));
  StmtPtr store = Stmt::store(add(b.p("out_ptr"), idx), v, mask);
  store->atomic = Atomic::Max;
  b.k.body.push_back(std::move(store));
  EXPECT_EQ(print(b.k.body).substr(print(b.k.body).rfind("_dt_atomic_max")),
            "_dt_atomic_max(out_ptr + idx, v, mask)\n");
  // The module carries the helpers that the printed kernel calls, and their source.
  EXPECT_EQ(kernel_helpers(b.k), (std::set<std::string>{"_dt_atomic_max", "_dt_min"}));
  EXPECT_NE(kernel_helper_source("_dt_atomic_max").find("def _dt_atomic_max(ptr, v, mask):"),
            std::string::npos);
}

// ---- verifier -------------------------------------------------------------------------------

TEST(VerifyKernel, AcceptsAWellFormedKernel) {
  KernelBuilder b;
  ExprPtr idx = b.let(b.k.body, "idx", cast(arange({8, ""}), Scalar::I64));
  ExprPtr mask = b.let(b.k.body, "mask", lt(idx, b.p("n_size")));
  ExprPtr v = b.let(b.k.body, "v", load(add(b.p("A_ptr"), mul(idx, b.p("A_stride0"))), mask));
  b.k.body.push_back(Stmt::store(add(b.p("out_ptr"), idx), v, mask));
  EXPECT_NO_THROW(verify_kernel(b.k));
}

TEST(VerifyKernel, RejectsAReadBeforeItsBinding) {
  KernelBuilder b;
  b.k.body.push_back(Stmt::assign("v", add(var("w", scalar(Scalar::F32)), float_imm(1.0))));
  EXPECT_THROW(verify_kernel(b.k), InternalError);
}

TEST(VerifyKernel, RejectsAnUnmaskedTileAccess) {
  KernelBuilder b;
  ExprPtr idx = b.let(b.k.body, "idx", cast(arange({8, ""}), Scalar::I64));
  b.k.body.push_back(Stmt::assign("v", load(add(b.p("A_ptr"), idx), nullptr)));
  EXPECT_THROW(verify_kernel(b.k), InternalError);
}

TEST(VerifyKernel, RejectsALoopCarriedNameThatChangesType) {
  // Triton fails to compile it: a name bound before a loop is carried through the loop.
  KernelBuilder b;
  b.let(b.k.body, "acc", float_imm(0.0));
  StmtPtr loop = Stmt::loop("i", int_imm(0), b.p("n_size"), int_imm(1));
  loop->body.push_back(Stmt::assign("acc", full({{4, ""}}, 0.0)));
  b.k.body.push_back(std::move(loop));
  try {
    verify_kernel(b.k, "a test");
    FAIL() << "accepted";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("after a test: acc bound as f32 before a loop"),
              std::string::npos)
        << e.what();
  }
}

TEST(VerifyKernel, RejectsAssigningAParameterAndAZeroStep) {
  KernelBuilder b;
  b.k.body.push_back(Stmt::assign("n_size", int_imm(3)));
  EXPECT_THROW(verify_kernel(b.k), InternalError);
  KernelBuilder c;
  c.k.body.push_back(Stmt::loop("i", int_imm(0), c.p("n_size"), int_imm(0)));
  EXPECT_THROW(verify_kernel(c.k), InternalError);
}

// ---- common subexpressions ------------------------------------------------------------------

TEST(CommonSubexpressions, NamesAValueComputedTwiceInOneBlock) {
  // The softmax of one row held whole: tl.exp(A) in the sum and in the quotient.
  KernelBuilder b;
  auto& body = b.k.body;
  ExprPtr idx = b.let(body, "idx", cast(arange({8, ""}), Scalar::I64));
  ExprPtr mask = b.let(body, "mask", lt(idx, b.p("n_size")));
  ExprPtr a = b.let(body, "A",
                    cast(load(add(b.p("A_ptr"), mul(idx, b.p("A_stride0"))), mask), Scalar::F32));
  ExprPtr s = b.let(
      body, "s", reduce(ReduceOp::Sum, select(mask, call(Intrinsic::Exp, {a}), float_imm(0.0)), 0));
  ExprPtr q = b.let(body, "q", binary(BinOp::Div, call(Intrinsic::Exp, {a}), s));
  body.push_back(Stmt::store(add(b.p("out_ptr"), idx), q, mask));
  eliminate_common_subexpressions(b.k);
  verify_kernel(b.k, "common subexpressions");
  EXPECT_EQ(b.text(), "idx = tl.arange(0, 8).to(tl.int64)\n"
                      "mask = idx < n_size\n"
                      "A = tl.load(A_ptr + idx * A_stride0, mask=mask, other=0.0).to(tl.float32)\n"
                      "exp_A = tl.exp(A)\n"
                      "s = tl.sum(tl.where(mask, exp_A, 0.0), axis=0, keep_dims=True)\n"
                      "q = exp_A / s\n"
                      "tl.store(out_ptr + idx, q, mask=mask)\n");
}

TEST(CommonSubexpressions, AValueContainingOneJustNamedIsStillFound) {
  // (e + e * y) * (e + e * y) with e = tl.exp(x): naming e rewrites the second sum, which must
  // still match the first (its product, met first, is named on the way).
  KernelBuilder b;
  auto& body = b.k.body;
  ExprPtr x = b.let(body, "x", cast(b.p("n_size"), Scalar::F32));
  ExprPtr y = b.let(body, "y", add(x, float_imm(2.0)));
  auto sum = [&] {
    ExprPtr e = call(Intrinsic::Exp, {x});
    return add(e, mul(call(Intrinsic::Exp, {x}), y));
  };
  b.let(body, "z", mul(sum(), sum()));
  eliminate_common_subexpressions(b.k);
  verify_kernel(b.k, "common subexpressions");
  EXPECT_EQ(b.text(), "x = tl.cast(n_size, tl.float32)\n"
                      "y = x + 2.0\n"
                      "exp_x = tl.exp(x)\n"
                      "cse = exp_x * y\n"
                      "cse_2 = exp_x + cse\n"
                      "z = cse_2 * cse_2\n");
}

TEST(CommonSubexpressions, DropsARebindingToTheSameValue) {
  KernelBuilder b;
  auto& body = b.k.body;
  ExprPtr idx = b.let(body, "idx", cast(arange({8, ""}), Scalar::I64));
  b.let(body, "mask", lt(idx, b.p("n_size")));
  ExprPtr mask = b.let(body, "mask", lt(idx, b.p("n_size")));
  body.push_back(Stmt::store(add(b.p("out_ptr"), idx), float_imm(1.0), mask));
  eliminate_common_subexpressions(b.k);
  verify_kernel(b.k);
  EXPECT_EQ(b.text(), "idx = tl.arange(0, 8).to(tl.int64)\n"
                      "mask = idx < n_size\n"
                      "tl.store(out_ptr + idx, 1.0, mask=mask)\n");
}

// A mutator that overrides only calls: exp becomes exp2, every other node is kept as it is,
// shared, and statements it replaces come out in order.
TEST(KirMutator, RewritesOnlyWhatItOverridesAndSharesTheRest) {
  struct ExpToExp2 : KirMutator {
    using KirMutator::mutate;
    ExprPtr mutate(const ExprPtr& e) override {
      ExprPtr m = KirMutator::mutate(e);
      return m->kind == ExprKind::Call && m->fn == Intrinsic::Exp
                 ? call(Intrinsic::Exp2, {m->args[0]})
                 : m;
    }
    std::vector<StmtPtr> mutate(StmtPtr s) override {
      std::vector<StmtPtr> out = KirMutator::mutate(std::move(s));
      if (out.front()->kind == StmtKind::Store) out.insert(out.begin(), Stmt::comment("store"));
      return out;
    }
  };
  KernelBuilder b;
  auto& body = b.k.body;
  ExprPtr x = b.let(body, "x", cast(b.p("n_size"), Scalar::F32));
  ExprPtr untouched = add(x, float_imm(1.0));
  b.let(body, "u", untouched);
  b.let(body, "y", mul(call(Intrinsic::Exp, {x}), x));
  StmtPtr loop = Stmt::loop("i", int_imm(0), b.p("n_size"), int_imm(1));
  loop->body.push_back(Stmt::store(b.p("out_ptr"), call(Intrinsic::Exp, {x}), nullptr));
  body.push_back(std::move(loop));
  ExpToExp2().mutate(body);
  verify_kernel(b.k);
  EXPECT_EQ(body[1]->value, untouched); // nothing changed below it: the same node
  EXPECT_EQ(dump(body), "x: f32 = cast<f32>(n_size)\n"
                        "u: f32 = x + 1.0\n"
                        "y: f32 = exp2(x) * x\n"
                        "for i in range(0, n_size, 1):\n"
                        "  // store\n"
                        "  store(out_ptr, exp2(x))\n");
  struct Calls : KirVisitor {
    using KirVisitor::visit;
    int calls = 0;
    void visit(const Expr& e) override {
      calls += e.kind == ExprKind::Call;
      KirVisitor::visit(e);
    }
  } calls;
  calls.visit(body);
  EXPECT_EQ(calls.calls, 2);
}

TEST(CommonSubexpressions, KeepsAValueWhoseOperandWasBoundAgain) {
  KernelBuilder b;
  auto& body = b.k.body;
  ExprPtr n = b.p("n_size");
  ExprPtr x = b.let(body, "x", cast(n, Scalar::F32));
  b.let(body, "y", call(Intrinsic::Exp, {x}));
  x = b.let(body, "x", add(x, float_imm(1.0)));
  b.let(body, "z", call(Intrinsic::Exp, {x}));
  std::string before = b.text();
  eliminate_common_subexpressions(b.k);
  EXPECT_EQ(b.text(), before);
}

TEST(CommonSubexpressions, ALoadIsNotReusedAcrossAStoreOrIntoALoopThatStores) {
  KernelBuilder b;
  auto& body = b.k.body;
  ExprPtr addr = b.p("A_ptr");
  b.let(body, "u", load(addr, nullptr));
  body.push_back(Stmt::store(b.p("A_ptr"), float_imm(0.0), nullptr));
  b.let(body, "w", load(addr, nullptr));
  StmtPtr loop = Stmt::loop("i", int_imm(0), b.p("n_size"), int_imm(1));
  loop->body.push_back(Stmt::assign("r", load(addr, nullptr)));
  loop->body.push_back(Stmt::store(b.p("A_ptr"), float_imm(0.0), nullptr));
  body.push_back(std::move(loop));
  std::string before = b.text();
  eliminate_common_subexpressions(b.k);
  EXPECT_EQ(b.text(), before);
}

TEST(CommonSubexpressions, AValueNamedBeforeALoopIsReusedInsideIt) {
  KernelBuilder b;
  auto& body = b.k.body;
  ExprPtr n = b.let(body, "n", cast(b.p("n_size"), Scalar::F32));
  b.let(body, "r", call(Intrinsic::Sqrt, {n}));
  StmtPtr loop = Stmt::loop("i", int_imm(0), b.p("n_size"), int_imm(1));
  loop->body.push_back(
      Stmt::assign("v", binary(BinOp::Div, cast(var("i", scalar(Scalar::Int)), Scalar::F32),
                               call(Intrinsic::Sqrt, {n}))));
  body.push_back(std::move(loop));
  eliminate_common_subexpressions(b.k);
  verify_kernel(b.k);
  EXPECT_EQ(b.text(), "n = tl.cast(n_size, tl.float32)\n"
                      "r = tl.sqrt(n)\n"
                      "for i in range(0, n_size, 1):\n"
                      "    v = tl.cast(i, tl.float32) / r\n");
}

// ---- loop-invariant code motion -------------------------------------------------------------

TEST(HoistLoopInvariants, MovesValuesTheLoopDoesNotChangeOutOfNestedLoops) {
  KernelBuilder b;
  auto& body = b.k.body;
  ExprPtr n = b.p("n_size");
  StmtPtr outer = Stmt::loop("i", int_imm(0), n, int_imm(1));
  StmtPtr inner = Stmt::loop("j", int_imm(0), n, int_imm(1));
  ExprPtr i = var("i", scalar(Scalar::Int)), j = var("j", scalar(Scalar::Int));
  // s depends on nothing of either loop, t on i only, u on j.
  inner->body.push_back(Stmt::assign("s", call(Intrinsic::Sqrt, {cast(n, Scalar::F32)})));
  inner->body.push_back(
      Stmt::assign("t", mul(var("s", scalar(Scalar::F32)), cast(i, Scalar::F32))));
  inner->body.push_back(
      Stmt::assign("u", add(var("t", scalar(Scalar::F32)), cast(j, Scalar::F32))));
  inner->body.push_back(
      Stmt::store(add(b.p("out_ptr"), j), var("u", scalar(Scalar::F32)), nullptr));
  outer->body.push_back(std::move(inner));
  body.push_back(std::move(outer));
  hoist_loop_invariants(b.k);
  verify_kernel(b.k, "loop-invariant code motion");
  EXPECT_EQ(b.text(), "s = tl.sqrt(tl.cast(n_size, tl.float32))\n"
                      "for i in range(0, n_size, 1):\n"
                      "    t = s * tl.cast(i, tl.float32)\n"
                      "    for j in range(0, n_size, 1):\n"
                      "        u = t + tl.cast(j, tl.float32)\n"
                      "        tl.store(out_ptr + j, u)\n");
}

TEST(HoistLoopInvariants, ALoadStaysWhenTheLoopStoresThroughItsPointerOrHasABarrier) {
  for (std::string stored : {"A_ptr", "barrier", "out_ptr"}) {
    KernelBuilder b;
    StmtPtr loop = Stmt::loop("i", int_imm(0), b.p("n_size"), int_imm(1));
    ExprPtr value = load(b.p("A_ptr"), nullptr);
    loop->body.push_back(Stmt::assign("v", value));
    if (stored == "barrier")
      loop->body.push_back(Stmt::barrier());
    else
      loop->body.push_back(Stmt::store(b.p(stored), var("v", value->type), nullptr));
    b.k.body.push_back(std::move(loop));
    hoist_loop_invariants(b.k);
    verify_kernel(b.k);
    bool moved = b.k.body.front()->kind == StmtKind::Assign;
    EXPECT_EQ(moved, stored == "out_ptr") << stored << ":\n" << b.text();
  }
}

TEST(HoistLoopInvariants, ANameBoundTwiceStays) {
  // The accumulator's update reads only itself, but it is carried: it must stay in the loop.
  KernelBuilder b;
  b.let(b.k.body, "acc", float_imm(0.0));
  StmtPtr loop = Stmt::loop("i", int_imm(0), b.p("n_size"), int_imm(1));
  loop->body.push_back(Stmt::assign("acc", add(var("acc", scalar(Scalar::F32)), float_imm(1.0))));
  b.k.body.push_back(std::move(loop));
  b.k.body.push_back(Stmt::store(b.p("out_ptr"), var("acc", scalar(Scalar::F32)), nullptr));
  std::string before = b.text();
  hoist_loop_invariants(b.k);
  EXPECT_EQ(b.text(), before);
}

// ---- mask simplification -------------------------------------------------------------------

/// idx, mask = idx < n_size, and A loaded under `mask & row` (row a second condition).
struct MaskedLoad {
  KernelBuilder b;
  ExprPtr idx, mask, row, a;
  MaskedLoad() {
    auto& body = b.k.body;
    idx = b.let(body, "idx", cast(arange({8, ""}), Scalar::I64));
    mask = b.let(body, "mask", lt(idx, b.p("n_size")));
    row = b.let(body, "row", lt(cast(b.p("A_stride0"), Scalar::I64), b.p("n_size")));
    a = b.let(body, "A", cast(load(add(b.p("A_ptr"), idx), and_(row, mask)), Scalar::F32));
  }
  std::string sum_of(ExprPtr cond, double fill) {
    b.let(b.k.body, "s", reduce(ReduceOp::Sum, select(cond, mul(a, a), float_imm(fill)), 0));
    simplify_masks(b.k);
    verify_kernel(b.k, "mask simplification");
    return print(*b.k.body.back()->value);
  }
};

TEST(SimplifyMasks, DropsAWhereThatTheLoadsMaskAlreadyImplies) {
  MaskedLoad m;
  EXPECT_EQ(m.sum_of(m.mask, 0.0), "tl.sum(A * A, axis=0, keep_dims=True)");
}

TEST(SimplifyMasks, KeepsAWhereOfAnotherConditionOrAnotherFill) {
  MaskedLoad other;
  ExprPtr elsewhere = other.b.let(other.b.k.body, "half", lt(other.idx, int_imm(4)));
  EXPECT_EQ(other.sum_of(elsewhere, 0.0),
            "tl.sum(tl.where(half, A * A, 0.0), axis=0, keep_dims=True)");
  MaskedLoad max;
  EXPECT_EQ(max.sum_of(max.mask, -1.0),
            "tl.sum(tl.where(mask, A * A, -1.0), axis=0, keep_dims=True)");
}

TEST(SimplifyMasks, KeepsAWhereWhoseConditionWasBoundAgain) {
  MaskedLoad m;
  ExprPtr again = m.b.let(m.b.k.body, "mask", lt(m.idx, int_imm(3)));
  EXPECT_EQ(m.sum_of(again, 0.0), "tl.sum(tl.where(mask, A * A, 0.0), axis=0, keep_dims=True)");
}

TEST(SimplifyMasks, AConjunctionRepeatsNoCondition) {
  MaskedLoad m;
  m.b.k.body.push_back(
      Stmt::store(add(m.b.p("out_ptr"), m.idx), m.a, and_(and_(m.mask, m.row), m.mask)));
  simplify_masks(m.b.k);
  EXPECT_EQ(print(*m.b.k.body.back()->mask), "mask & row");
}

// ---- the partial tile peeled ------------------------------------------------------------------

/// for i in range(0, n_size, 8): idx = i + r; mask = idx < n_size; A = load(A_ptr + idx, mask
/// [& row]); acc = acc + VALUE(mask, A), row a scalar condition, r = arange(8).
struct TiledLoop {
  KernelBuilder b;
  ExprPtr r, row;
  std::vector<StmtPtr>* body = nullptr;
  ExprPtr idx, mask, a;
  TiledLoop(bool with_row) {
    auto& k = b.k.body;
    r = b.let(k, "r", cast(arange({8, ""}), Scalar::I64));
    row = b.let(k, "row", lt(cast(b.p("A_stride0"), Scalar::I64), b.p("n_size")));
    b.let(k, "acc", full({{8, ""}}, 0.0));
    StmtPtr loop = Stmt::loop("i", int_imm(0), b.p("n_size"), int_imm(8));
    body = &loop->body;
    k.push_back(std::move(loop));
    idx = b.let(*body, "idx", add(var("i", b.p("n_size")->type), r));
    mask = b.let(*body, "mask", lt(idx, b.p("n_size")));
    ExprPtr cond = with_row ? b.let(*body, "both", and_(row, mask)) : mask;
    a = b.let(*body, "A", cast(load(add(b.p("A_ptr"), idx), cond), Scalar::F32));
  }
  std::string peeled(ExprPtr summand) {
    body->push_back(Stmt::assign("acc", add(var("acc", tile(Scalar::F32, {{8, ""}})), summand)));
    peel_partial_tiles(b.k);
    verify_kernel(b.k, "peel");
    return b.text();
  }
};

TEST(PeelPartialTile, RunsTheWholeTilesWithoutTheMask) {
  TiledLoop t(false);
  std::string text = t.peeled(select(t.mask, add(t.a, float_imm(1.0)), float_imm(0.0)));
  EXPECT_NE(text.find("i_full = n_size // 8 * 8\n"
                      "for i in range(0, i_full, 8):\n"
                      "    idx = i + r\n"
                      "    A = tl.load(A_ptr + idx).to(tl.float32)\n"
                      "    acc = acc + (A + 1.0)\n"
                      "for i in range(i_full, n_size, 8):\n"
                      "    idx = i + r\n"
                      "    mask = idx < n_size\n"),
            std::string::npos)
      << text;
}

TEST(PeelPartialTile, ANarrowerConditionReadOtherThanAsAMaskKeepsTheLoop) {
  // both = row & mask would be row, a scalar, where the select takes its shape from it.
  TiledLoop t(true);
  ExprPtr both = var("both", t.mask->type);
  std::string text = t.peeled(select(both, t.a, float_imm(0.0)));
  EXPECT_EQ(text.find("_full"), std::string::npos) << text;
}

TEST(PeelPartialTile, ANarrowerMaskOfLoadsIsRenamed) {
  TiledLoop t(true);
  std::string text = t.peeled(t.a);
  EXPECT_NE(text.find("for i in range(0, i_full, 8):\n"
                      "    idx = i + r\n"
                      "    A = tl.load(A_ptr + idx, mask=row, other=0.0).to(tl.float32)\n"),
            std::string::npos)
      << text;
}

TEST(PeelPartialTile, AMaskReadAfterTheLoopKeepsIt) {
  TiledLoop t(false);
  t.b.k.body.push_back(Stmt::store(add(t.b.p("out_ptr"), t.r), t.a, t.mask));
  std::string text = t.peeled(t.a);
  EXPECT_EQ(text.find("_full"), std::string::npos) << text;
}

// ---- dead code ------------------------------------------------------------------------------

TEST(EliminateDeadCode, RemovesUnreadNamesAndEmptyLoopsButNotStores) {
  KernelBuilder b;
  auto& body = b.k.body;
  b.let(body, "unused", cast(b.p("n_size"), Scalar::F32));
  b.let(body, "acc", float_imm(0.0));
  StmtPtr loop = Stmt::loop("i", int_imm(0), b.p("n_size"), int_imm(1));
  // An accumulator only its own update reads is dead, and so is the loop left empty.
  loop->body.push_back(Stmt::assign("acc", add(var("acc", scalar(Scalar::F32)), float_imm(1.0))));
  body.push_back(std::move(loop));
  body.push_back(Stmt::store(b.p("out_ptr"), float_imm(2.0), nullptr));
  eliminate_dead_code(b.k);
  verify_kernel(b.k);
  EXPECT_EQ(b.text(), "tl.store(out_ptr, 2.0)\n");
}

// ---- the row maximum before the scale -------------------------------------------------------

/// `m = max(<tile> over axis 0)` of the loaded tile A (float32 [8]) with scale forms, after the
/// pass: the maximum's text.
std::string max_of(const std::function<ExprPtr(MaskedLoad&)>& tile) {
  MaskedLoad m;
  m.b.let(m.b.k.body, "m", reduce(ReduceOp::Max, tile(m), 0));
  max_before_scale(m.b.k);
  verify_kernel(m.b.k, "the row maximum before the scale");
  return print(*m.b.k.body.back()->value);
}

TEST(MaxBeforeScale, APositiveScaleMovesOutOfTheMaximum) {
  EXPECT_EQ(max_of([](MaskedLoad& m) { return mul(m.a, float_imm(0.5)); }),
            "_dt_max(A, axis=0) * 0.5");
  EXPECT_EQ(max_of([](MaskedLoad& m) {
              return select(m.mask, mul(float_imm(2.0), m.a), float_imm(-INFINITY));
            }),
            "_dt_max(tl.where(mask, A, float(\"-inf\")), axis=0) * 2.0");
}

TEST(MaxBeforeScale, AScaleThatMayBeNegativeOrInfiniteStays) {
  // Negative: the maximum would become the minimum. 1/sqrt(n) of a tile that is not a product
  // over n: +inf for n = 0, where max(A * inf) is NaN for a row with a 0 but max(A) * inf not.
  // A fill other than -inf: max(where(c, A * s, 0)) is not max(where(c, A, 0)) * s.
  for (auto tile : std::vector<std::function<ExprPtr(MaskedLoad&)>>{
           [](MaskedLoad& m) { return mul(m.a, float_imm(-2.0)); },
           [](MaskedLoad& m) { return mul(m.a, float_imm(INFINITY)); },
           [](MaskedLoad& m) {
             return mul(m.a, call(Intrinsic::DivRn,
                                  {float_imm(1.0),
                                   call(Intrinsic::Sqrt, {cast(m.b.p("n_size"), Scalar::F32)})}));
           },
           [](MaskedLoad& m) { return select(m.mask, mul(m.a, float_imm(0.5)), float_imm(0.0)); },
       }) {
    std::string text = max_of(tile);
    EXPECT_EQ(text.find("_dt_max(A,"), std::string::npos) << text;
    EXPECT_EQ(text.find("_dt_max(tl.where(mask, A,"), std::string::npos) << text;
  }
}

TEST(MaxBeforeScale, OneOverTheRootOfAProductsLengthMovesOutAndANameBoundTwiceIsNotFollowed) {
  // t = dot(X, Y) over k (X [8, k_TILE]), s = 1 / sqrt(k_size): s is +inf only for an empty k,
  // where every product is 0 and both forms give NaN.
  for (bool twice : {false, true}) {
    KernelBuilder b;
    b.param("k_size", scalar(Scalar::Int));
    Type tile_param = scalar(Scalar::Int);
    b.k.params.push_back({"k_TILE", true, tile_param});
    auto& body = b.k.body;
    ExprPtr x = b.let(body, "X", full({{8, ""}, {0, "k_TILE"}}, 1.0));
    ExprPtr y = b.let(body, "Y", full({{0, "k_TILE"}, {8, ""}}, 1.0));
    ExprPtr t = b.let(body, "t", dot(x, y, nullptr, ""));
    ExprPtr s =
        b.let(body, "s",
              call(Intrinsic::DivRn,
                   {float_imm(1.0), call(Intrinsic::Sqrt, {cast(b.p("k_size"), Scalar::F32)})}));
    if (twice) b.let(body, "s", s);
    b.let(body, "m", reduce(ReduceOp::Max, mul(t, mul(s, float_imm(1.4426950408889634))), 1));
    max_before_scale(b.k);
    EXPECT_EQ(print(*b.k.body.back()->value),
              twice ? "_dt_max(t * (s * 1.4426950408889634), axis=1)"
                    : "_dt_max(t, axis=1) * (s * 1.4426950408889634)");
  }
}

// ---- products rounded before a maximum is subtracted ----------------------------------------

TEST(RoundBeforeShift, AProductShiftedByAMaximumIsRoundedOnItsOwn) {
  // y = A * 0.5, e = exp(y - maximum(mx2, -1)): y is rounded on its own, in its binding; the
  // maximum is not entered (mx2 keeps its product). f = exp(A * 0.25 - mx), mx = max(A) * 0.5
  // (the maximum of a row in one tile, after maxfirst): both sides are rounded, or the compiler
  // would fuse the maximum's product instead. A subtraction of no maximum keeps its products.
  MaskedLoad m;
  auto& body = m.b.k.body;
  ExprPtr y = m.b.let(body, "y", mul(m.a, float_imm(0.5)));
  ExprPtr mx = m.b.let(body, "mx", mul(reduce(ReduceOp::Max, m.a, 0), float_imm(0.5)));
  ExprPtr mx2 = m.b.let(body, "mx2", mul(reduce(ReduceOp::Max, m.a, 0), float_imm(0.5)));
  ExprPtr shifted = m.b.let(body, "shifted", maximum(mx2, float_imm(-1.0))); // through names
  m.b.let(body, "e", call(Intrinsic::Exp, {sub(y, shifted)}));
  m.b.let(body, "f", call(Intrinsic::Exp, {sub(mul(m.a, float_imm(0.25)), mx)}));
  m.b.let(body, "g", sub(mul(m.a, float_imm(3.0)), m.a));
  // Through a mask's select of -inf around the product (a causal mask's scores).
  ExprPtr z = m.b.let(body, "z", mul(m.a, float_imm(2.0)));
  m.b.let(body, "h", sub(select(m.mask, z, float_imm(-INFINITY)), shifted));
  round_before_shift(m.b.k);
  verify_kernel(m.b.k, "products rounded before a maximum is subtracted");
  const std::string text = m.b.text();
  EXPECT_NE(text.find("y = _dt_mul_rn(A, 0.5)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("mx = _dt_mul_rn(_dt_max(A, axis=0), 0.5)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("mx2 = _dt_max(A, axis=0) * 0.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("f = tl.exp(_dt_mul_rn(A, 0.25) - mx)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("g = A * 3.0 - A\n"), std::string::npos) << text;
  EXPECT_NE(text.find("z = _dt_mul_rn(A, 2.0)\n"), std::string::npos) << text;
}

TEST(RoundBeforeShift, AnExponentialOfAShiftByAValueFromMemory) {
  // exp2(A * 0.125 - c), c not computed here (another kernel's maximum, loaded): the product is
  // rounded; the same subtraction outside an exponential keeps it.
  MaskedLoad m;
  auto& body = m.b.k.body;
  ExprPtr c = m.b.let(body, "c", cast(m.b.p("n_size"), Scalar::F32));
  ExprPtr arg = m.b.let(body, "arg", sub(mul(m.a, float_imm(0.125)), c));
  m.b.let(body, "e", call(Intrinsic::Exp2, {arg}));
  m.b.let(body, "w", sub(mul(m.a, float_imm(0.375)), c));
  round_before_shift(m.b.k);
  verify_kernel(m.b.k, "products rounded before a maximum is subtracted");
  const std::string text = m.b.text();
  EXPECT_NE(text.find("arg = _dt_mul_rn(A, 0.125) - c\n"), std::string::npos) << text;
  EXPECT_NE(text.find("w = A * 0.375 - c\n"), std::string::npos) << text;
}

TEST(RoundBeforeShift, ALoopCarriedMaximumIsFollowed) {
  // The online loop's form: the running maximum is carried by the loop and read through a
  // select before the subtraction.
  MaskedLoad m;
  auto& body = m.b.k.body;
  ExprPtr run = m.b.let(body, "run", full({{1, ""}}, -INFINITY));
  StmtPtr loop = Stmt::loop("i", int_imm(0), m.b.p("n_size"), int_imm(8));
  ExprPtr scores = m.b.let(loop->body, "scores", mul(m.a, float_imm(0.125)));
  ExprPtr next = m.b.let(loop->body, "next", maximum(run, reduce(ReduceOp::Max, scores, 0)));
  ExprPtr safe =
      m.b.let(loop->body, "safe", select(lt(next, float_imm(0.0)), float_imm(0.0), next));
  m.b.let(loop->body, "p", call(Intrinsic::Exp2, {sub(scores, safe)}));
  loop->body.push_back(Stmt::assign("run", next));
  body.push_back(std::move(loop));
  round_before_shift(m.b.k);
  verify_kernel(m.b.k, "products rounded before a maximum is subtracted");
  EXPECT_NE(m.b.text().find("scores = _dt_mul_rn(A, 0.125)\n"), std::string::npos) << m.b.text();
}

} // namespace
} // namespace dtc
