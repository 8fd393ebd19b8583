#include "lower/VerifyKernel.h"

#include "support/Diagnostics.h"

#include <cctype>
#include <set>

namespace dtc {

static void fail(const kir::Kernel& k, const std::string& what) {
  throw InternalError("kernel verification failed for " + k.name + ": " + what);
}

// Identifiers in a Python expression (attribute names after `.` excluded).
static std::set<std::string> identifiers(const std::string& text) {
  std::set<std::string> out;
  for (size_t i = 0; i < text.size();) {
    if (std::isalpha(static_cast<unsigned char>(text[i])) || text[i] == '_') {
      size_t start = i;
      while (i < text.size() &&
             (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_'))
        ++i;
      if (start == 0 || text[start - 1] != '.') out.insert(text.substr(start, i - start));
    } else {
      ++i;
    }
  }
  return out;
}

// Whether an address expression indexes with a tensor (an arange or a variable built from one).
static bool tensor_address(const std::string& address, const std::set<std::string>& tensor_idx) {
  for (const std::string& id : identifiers(address))
    if (tensor_idx.count(id) || id.find("_arange") != std::string::npos ||
        id.find("_range") != std::string::npos)
      return true;
  return false;
}

static void check(const kir::Kernel& k, const std::vector<kir::StmtPtr>& stmts,
                  const std::set<std::string>& params, std::set<std::string>& tensor_idx) {
  for (const kir::StmtPtr& s : stmts) {
    switch (s->kind) {
    case kir::StmtKind::Assign:
      if (params.count(s->target)) fail(k, "assigns to parameter " + s->target);
      // An index variable built from an arange (or from such a variable) is a tensor index.
      if (s->value.rfind("tl.load(", 0) != 0 && tensor_address(s->value, tensor_idx))
        tensor_idx.insert(s->target);
      if (s->value.rfind("tl.load(", 0) == 0 && tensor_address(s->value, tensor_idx) &&
          s->value.find("mask=") == std::string::npos)
        fail(k, "unmasked tensor load: " + s->value);
      break;
    case kir::StmtKind::Store: {
      if (tensor_address(s->target, tensor_idx) && s->mask.empty())
        fail(k, "unmasked tensor store: " + s->target);
      break;
    }
    case kir::StmtKind::For:
      if (s->step.empty() || s->step == "0" || s->step[0] == '-') fail(k, "bad loop step");
      check(k, s->body, params, tensor_idx);
      break;
    case kir::StmtKind::Comment:
    case kir::StmtKind::Expr:
      break;
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
}

} // namespace dtc
