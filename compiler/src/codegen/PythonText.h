#pragma once
// Small builders of Python source text, shared by the printers of the generated module.
#include "ir/IR.h"
#include "lower/Names.h"

#include <string>
#include <vector>

namespace dtc {

/// `s` in double quotes (for names and labels, which need no escaping).
std::string quote(const std::string& s);
/// Arbitrary text as it may stand inside a Python "..." or """...""" literal: backslashes,
/// quotes and control characters escaped, so no text (a file name) can end the literal.
std::string escape_python(const std::string& s);
/// A Python string literal of arbitrary text.
std::string python_string(const std::string& s);
/// `a, b, c`
std::string join(const std::vector<std::string>& items);
/// `(a, b, c)`, `(a,)` or `()`
std::string tuple_of(const std::vector<std::string>& items);
/// The arguments of torch.empty for a shape printed as a tuple: its sizes, unpacked ("(x, y)" to
/// "x, y"), which torch parses faster than a tuple; "()" stays.
std::string empty_sizes(const std::string& tuple);
/// `[x, y]`: labels as DT writes them (for messages and docstrings).
std::string shape_text(const ir::Labels& dims);
/// `(x, y)`: the Python names of the labels' sizes, as a tuple.
std::string size_tuple(const PythonNames& py, const ir::Labels& dims);

} // namespace dtc
