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
      // every builtin (Python 3.11 to 3.13): a module-level wrapper named like one would replace
      // it for the module's own code (`except AttributeError:`, `max(...)`)
      "ArithmeticError", "AssertionError", "AttributeError", "BaseException", "BaseExceptionGroup",
      "BlockingIOError", "BrokenPipeError", "BufferError", "BytesWarning", "ChildProcessError",
      "ConnectionAbortedError", "ConnectionError", "ConnectionRefusedError", "ConnectionResetError",
      "DeprecationWarning", "EOFError", "Ellipsis", "EncodingWarning", "EnvironmentError",
      "Exception", "ExceptionGroup", "FileExistsError", "FileNotFoundError", "FloatingPointError",
      "FutureWarning", "GeneratorExit", "IOError", "ImportError", "ImportWarning",
      "IndentationError", "IndexError", "InterruptedError", "IsADirectoryError", "KeyError",
      "KeyboardInterrupt", "LookupError", "MemoryError", "ModuleNotFoundError", "NameError",
      "NotADirectoryError", "NotImplemented", "NotImplementedError", "OSError", "OverflowError",
      "PendingDeprecationWarning", "PermissionError", "ProcessLookupError",
      "PythonFinalizationError", "RecursionError", "ReferenceError", "ResourceWarning",
      "RuntimeError", "RuntimeWarning", "StopAsyncIteration", "StopIteration", "SyntaxError",
      "SyntaxWarning", "SystemError", "SystemExit", "TabError", "TimeoutError", "TypeError",
      "UnboundLocalError", "UnicodeDecodeError", "UnicodeEncodeError", "UnicodeError",
      "UnicodeTranslateError", "UnicodeWarning", "UserWarning", "ValueError", "Warning",
      "ZeroDivisionError", "abs", "aiter", "all", "anext", "any", "ascii", "bin", "bool",
      "breakpoint", "bytearray", "bytes", "callable", "chr", "classmethod", "compile", "complex",
      "copyright", "credits", "delattr", "dict", "dir", "divmod", "enumerate", "eval", "exec",
      "exit", "filter", "float", "format", "frozenset", "getattr", "globals", "hasattr", "hash",
      "help", "hex", "id", "input", "int", "isinstance", "issubclass", "iter", "len", "license",
      "list", "locals", "map", "max", "memoryview", "min", "next", "object", "oct", "open", "ord",
      "pow", "print", "property", "quit", "range", "repr", "reversed", "round", "set", "setattr",
      "slice", "sorted", "staticmethod", "str", "sum", "super", "tuple", "vars", "zip",
      // modules and module-level names of the generated code
      "tl", "triton", "torch", "math", "reference", "make_inputs", "SCHEDULE", "pid", "grid",
      "dtype", "device", "generator", "sizes", "seed", "self", "cls", "os", "layout", "COMPILED",
      "SIZE_KEYWORDS", "DOT_PRECISION", "DOT_PRECISIONS", "PYTHON_NAMES", "INPUTS_KEY", "out",
      "numbers", "CudaGraph", "custom_op",
      // the Gluon kernels' modules and functions (codegen/GluonPrinter.cpp)
      "gluon", "gl", "tma", "mbarrier", "warpgroup_mma", "warpgroup_mma_wait",
      // the wrappers' locals
      "key", "plan", "work", "index", "checked", "direct", "outs"};
  return words;
}

/// `__name__`, `__getattr__`, `__file__`: Python's own module attributes and protocols, which a
/// module-level wrapper must not replace.
static bool is_dunder(const std::string& name) {
  return name.size() >= 4 && name.rfind("__", 0) == 0 &&
         name.compare(name.size() - 2, 2, "__") == 0;
}

