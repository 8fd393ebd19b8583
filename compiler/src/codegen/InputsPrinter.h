#pragma once
// The module's input maker: random arguments for a compiled Func's wrapper and reference at
// sizes keyed by DT label, with tied labels defaulting to one size; and its SIZE_KEYWORDS.
#include "codegen/WrapperSignature.h"

namespace dtc {

/// `make_inputs_<f>` and `SIZE_KEYWORDS_<f>` for the wrapper of signature `sig`.
std::string print_make_inputs(const PythonNames& py, const WrapperSignature& sig,
                              const ir::Symbol* f);

} // namespace dtc
