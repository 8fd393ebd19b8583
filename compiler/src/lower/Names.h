#pragma once
// The naming table of generated Python. Every name the generated module uses is built here from
// a DT symbol's Python name, so the table below is the single place where names are decided:
//
//   DT symbol          generated names (PythonNames)
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
//   wrapper locals     key, plan, work, index, checked, direct, run, grid, head, dtype,
//                      device, out
//
// A DT name that is a Python keyword or builtin, a module we import (tl, triton, torch, math), a
// module-level name above, or that equals a name derived from another symbol, gets a trailing
// underscore (repeatedly, until unique). DT identifiers are [A-Za-z_][A-Za-z0-9_]*, so nothing
// else can reach the generated text.
#include "ir/IR.h"

#include <map>

namespace dtc {

/// The Python name of every symbol of a program, and the names derived from it. Kept beside
/// the algorithm IR, not in it: the IR knows DT names only.
class PythonNames {
public:
  /// Names every symbol of `program` by the rules above.
  explicit PythonNames(const ir::Program& program);

  /// The Python name of `s` (precondition: `s` was named).
  const std::string& operator()(const ir::Symbol* s) const;
  /// Names a symbol the compiler added after construction (SplitReductions.h) after its DT
  /// name, which the caller chose so that `available` is true for it.
  void add(const ir::Symbol* s);
  /// Whether a symbol of `kind` that the compiler adds may have the Python name `name` as it
  /// is: no keyword, builtin or module-level name, no other symbol's name, and none of the names
  /// generated from it (`f_partial_kernel`, `k_parts_size`) already a symbol's.
  bool available(const std::string& name, ir::SymbolKind kind) const;
  /// Whether a symbol already has this Python name.
  bool taken(const std::string& name) const;

  std::string ptr(const ir::Symbol* s) const { return (*this)(s) + "_ptr"; }
  std::string stride(const ir::Symbol* s, size_t i) const {
    return (*this)(s) + "_stride" + std::to_string(i);
  }
  std::string kernel(const ir::Symbol* f) const { return (*this)(f) + "_kernel"; }
  std::string size(ir::Label l) const { return (*this)(l) + "_size"; }
  std::string tile(ir::Label l) const { return (*this)(l) + "_TILE"; }

private:
  std::map<const ir::Symbol*, std::string> names_;
};

} // namespace dtc