/// The names generated from a symbol of Python name `name` (the table in Names.h).
static void add_derived(const std::string& name, ir::SymbolKind kind, std::set<std::string>& out) {
  static const char* label_suffixes[] = {
      "_size",     "_TILE",         "_block",   "_start",   "_end",     "_iter",    "_idx",
      "_mask",     "_arange",       "_acc",     "_pid",     "_blocks",  "_range",   "_vec",
      "_vec_mask", "_sum",          "_max",     "_min",     "_dot",     "_parts",   "_red_iter",
      "_red_idx",  "_red_mask",     "_red_acc", "_red_sum", "_red_max", "_red_min", "_red_dot",
      "_red_vec",  "_red_vec_mask", "_EVEN"};
  switch (kind) {
  case ir::SymbolKind::In:
  case ir::SymbolKind::Func:
    out.insert(name + "_ptr");
    out.insert(name + "_kernel");
    out.insert(name + "_tile");
    out.insert(name + "_fuse");
    out.insert(name + "_partial");
    out.insert("dot_" + name);
    out.insert("reference_" + name);
    out.insert("make_inputs_" + name);
    out.insert("SIZE_KEYWORDS_" + name);
    out.insert(name + "_strides");
    out.insert(name + "_relayout");
    for (int i = 0; i < 8; ++i)
      out.insert(name + "_stride" + std::to_string(i));
    break;
  case ir::SymbolKind::Var:
  case ir::SymbolKind::RVar:
    for (const char* suffix : label_suffixes)
      out.insert(name + suffix);
    break;
  default:
    break;
  }
}

/// The names generated from the named symbols of `program`.
static std::set<std::string> derived_names(const ir::Program& program,
                                           const std::map<const ir::Symbol*, std::string>& py) {
  std::set<std::string> out;
  for (const ir::Symbol& s : program.symbols)
    if (auto it = py.find(&s); it != py.end()) add_derived(it->second, s.kind, out);
  return out;
}

PythonNames::PythonNames(const ir::Program& program) {
  for (const ir::Symbol& s : program.symbols)
    names_[&s] = s.name;
  // Renaming one symbol changes the names derived from it, so iterate to a fixed point.
  for (int round = 0; round < 16; ++round) {
    std::set<std::string> derived = derived_names(program, names_);
    bool changed = false;
    std::set<std::string> taken;
    for (const ir::Symbol& s : program.symbols) {
      std::string& name = names_[&s];
      // The generated module's runtime owns the _dt_, _DT_ and _Dt prefixes.
      for (const char* prefix : {"_dt_", "_DT_", "_Dt"})
        if (name.rfind(prefix, 0) == 0) {
          name = "user" + name;
          changed = true;
        }
      // Appending `_` keeps a dunder one, so it gets the prefix too.
      if (is_dunder(name)) {
        name = "user" + name;
        changed = true;
      }
      while (reserved().count(name) || derived.count(name) || taken.count(name)) {
        name += "_";
        changed = true;
      }
      taken.insert(name);
    }
    if (!changed) return;
  }
}

const std::string& PythonNames::operator()(const ir::Symbol* s) const {
  auto it = names_.find(s);
  DTC_ASSERT(it != names_.end(), "symbol " + s->name + " has no Python name");
  return it->second;
}

void PythonNames::add(const ir::Symbol* s) {
  DTC_ASSERT(!taken(s->name), "Python name " + s->name + " is taken");
  names_[s] = s->name;
}

bool PythonNames::available(const std::string& name, ir::SymbolKind kind) const {
  // Its own name is one of the names derived from the symbol it is made for (`f_partial` of f,
  // `k_parts` of k), which no user symbol has kept.
  if (reserved().count(name) || is_dunder(name) || taken(name)) return false;
  std::set<std::string> own;
  add_derived(name, kind, own);
  for (const auto& [s, n] : names_)
    if (own.count(n)) return false; // `f_partial_kernel` named by the user: f_partial's kernel
  return true;
}

bool PythonNames::taken(const std::string& name) const {
  for (const auto& [s, n] : names_)
    if (n == name) return true;
  return false;
}

} // namespace dtc
