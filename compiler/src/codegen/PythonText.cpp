// Python source text from C++ strings.
#include "codegen/PythonText.h"

namespace dtc {

std::string quote(const std::string& s) {
  return "\"" + s + "\"";
}

/// Arbitrary text as it may stand inside a Python "..." or """...""" literal: backslashes,
/// quotes and control characters escaped, so no text (a file name) can end the literal.
std::string escape_python(const std::string& s) {
  std::string out;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (ch == '\\' || ch == '"') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += ch;
    }
  }
  return out;
}

/// A Python string literal of arbitrary text.
std::string python_string(const std::string& s) {
  return "\"" + escape_python(s) + "\"";
}

std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& item : items)
    s += (s.empty() ? "" : ", ") + item;
  return s;
}

std::string tuple_of(const std::vector<std::string>& items) {
  std::string s = "(";
  for (size_t i = 0; i < items.size(); ++i)
    s += (i ? ", " : "") + items[i];
  return s + (items.size() == 1 ? ",)" : ")");
}

/// The arguments of torch.empty for a shape printed as a tuple: its sizes, unpacked ("(x, y)" to
/// "x, y"), which torch parses faster than a tuple; "()" stays.
std::string empty_sizes(const std::string& tuple) {
  if (tuple.size() < 3 || tuple.front() != '(' || tuple.back() != ')') return tuple;
  std::string inner = tuple.substr(1, tuple.size() - 2);
  if (inner.back() == ',') inner.pop_back();
  return inner;
}

std::string shape_text(const ir::Labels& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + dims[i]->name;
  return s + "]";
}

std::string size_tuple(const PythonNames& py, const ir::Labels& dims) {
  std::vector<std::string> items;
  for (ir::Label l : dims)
    items.push_back(py(l));
  return tuple_of(items);
}

} // namespace dtc
