#pragma once
// The naming table of generated Python. Every name the generated module uses is built here from
// a DT symbol's Python name, so the table below is the single place where names are decided:
//
//   DT symbol          generated names
//   In A               A (wrapper argument), A_strides and A_relayout (wrapper locals, kept in
//                      the plan),
//                      A_ptr, A_stride0.. (kernel parameters)
//   SIn alpha          alpha (wrapper argument and kernel parameter)
//   Func f             f (wrapper, output, value in the kernel), f_strides, f_kernel, f_ptr,
//                      f_stride0..
//   Var/RVar x         x (wrapper size argument), x_size (kernel parameter), x_TILE (whole-
//                      dimension tensor width), x_block, x_blocks, x_start, x_end, x_iter, x_idx,
//                      x_mask, x_arange, x_range, x_vec, x_vec_mask; a reduction over x adds
//                      x_acc, x_sum/x_max/x_min/x_dot, the x_red_ prefix when x also names an
//                      output dimension, and x_parts when x is split
//   Func f (more)      f_tile / dot_f (tl.dot operands), f_fuse (partial-fusion temporary),
//                      f_partial (split-reduction temporary)
//   map split ID xi    xi_pid
//   module-level       reference, make_inputs, SCHEDULE, pid, CudaGraph, and the runtime's
//                      _dt_-, _DT_- and _Dt-prefixed names
//   wrapper locals     key, plan, work, index, checked, dtype, device, out
//
// A DT name that is a Python keyword or builtin, a module we import (tl, triton, torch, math), a
// module-level name above, or that equals a name derived from another symbol, gets a trailing
// underscore (repeatedly, until unique). DT identifiers are [A-Za-z_][A-Za-z0-9_]*, so nothing
// else can reach the generated text.
#include "ir/IR.h"

namespace dtc {

/// Sets Symbol::py_name for every symbol of `program`.
void assign_python_names(ir::Program& program);

namespace names {
inline std::string ptr(const ir::Symbol* s) {
  return s->py_name + "_ptr";
}
inline std::string stride(const ir::Symbol* s, size_t i) {
  return s->py_name + "_stride" + std::to_string(i);
}
inline std::string kernel(const ir::Symbol* f) {
  return f->py_name + "_kernel";
}
inline std::string size(ir::Label l) {
  return l->py_name + "_size";
}
inline std::string tile(ir::Label l) {
  return l->py_name + "_TILE";
}
} // namespace names

} // namespace dtc
