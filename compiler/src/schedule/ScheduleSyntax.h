#pragma once
// Schedule statements as the parser writes them (`f.block(x:64, y:16);`): the input of the
// schedule layer, which sits below the front end and so takes them from here, not from the
// front end's syntax tree (frontend/AST.h holds them in its Program).
#include "support/Diagnostics.h"

#include <string>
#include <vector>

namespace dtc::ast {

struct Name {
  std::string text;
  Loc loc;
};

/// One argument of a schedule statement: `x:64`, `x:xi/4`, `x`, `8`.
struct ScheduleArg {
  Loc loc;
  std::string name;       // empty for a bare integer
  bool has_value = false; // `name:value`
  long long value = 0;    // the integer (bare, or after ':')
  std::string split_name; // `x:xi/4` -> "xi" (value = 4)
};

/// `f.block(x:64, y:16);`
struct ScheduleStmt {
  Name func;
  Name primitive;
  std::vector<ScheduleArg> args;
  Loc loc;
};

} // namespace dtc::ast
