#include "lower/VerifyKernel.h"

#include "frontend/Diagnostics.h"

#include <set>

namespace dtc {

static void fail(const kir::Kernel& k, const std::string& what) {
  throw InternalError("kernel verification failed for " + k.name + ": " + what);
}

static bool uses_tensor_index(const std::string& text) {
  return text.find("_arange") != std::string::npos || text.find("_idx") != std::string::npos;
}

static void check(const kir::Kernel& k, const std::vector<kir::StmtPtr>& stmts,
                  const std::set<std::string>& params, std::set<std::string>& tensor_idx) {
  for (const kir::StmtPtr& s : stmts) {
    switch (s->kind) {
    case kir::StmtKind::Assign:
      if (params.count(s->target)) fail(k, "assigns to parameter " + s->target);
      // An index variable built from an arange is a tensor index.
      if (s->value.find("_arange") != std::string::npos) tensor_idx.insert(s->target);
      if (s->value.find("tl.load(") != std::string::npos) {
        bool tensor = false;
        for (const std::string& t : tensor_idx)
          tensor |= s->value.find(t) != std::string::npos;
        tensor |= s->value.find("_arange") != std::string::npos;
        if (tensor && s->value.find("mask=") == std::string::npos)
          fail(k, "unmasked tensor load: " + s->value);
      }
      break;
    case kir::StmtKind::Store: {
      bool tensor = false;
      for (const std::string& t : tensor_idx) tensor |= s->target.find(t) != std::string::npos;
      tensor |= s->target.find("_arange") != std::string::npos;
      if (tensor && s->mask.empty()) fail(k, "unmasked tensor store: " + s->target);
      break;
    }
    case kir::StmtKind::For:
      if (s->step.empty() || s->step == "0" || s->step[0] == '-') fail(k, "bad loop step");
      check(k, s->body, params, tensor_idx);
      break;
    case kir::StmtKind::Comment:
    case kir::StmtKind::Expr: break;
    }
  }
}

void verify_kernel(const kir::Kernel& kernel) {
  std::set<std::string> params;
  for (const kir::Param& p : kernel.params)
    if (!params.insert(p.name).second) fail(kernel, "duplicate parameter " + p.name);
  if (kernel.launch.size() != kernel.params.size()) fail(kernel, "launch arguments mismatch");
  std::set<std::string> tensor_idx;
  check(kernel, kernel.body, params, tensor_idx);
  (void)uses_tensor_index;
}

} // namespace dtc
