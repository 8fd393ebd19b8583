// Stage 7 of lowering a Func: reductions. rsum, rmax and rmin (and rdot where it does not run
// on tl.dot, as a multiply-and-sum) over a label: one tile reduced (kir::reduce) when the label
// is one whole tile, else an accumulator carried through the label's loop, masked lanes
// replaced by the operation's identity. A maximum or minimum is NaN where a value is NaN, as
// torch.amax and torch.amin are, in every schedule (kir::ReduceOp, kir::BinOp::Max).
#include "lower/LowerState.h"
#include "lower/Names.h"

#include <limits>

namespace dtc::lowering {

kir::ReduceOp kernel_op(ir::ReduceOp op) {
  return op == ir::ReduceOp::Sum   ? kir::ReduceOp::Sum
         : op == ir::ReduceOp::Max ? kir::ReduceOp::Max
                                   : kir::ReduceOp::Min;
}

double identity_of(ir::ReduceOp op) {
  return op == ir::ReduceOp::Sum   ? 0.0
         : op == ir::ReduceOp::Max ? -std::numeric_limits<double>::infinity()
                                   : std::numeric_limits<double>::infinity();
}

Value lower_reduce(LowerState& s, ir::ReduceOp op, std::vector<ir::ExprPtr> operands, Label r,
                   const ir::Expr& e, Body& body) {
  const char* what = operands.size() == 2 ? "rdot" : ir::reduce_name(op);
  body.push_back(kir::Stmt::comment(std::string(what) + " over " + r->name + ": " + ir::to_dt(e)));
  std::string prefix = reduction_prefix(s, r);
  ir::Labels operand_dims;
  for (auto& o : operands)
    operand_dims = ir::union_labels(operand_dims, o->dims);
  // The masked operand always spans a tensorized RVar, even one constant along it.
  if (s.tensorized(r)) operand_dims = ir::union_labels(operand_dims, {r});
  double identity = identity_of(op);
  std::string acc = s.fresh(prefix + s.py(r) + "_acc");
  bool tensor_r = s.tensorized(r);
  bool full_r = s.whole_tile(e, r);
  if (!full_r)
    s.let(body, acc,
          s.layout.axes.empty() ? kir::float_imm(identity)
                                : kir::full(s.layout.shape_of(operand_dims), identity));
  Body* inner = emit_dim(s, r, body, loop_prefix(s, r, prefix), !s.splits(e));
  if (!full_r) s.cache.emplace_back();
  Value v;
  if (operands.size() == 2) {
    Value a = number(s, *operands[0], *inner), b = number(s, *operands[1], *inner);
    v = kir::mul(a, b);
  } else {
    v = number(s, *operands[0], *inner);
  }
  if (!full_r) s.cache.pop_back();
  const Value mask = s.bind[r].back().mask;
  // Masked lanes must not contribute: replace them with the identity.
  Value masked = mask ? kir::select(mask, v, kir::float_imm(identity)) : v;
  std::string result = s.fresh(prefix + s.py(r) + "_" + std::string(what).substr(1));
  int ax = s.layout.axis_of(r);
  kir::ReduceOp kop = kernel_op(op);
  Value out;
  if (full_r) {
    out = s.let(body, result, kir::reduce(kop, masked, ax));
  } else {
    // A NaN stays in its lane of the accumulator, and the tile's reduction keeps it.
    Value combined = op == ir::ReduceOp::Sum   ? kir::add(s.ref(acc), masked)
                     : op == ir::ReduceOp::Max ? kir::maximum(s.ref(acc), masked)
                                               : kir::minimum(s.ref(acc), masked);
    s.let(*inner, acc, combined);
    out = tensor_r ? s.let(body, result, kir::reduce(kop, s.ref(acc), ax)) : s.ref(acc);
  }
  s.bind[r].pop_back();
  return out;
}

} // namespace dtc::lowering
