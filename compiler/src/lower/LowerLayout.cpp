// Stage 1 of lowering a Func: the kernel's tensor layout. One axis per tensorized label, in the
// order of schedulable_labels (output dimensions in definition order, then reduction labels),
// so every value is a tensor whose size along an axis is the tile width where it varies and 1
// elsewhere, and operands broadcast by label.
#include "lower/LowerFunc.h"
#include "lower/LowerState.h"
#include "lower/Names.h"

namespace dtc::lowering {

int KernelLayout::axis_of(Label l) const {
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i].label == l) return static_cast<int>(i);
  return -1;
}

bool KernelLayout::loop_only(Label l) const {
  for (const Axis& a : loop_tiles)
    if (a.label == l) return true;
  return false;
}

kir::Extent KernelLayout::width_of_axis(Label l) const {
  int ax = axis_of(l);
  if (ax >= 0) return axes[ax].width;
  for (const Axis& a : loop_tiles)
    if (a.label == l) return a.width;
  DTC_ASSERT(false, "tensorized label without an axis");
  return {};
}

kir::Shape KernelLayout::shape_of(const ir::Labels& dims) const {
  kir::Shape s;
  for (const Axis& a : axes)
    s.push_back(ir::contains(dims, a.label) ? a.width : kir::Extent{});
  return s;
}

std::string KernelLayout::text() const {
  auto list = [](const std::vector<Axis>& of) {
    std::string s;
    for (const Axis& a : of)
      s += (s.empty() ? "" : ", ") + a.label->name + ":" +
           (a.width.param.empty() ? std::to_string(a.width.n) : a.width.param);
    return s;
  };
  std::string s = list(axes);
  if (!loop_tiles.empty()) s += "; product loops over " + list(loop_tiles);
  return s;
}

KernelLayout plan_layout(const ir::Program& prog, const FuncSchedule& fs, const ir::FuncDef& def,
                         const PythonNames& py) {
  KernelLayout layout;
  struct DotLabels : ir::IRVisitor {
    std::set<Label>* out;
    void visit(const ir::Dot& d) override {
      out->insert(d.rvar);
      for (Label l : d.a->dims)
        out->insert(l);
      for (Label l : d.b->dims)
        out->insert(l);
      ir::IRVisitor::visit(d);
    }
  } dots;
  dots.out = &layout.dot_labels;
  def.value->accept(dots);
  for (Label l : schedulable_labels(prog, fs)) {
    if (!fs.fully_tensorized(l) && fs.tensor_of(l) <= 1) continue;
    // A whole dimension is one tile: a literal power of two when blocked, else a constexpr
    // parameter the wrapper computes from the size.
    kir::Extent width{fs.tensor_of(l), ""};
    if (fs.fully_tensorized(l)) {
      if (auto b = fs.block_of(l)) {
        width = {next_power_of_two(*b), ""};
      } else {
        layout.tiles.push_back(l);
        width = {0, py.tile(l)};
      }
    }
    layout.axes.push_back({l, width});
  }
  return layout;
}

} // namespace dtc::lowering
