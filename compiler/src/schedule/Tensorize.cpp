// tensorize(VAR:SIZE, ...): each loop iteration of a program instance computes a tensor of SIZE
// elements along VAR. SIZE 0 (or the block size) tensorizes the whole block: no loop is left
// along VAR; a whole block that is not a power of two uses the next power of two and a mask.
// A partial SIZE must be a power of two, the tensor shapes Triton supports.
#include "schedule/Primitive.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>

namespace dtc {

// Triton's cap on the elements of one tensor (triton.language.TRITON_MAX_TENSOR_NUMEL).
constexpr long long kMaxTensorElements = 1 << 20;

namespace {

/// The distinct label lists along which the values of an expression vary (a reduction's operand
/// along the reduced label too): the shapes of the tiles a kernel computing it builds. Cached per
/// expression, since the explorer validates thousands of schedules of one algorithm.
const std::vector<ir::Labels>& tile_label_sets(const ir::ExprPtr& value) {
  struct Entry {
    std::weak_ptr<const ir::Expr> expr;
    std::vector<ir::Labels> sets;
  };
  thread_local std::map<const ir::Expr*, Entry> cache;
  auto it = cache.find(value.get());
  if (it != cache.end() && it->second.expr.lock() == value) return it->second.sets;
  if (cache.size() > 256) cache.clear();
  Entry entry{value, {}};
  std::set<ir::Labels> seen;
  std::set<const ir::Expr*> visited; // shared subexpressions once
  std::vector<const ir::Expr*> stack{value.get()};
  while (!stack.empty()) {
    const ir::Expr* e = stack.back();
    stack.pop_back();
    if (!visited.insert(e).second) continue;
    if (seen.insert(e->dims).second) entry.sets.push_back(e->dims);
    if (auto* r = e->as<ir::Reduce>())
      if (seen.insert(r->a->dims).second) entry.sets.push_back(r->a->dims);
    for (const ir::Expr* k : ir::children(*e))
      stack.push_back(k);
  }
  return (cache[value.get()] = std::move(entry)).sets;
}

} // namespace

static long long next_power_of_two(long long v) {
  long long p = 1;
  while (p < v)
    p <<= 1;
  return p;
}

Primitive tensorize_primitive() {
  Primitive p;
  p.name = "tensorize";
  p.apply = [](PrimitiveContext& ctx) {
    return merge_sizes(
        ctx, ctx.target.tensor, "`VAR:SIZE` (0 for the whole block), as in `tensorize(y:64)`",
        "tensor size", [&](const ast::ScheduleArg& a) {
          if (a.value == 0 || is_power_of_two(a.value)) return true;
          long long lo = next_power_of_two(a.value) / 2, hi = next_power_of_two(a.value);
          ctx.diags.error("tensor-not-power-of-two", a.loc,
                          "in " + stmt_text(ctx.stmt) + ": tensor size " + std::to_string(a.value) +
                              " of `" + a.name +
                              "` is not a power of two; Triton tensors need power-of-two "
                              "sizes: use " +
                              std::to_string(lo) + " or " + std::to_string(hi) +
                              ", or 0 for the whole block");
          return false;
        });
  };
  p.validate = [](const FuncSchedule& fs, const ir::Program& prog, DiagnosticEngine& diags) {
    Loc loc = fs.where.at("tensorize");
    std::map<ir::Label, long long> width; // tile width of each label with a known width
    for (ir::Label l : schedulable_labels(prog, fs)) {
      long long t = fs.tensor_of(l);
      auto b = fs.block_of(l);
      if (b && t > *b) {
        diags.error("tensor-larger-than-block", loc,
                    "in `" + fs.func->name + ".tensorize(...)`: tensor size " + std::to_string(t) +
                        " of `" + l->name + "` is larger than its block size " +
                        std::to_string(*b) +
                        "; use at most the block size, or 0 for the whole block");
      }
      width[l] = t == 0 && b ? next_power_of_two(*b) : std::max(1LL, t);
    }
    // The largest tensor a kernel builds: a value varies along its expression's labels (and a
    // reduction's operand along the reduced label too); tl.dot operands and results are 2-D.
    auto elements = [&](const ir::Labels& labels) {
      long long n = 1;
      for (ir::Label l : labels)
        if (width.count(l)) n *= width[l];
      return n;
    };
    long long largest = 0;
    std::vector<const ir::Symbol*> funcs = fs.fused;
    funcs.push_back(fs.func);
    for (const ir::Symbol* f : funcs) {
      largest = std::max(largest, elements(prog.def(f).dims));
      for (const ir::Labels& labels : tile_label_sets(prog.def(f).value))
        largest = std::max(largest, elements(labels));
    }
    if (largest > kMaxTensorElements)
      diags.error("tensor-too-large", loc,
                  "in `" + fs.func->name + ".tensorize(...)`: a tensor of " +
                      std::to_string(largest) + " elements exceeds Triton's limit of " +
                      std::to_string(kMaxTensorElements) + "; use smaller tensor sizes");
  };
  p.print = [](const FuncSchedule& fs, const ir::Program& prog) -> std::optional<std::string> {
    std::string out;
    for (ir::Label l : schedulable_labels(prog, fs)) {
      // A block of one element is a whole tile of one, whatever tensor size is written: always
      // print it as fully tensorized so both spellings share one canonical text.
      bool unit_block = fs.block_of(l) == 1LL;
      auto it = fs.tensor.find(l);
      if (it == fs.tensor.end() && !unit_block) continue;
      long long t = fs.fully_tensorized(l) ? 0 : it->second;
      if (t == 1) continue; // the default: one element per iteration
      out += (out.empty() ? "" : ",") + l->name + ":" + std::to_string(t);
    }
    if (out.empty()) return std::nullopt;
    return out;
  };
  return p;
}

} // namespace dtc
