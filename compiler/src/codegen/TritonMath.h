#pragma once
// How Triton computes the kernel IR's intrinsics: a triton.language function, or a `@triton.jit`
// helper that the generated module carries (built from triton.language operations, so it runs
// on the GPU and under the Triton interpreter alike; libdevice calls do not run in the
// interpreter), accurate where triton.language is not.
#include "kir/Intrinsics.h"

#include <string>
#include <string_view>
#include <vector>

namespace dtc {

/// The function a kernel calls for `fn`: `tl.exp`, `_dt_tanh`.
const char* triton_function(kir::Intrinsic fn);
/// Whether that function is one of the module's helpers (`_dt_tanh`), not triton.language's.
bool is_helper(kir::Intrinsic fn);

/// Source of the @triton.jit helper `name` (e.g. "_dt_tanh"), without its decorator; "" if
/// there is none.
std::string helper_source(std::string_view name);
/// The helpers that helper `name`'s source calls (the module must carry them too).
std::vector<std::string> helper_uses(std::string_view name);

} // namespace dtc
