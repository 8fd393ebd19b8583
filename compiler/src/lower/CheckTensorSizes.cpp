#include "lower/CheckTensorSizes.h"

#include <algorithm>

namespace dtc {
namespace {

// Whether a tensor of shape `b` has no more elements than one of shape `a`, whatever the tile
// parameters: each extent of b other than 1 matches its own extent of a, the same parameter or a
// literal at least as large.
bool within(const kir::Shape& b, const kir::Shape& a) {
  std::vector<bool> used(a.size(), false);
  for (const kir::Extent& x : b) {
    if (x.param.empty() && x.n == 1) continue;
    bool found = false;
    for (size_t i = 0; i < a.size() && !found; ++i) {
      found = !used[i] && (a[i] == x || (a[i].param.empty() && x.param.empty() && x.n <= a[i].n));
      if (found) used[i] = true;
    }
    if (!found) return false;
  }
  return true;
}

} // namespace

void check_tensor_sizes(kir::Kernel& kernel, const std::string& func, Loc where,
                        DiagnosticEngine& diags) {
  kir::Shape largest;
  long long most = 0;
  std::vector<kir::Shape> sized;
  for (const kir::Shape& shape : kir::shapes_of(kernel.body)) {
    long long numel = 1; // a tile parameter counts 1 here
    bool has_param = false;
    for (const kir::Extent& x : shape) {
      has_param |= !x.param.empty();
      if (x.param.empty()) numel *= x.n;
    }
    if (numel > most) {
      most = numel;
      largest = shape;
    }
    if (has_param) sized.push_back(shape);
  }
  if (most > kir::kMaxTensorNumel) {
    diags.error("tensor-too-large", where,
                "in `" + func + "`: the kernel would compute a tensor of " + std::to_string(most) +
                    " elements or more (" + kir::to_string(largest) + "), more than the " +
                    std::to_string(kir::kMaxTensorNumel) +
                    " Triton allows; tensorize fewer labels or use smaller tensor or block sizes");
    return;
  }
  // Only the shapes no other one contains need checking.
  for (size_t i = 0; i < sized.size(); ++i) {
    bool contained = false;
    for (size_t j = 0; j < sized.size() && !contained; ++j)
      contained = j != i && within(sized[i], sized[j]) && (!within(sized[j], sized[i]) || j < i);
    if (!contained) kernel.sized_shapes.push_back(sized[i]);
  }
}

} // namespace dtc
