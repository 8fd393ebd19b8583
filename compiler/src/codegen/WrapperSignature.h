#pragma once
// What a compiled Func's wrapper takes and checks, inferred from the algorithm: its inputs, the
// sizes the caller gives or the inputs imply, the sizes derived from those, and which labels'
// sizes must agree (they index one input dimension, or one reads a Func along a dimension the
// other labels). The wrapper, the reference and the input maker are printed from it.
#include "codegen/PythonCodegen.h"

namespace dtc {

struct WrapperSignature {
  std::vector<const ir::Symbol*> inputs; // In and SIn, declaration order
  ir::Labels labels;                     // every size the caller gives or the inputs imply
  ir::Labels derived;                    // sizes computed from those
  std::map<ir::Label, std::vector<std::pair<const ir::Symbol*, size_t>>> uses;
  std::map<const ir::Symbol*, ir::Labels> first_shape; // In -> labels of its first access
  /// Labels whose sizes must be equal, each under its first label in `labels`: they index one
  /// input dimension, or one reads a Func along a dimension labelled by the other.
  std::map<ir::Label, ir::Label> tied;
  std::map<ir::Label, std::vector<std::pair<const ir::Symbol*, size_t>>> group_uses; // by root
  std::map<ir::Label, std::vector<ir::Label>> group_labels; // root -> the labels it stands for
  std::map<ir::Label, std::vector<ir::Label>> use_labels;   // root -> label of each group_use
  std::map<ir::Label, std::string> why;                     // root -> the Func reads that tie it
};

/// The signature of `c`'s wrapper: the kernels' reads and the algorithm as written (what the
/// reference evaluates) both contribute.
WrapperSignature wrapper_signature(const ModuleInput& module, const CompiledFunc& c);

/// `f` and the Funcs it reads, in the algorithm as written, dependencies first.
std::vector<const ir::Symbol*> reference_order(const ModuleInput& module, const ir::Symbol* f);

/// The labels `def` reduces over, in first-appearance order.
ir::Labels reduction_labels(const ir::FuncDef& def);

} // namespace dtc
