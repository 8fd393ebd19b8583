// Stage 2 of lowering a Func: the kernel's signature. Tensors (a pointer and a stride per
// dimension), then scalar inputs, the sizes of the labels it indexes and the constexpr tile
// widths; each parameter with a kir::LaunchArg saying how the wrapper fills it.
#include "lower/LowerState.h"
#include "lower/Names.h"

#include <functional>

namespace dtc::lowering {
namespace {

struct Collect : ir::IRVisitor {
  std::vector<const ir::Symbol*> tensors, scalars;
  ir::Labels labels;
  void visit(const ir::Access& e) override {
    if (!std::count(tensors.begin(), tensors.end(), e.tensor)) tensors.push_back(e.tensor);
    labels = ir::union_labels(labels, e.index);
    ir::IRVisitor::visit(e); // a gather's index input
  }
  void visit(const ir::ScalarIn& e) override {
    if (!std::count(scalars.begin(), scalars.end(), e.symbol)) scalars.push_back(e.symbol);
  }
  void visit(const ir::Len& e) override { labels = ir::union_labels(labels, {e.label}); }
  // A label's value is masked by its size (`r` in `rsum(r, r)`): the kernel takes it too.
  void visit(const ir::LabelValue& e) override { labels = ir::union_labels(labels, {e.label}); }
};

// `float32`: the tensor is a float32 temporary, not of the inputs' dtype.
void add_tensor_params(LowerState& s, const std::string& ptr, const std::string& tensor,
                       size_t rank, const std::function<std::string(size_t)>& stride_param,
                       bool float32 = false) {
  kir::Type pointer;
  pointer.scalar = kir::Scalar::Ptr;
  if (!float32) pointer.elem_of = ptr;
  s.add_param(ptr, launch_arg(kir::LaunchArg::Kind::Tensor, tensor), pointer);
  for (size_t i = 0; i < rank; ++i)
    s.add_param(stride_param(i), launch_arg(kir::LaunchArg::Kind::Stride, tensor, i, rank),
                int_type());
}

void add_tensor_params(LowerState& s, const ir::Symbol* t, size_t rank) {
  add_tensor_params(s, s.py.ptr(t), s.py(t), rank, [&](size_t i) { return s.py.stride(t, i); });
}

size_t rank_of(const LowerState& s, const ir::Symbol* in) {
  struct Rank : ir::IRVisitor {
    const ir::Symbol* t;
    size_t rank = 0;
    void visit(const ir::Access& e) override {
      if (e.tensor == t) rank = e.index.size();
      ir::IRVisitor::visit(e);
    }
  } r;
  r.t = in;
  s.for_each_value(r);
  return r.rank;
}

} // namespace

void add_params(LowerState& s) {
  Collect c;
  s.for_each_value(c);
  // Inputs in declaration order, then the Funcs this kernel reads, then the output.
  for (const ir::Symbol* in : s.prog.inputs) {
    if (std::count(c.tensors.begin(), c.tensors.end(), in))
      add_tensor_params(s, in, rank_of(s, in));
    if (std::count(c.scalars.begin(), c.scalars.end(), in))
      s.add_param(s.py(in), launch_arg(kir::LaunchArg::Kind::Scalar, s.py(in)),
                  int_type(in->is_int ? kir::Scalar::Int : kir::Scalar::F32));
  }
  for (const ir::Symbol* t : c.tensors) {
    if (t->kind != ir::SymbolKind::Func) continue;
    size_t rank = s.prog.def(t).dims.size();
    if (!s.materialized_here(t)) {
      // Computed by a kernel of its own into a float32 tensor (ModulePrinter.cpp).
      add_tensor_params(
          s, s.py.ptr(t), s.py(t), rank, [&](size_t i) { return s.py.stride(t, i); },
          /*float32=*/true);
      continue;
    }
    std::string base = s.tensor_base(t);
    add_tensor_params(
        s, base + "_ptr", base, rank,
        [&](size_t i) { return base + "_stride" + std::to_string(i); }, /*float32=*/true);
    kir::Temporary scratch{base, {}};
    for (Label l : s.prog.def(t).dims)
      scratch.sizes.push_back(s.py(l));
    s.kernel.scratch.push_back(std::move(scratch));
  }
  add_tensor_params(s, s.func, s.def.dims.size());
  for (const ir::Symbol* g : s.stored) // outputs of the wrapper, in the inputs' dtype
    add_tensor_params(s, g, s.prog.def(g).dims.size());
  s.labels = ir::union_labels(s.def.dims, schedulable_labels(s.prog, s.fs));
  s.labels = ir::union_labels(s.labels, c.labels);
  for (Label l : s.labels)
    if (!s.is_part(l))
      s.add_param(s.py.size(l), launch_arg(kir::LaunchArg::Kind::Size, s.py(l)), int_type());
  // tl.dot needs at least 16 along each dimension; masks cover the difference. An empty
  // dimension still needs a one-lane tile (tl.arange(0, 0) is invalid); its mask is all
  // false, so an empty reduction yields its identity.
  for (Label l : s.layout.tiles)
    s.add_param(s.py.tile(l),
                launch_arg(kir::LaunchArg::Kind::Tile, s.py(l), 0, 0, s.tile_least(l)), int_type(),
                true);
}

} // namespace dtc::lowering
