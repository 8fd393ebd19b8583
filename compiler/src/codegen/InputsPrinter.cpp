// The module's input maker (InputsPrinter.h).
#include "codegen/InputsPrinter.h"

#include "codegen/PythonText.h"

#include <cmath>
#include <set>

namespace dtc {

namespace {

/// A scalar input's written value as Python reads it back: a float literal as written (DT's
/// float syntax is Python's), a whole one without the leading zeros Python refuses.
std::string python_number(const ir::Symbol& in) {
  const std::string& text = in.example_text;
  bool whole = text.find_first_of(".eE") == std::string::npos;
  if (!whole) return text;
  if (std::fabs(*in.example) < 0x1p62) return std::to_string(static_cast<long long>(*in.example));
  return ir::python_float(*in.example);
}

} // namespace

std::string print_make_inputs(const PythonNames& py, const WrapperSignature& sig,
                              const ir::Symbol* f) {
  const std::string& name = py(f);
  std::string out;
  // Random inputs. A label that indexes the same input dimension as an earlier one (rms_norm's
  // k and y) is tied to it: its size defaults to the earlier label's.
  std::map<ir::Label, ir::Label> tied = sig.tied;
  std::vector<std::string> label_names, free_names;
  std::string free_tuple;
  std::map<ir::Label, int> example;
  int next_example = 16;
  for (ir::Label l : sig.labels) {
    label_names.push_back(quote(l->name));
    if (tied.count(l)) {
      example[l] = example[tied[l]];
      continue;
    }
    example[l] = next_example;
    next_example += 16;
    free_names.push_back(quote(l->name));
    free_tuple += py(l) + ", ";
  }
  out += "\n\ndef make_inputs_" + name + "(sizes, dtype=torch.float32, device=\"cpu\", seed=0):\n";
  out += "    \"\"\"Random positional arguments for " + name + "(...) and reference_" + name +
         "(...), at `sizes`\n    keyed by DT label, e.g. {";
  for (size_t i = 0; i < sig.labels.size(); ++i)
    out += (i ? ", " : "") + quote(sig.labels[i]->name) + ": " +
           std::to_string(example[sig.labels[i]]);
  out += "}.\"\"\"\n";
  if (!free_names.empty())
    out += "    " + free_tuple + "= _dt_sizes(sizes, " + tuple_of(free_names) + ")\n";
  // Labels the inputs below are written with: their shapes, and the ranges of integer inputs
  // (`In T: int(j)` draws positions below j's size, j perhaps tied to another label).
  std::set<ir::Label> shaping;
  for (const ir::Symbol* in : sig.inputs)
    if (in->kind == ir::SymbolKind::In) {
      for (ir::Label l : sig.first_shape.at(in))
        shaping.insert(l);
      if (in->is_int && in->range) shaping.insert(in->range);
    }
  for (ir::Label l : sig.labels)
    if (tied.count(l)) {
      out += "    if int(sizes.get(" + quote(l->name) + ", " + py(tied[l]) +
             ")) != " + py(tied[l]) + ":\n        raise ValueError(\"" + l->name +
             " indexes the same input dimension as " + tied[l]->name + "; give them one size\")\n";
      if (shaping.count(l)) out += "    " + py(l) + " = " + py(tied[l]) + "\n";
    }
  out += "    generator = torch.Generator().manual_seed(seed)\n";
  std::vector<std::string> results;
  for (const ir::Symbol* in : sig.inputs) {
    // Integer inputs hold positions along their range label (`In T: int(y)`), else 0 to 15. A
    // range that is no size of the call (T read as a value only) is read from `sizes` if there.
    std::string high = "16";
    if (in->range)
      high = ir::contains(sig.labels, in->range)
                 ? py(in->range)
                 : "int(sizes.get(" + quote(in->range->name) + ", 16))";
    if (in->kind == ir::SymbolKind::In && in->is_int)
      out += "    " + py(in) + " = _dt_randint(" + size_tuple(py, sig.first_shape.at(in)) + ", " +
             high + ", generator, device)\n";
    else if (in->kind == ir::SymbolKind::In)
      out += "    " + py(in) + " = _dt_randn(" + size_tuple(py, sig.first_shape.at(in)) +
             ", generator, dtype, device)\n";
    else if (in->example)
      out += "    " + py(in) + " = " + python_number(*in) + "\n";
    else if (in->is_int)
      out += "    " + py(in) + " = _dt_randint((), 16, generator, \"cpu\").item()\n";
    else
      out += "    " + py(in) + " = _dt_rand_scalar(generator)\n";
    results.push_back(py(in));
  }
  out += "    return " + (results.empty() ? std::string("()") : tuple_of(results)) + "\n";
  out += "\n\nSIZE_KEYWORDS_" + name + " = {";
  for (size_t i = 0; i < sig.labels.size(); ++i)
    out += (i ? ", " : "") + quote(sig.labels[i]->name) + ": " + quote(py(sig.labels[i]));
  out += "}\n";
  return out;
}

} // namespace dtc
