#pragma once
// The kernel IR: a Triton kernel as a tree of statements over Python expressions, plus what the
// wrapper needs to launch it. Lowering (LowerFunc.h) builds it from the algorithm IR and a
// schedule; VerifyKernel checks it; PythonCodegen prints it.
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace dtc::kir {

enum class StmtKind { Assign, For, Store, Comment, Expr };

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;

struct Stmt {
  StmtKind kind;
  // Assign: target = value. Store: tl.store(target, value, mask=mask), or with `atomic` set
  // (add, max, min) tl.atomic_<atomic>(target, value, mask=mask). Comment: value.
  std::string target, value, mask, atomic;
  // For: for var in range(lo, hi, step): body
  std::string var, lo, hi, step;
  std::vector<StmtPtr> body;

  static StmtPtr assign(std::string target, std::string value) {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::Assign;
    s->target = std::move(target);
    s->value = std::move(value);
    return s;
  }
  static StmtPtr store(std::string ptr, std::string value, std::string mask) {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::Store;
    s->target = std::move(ptr);
    s->value = std::move(value);
    s->mask = std::move(mask);
    return s;
  }
  static StmtPtr expr(std::string text) {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::Expr;
    s->value = std::move(text);
    return s;
  }
  static StmtPtr comment(std::string text) {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::Comment;
    s->value = std::move(text);
    return s;
  }
  static StmtPtr loop(std::string var, std::string lo, std::string hi, std::string step) {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::For;
    s->var = std::move(var);
    s->lo = std::move(lo);
    s->hi = std::move(hi);
    s->step = std::move(step);
    return s;
  }
};

struct Param {
  std::string name;
  bool is_constexpr = false;
};

/// How the wrapper passes one kernel argument: a Python expression over the wrapper's locals.
struct LaunchArg {
  std::string param;
  std::string value;
  /// For a stride (`value` is `tensor.stride(axis)`): the tensor and its rank, so the printer
  /// can pass all of a tensor's strides at once.
  std::string tensor;
  size_t axis = 0, rank = 0;
};

struct Kernel {
  std::string name; // e.g. relu_out_kernel
  std::string doc;  // one-line summary for a comment above the kernel
  std::vector<Param> params;
  std::vector<StmtPtr> body;
  std::vector<LaunchArg> launch; // one per param, same order
  std::string grid;              // Python expression for the 1-D grid size
  int num_warps = 4;
  int num_stages = 3;
  std::set<std::string> helpers; // @triton.jit helpers the body calls
  /// For a kernel that combines into its output with atomics: the output's initial value
  /// ("0.0", "float(\"-inf\")", ...); the wrapper allocates it in float32 filled with that.
  std::string output_init;
  /// "tf32", "tf32x3" or "ieee" when the kernel multiplies on tl.dot; "" otherwise.
  std::string dot_precision;
  /// 2-D float32 inputs that feed tl.dot, with the axis tl.dot reduces over: the wrapper makes
  /// that axis contiguous, since TF32 tensor-core products read k-contiguous tiles.
  std::vector<std::pair<std::string, size_t>> k_contiguous_inputs;
  /// Copies only those of at least this many elements (`relayout(auto)`); 0 copies all.
  long long k_contiguous_min_elements = 0;
  /// Global float32 temporaries the kernel writes and reads back (partial fusion): name and
  /// Python shape, allocated by the wrapper.
  std::vector<std::pair<std::string, std::string>> scratch;
  /// Wrapper statements that run before the launch (sizes derived from other sizes).
  std::vector<std::string> setup;
};

} // namespace dtc::kir
