#include "lower/Names.h"

#include <set>

namespace dtc {

static const std::set<std::string>& reserved() {
  static const std::set<std::string> words = {
      // Python keywords and soft keywords
      "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
      "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if",
      "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try",
      "while", "with", "yield", "match", "case", "type", "_",
      // builtins the generated code or a reader could trip over
      "abs", "all", "any", "bool", "dict", "divmod", "enumerate", "float", "getattr", "int",
      "isinstance", "iter", "len", "list", "map", "max", "min", "next", "object", "pow", "print",
      "range", "repr", "round", "set", "slice", "sorted", "str", "sum", "super", "tuple", "zip",
      "id", "input", "open", "format", "hash", "filter", "reversed", "vars", "locals", "globals",
      "exec", "eval", "compile", "callable", "chr", "ord", "hex", "bin", "oct", "complex", "bytes",
      "bytearray", "memoryview", "frozenset", "property", "staticmethod", "classmethod",
      "issubclass", "hasattr", "setattr", "delattr", "help", "dir", "exit", "quit",
      "NotImplemented", "Ellipsis", "ValueError", "TypeError", "Exception",
      // modules and module-level names of the generated code
      "tl", "triton", "torch", "math", "reference", "make_inputs", "SCHEDULE", "pid", "grid",
      "dtype", "device", "generator", "sizes", "seed", "self", "cls", "os", "layout", "COMPILED",
      "SIZE_KEYWORDS", "DOT_PRECISION", "out", "numbers", "CudaGraph",
      // the wrappers' locals
      "key", "plan", "work", "index", "checked"};
  return words;
}

static std::set<std::string> derived_names(const ir::Program& program) {
  std::set<std::string> out;
  static const char* label_suffixes[] = {
      "_size",    "_TILE",    "_block",    "_start",   "_end",      "_iter",
      "_idx",     "_mask",    "_arange",   "_acc",     "_pid",      "_blocks",
      "_range",   "_vec",     "_vec_mask", "_sum",     "_max",      "_min",
      "_dot",     "_parts",   "_red_iter", "_red_idx", "_red_mask", "_red_acc",
      "_red_sum", "_red_max", "_red_min",  "_red_dot", "_red_vec",  "_red_vec_mask"};
  for (const ir::Symbol& s : program.symbols) {
    switch (s.kind) {
    case ir::SymbolKind::In:
    case ir::SymbolKind::Func:
      out.insert(s.py_name + "_ptr");
      out.insert(s.py_name + "_kernel");
      out.insert(s.py_name + "_tile");
      out.insert(s.py_name + "_fuse");
      out.insert(s.py_name + "_partial");
      out.insert("dot_" + s.py_name);
      out.insert("reference_" + s.py_name);
      out.insert("make_inputs_" + s.py_name);
      out.insert("SIZE_KEYWORDS_" + s.py_name);
      out.insert(s.py_name + "_strides");
      out.insert(s.py_name + "_relayout");
      for (int i = 0; i < 8; ++i)
        out.insert(s.py_name + "_stride" + std::to_string(i));
      break;
    case ir::SymbolKind::Var:
    case ir::SymbolKind::RVar:
      for (const char* suffix : label_suffixes)
        out.insert(s.py_name + suffix);
      break;
    default:
      break;
    }
  }
  return out;
}

void assign_python_names(ir::Program& program) {
  for (ir::Symbol& s : program.symbols)
    s.py_name = s.name;
  // Renaming one symbol changes the names derived from it, so iterate to a fixed point.
  for (int round = 0; round < 16; ++round) {
    std::set<std::string> derived = derived_names(program);
    bool changed = false;
    std::set<std::string> taken;
    for (ir::Symbol& s : program.symbols) {
      // The generated module's runtime owns the _dt_, _DT_ and _Dt prefixes.
      for (const char* prefix : {"_dt_", "_DT_", "_Dt"})
        if (s.py_name.rfind(prefix, 0) == 0) {
          s.py_name = "user" + s.py_name;
          changed = true;
        }
      while (reserved().count(s.py_name) || derived.count(s.py_name) || taken.count(s.py_name)) {
        s.py_name += "_";
        changed = true;
      }
      taken.insert(s.py_name);
    }
    if (!changed) return;
  }
}

} // namespace dtc
