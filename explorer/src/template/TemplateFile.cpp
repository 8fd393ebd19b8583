// Template files: YAML through yaml-cpp (Debian's libyaml-cpp-dev), errors located in the file.
#include "dtx/TemplateFile.h"

#include "dtx/Request.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>

namespace dtx {
namespace {

std::string where(const std::string& name, const YAML::Mark& m) {
  if (m.is_null()) return name;
  return name + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

[[noreturn]] void fail(const std::string& name, const YAML::Node& node, const std::string& what) {
  throw TemplateFileError(where(name, node.Mark()) + ": error: " + what + "\n");
}

std::string scalar(const std::string& name, const YAML::Node& node, const std::string& key) {
  if (!node.IsScalar()) fail(name, node, "`" + key + "` must be text");
  return node.as<std::string>();
}

ShapeSizes shape(const std::string& name, const YAML::Node& node) {
  if (!node.IsMap()) fail(name, node, "a shape is a map of label to size, as in {x: 1024, y: 512}");
  ShapeSizes out;
  for (const auto& kv : node) {
    std::string label = kv.first.as<std::string>();
    try {
      out[label] = kv.second.as<long long>(); // its range: shape_problem (Request.h)
    } catch (const std::exception&) {
      fail(name, kv.second, "the size of `" + label + "` must be a whole number >= 1");
    }
  }
  if (out.empty()) fail(name, node, "empty shape");
  return out;
}

std::vector<ShapeSizes> shapes(const std::string& name, const YAML::Node& node, const char* key) {
  if (!node.IsSequence())
    fail(name, node, std::string("`") + key + "` is a list of shapes, as in - {x: 1024, y: 512}");
  std::vector<ShapeSizes> out;
  for (const auto& s : node)
    out.push_back(shape(name, s));
  return out;
}

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TemplateFileError(path.string() + ": error: cannot read the file\n");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace

NamedBaseline parse_baseline_entry(const std::string& text, const std::string& kernel,
                                   const std::filesystem::path& dir) {
  if (std::string p = baseline_name_problem(text); !p.empty()) throw std::invalid_argument(p);
  NamedBaseline b;
  b.name = text;
  if (text == "reference") {
    b.spec.reference = true;
    return b;
  }
  std::string file, function;
  bool compiled = false;
  if (text == "torch" || text == "torch.compile") {
    file = "baselines.py";
    function = kernel;
    compiled = text == "torch.compile";
  } else if (text == "liger" || text == "helion") {
    file = text + "_baselines.py"; // the library's op, named like the kernel
    function = kernel;
  } else {
    std::vector<std::string> parts;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ':'))
      parts.push_back(item);
    if (parts.size() == 3 && parts[2] == "compile") {
      compiled = true;
      parts.pop_back();
    }
    if (parts.size() != 2 || parts[0].empty() || parts[1].empty())
      throw std::invalid_argument(
          "`" + text +
          "` is not a baseline: use torch, torch.compile, liger, helion, reference or "
          "FILE.py:FUNCTION[:compile]");
    file = parts[0];
    function = parts[1];
  }
  std::filesystem::path p = file;
  if (p.is_relative()) p = dir / p;
  std::error_code ec; // a name too long for the file system does not exist either
  if (!std::filesystem::exists(p, ec))
    throw std::invalid_argument("baseline `" + text + "` needs " + p.string() +
                                ", which does not exist");
  b.spec.file = std::filesystem::absolute(p).lexically_normal().string();
  b.spec.function = function;
  b.spec.torch_compile = compiled;
  return b;
}

TemplateFile parse_template_file(const std::string& yaml, const std::string& name,
                                 const std::filesystem::path& dir) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    throw TemplateFileError(where(name, e.mark) + ": error: not valid YAML: " + e.msg + "\n");
  }
  if (!root.IsMap()) throw TemplateFileError(name + ": error: a template file is a YAML map\n");
  static const std::set<std::string> known = {"kernel",    "algorithm", "source",      "compile",
                                              "schedule",  "shapes",    "test_shapes", "dtype",
                                              "baselines", "strategy",  "budget"};
  for (const auto& kv : root) {
    std::string key = kv.first.as<std::string>();
    if (!known.count(key))
      fail(name, kv.first,
           "unknown field `" + key +
               "`; the fields are kernel, algorithm (or source), compile, schedule, shapes, "
               "test_shapes, dtype, baselines, strategy, budget");
  }
  TemplateFile t;
  t.name = name;
  if (!root["kernel"]) throw TemplateFileError(name + ": error: missing `kernel:` (its name)\n");
  t.kernel = scalar(name, root["kernel"], "kernel");
  if (root["algorithm"] && root["source"])
    fail(name, root["source"], "give `algorithm:` (a file) or `source:` (the text), not both");
  if (root["algorithm"]) {
    std::filesystem::path p = scalar(name, root["algorithm"], "algorithm");
    if (p.is_relative()) p = dir / p;
    if (!std::filesystem::exists(p))
      fail(name, root["algorithm"], "the algorithm file " + p.string() + " does not exist");
    t.algorithm = read(p);
    t.algorithm_name = p.filename().string();
  } else if (root["source"]) {
    t.algorithm = scalar(name, root["source"], "source");
    t.algorithm_name = t.kernel + ".dt";
  } else {
    throw TemplateFileError(name + ": error: missing `algorithm:` (a .dt file) or `source:`\n");
  }
  if (root["compile"]) {
    const YAML::Node& c = root["compile"];
    if (c.IsScalar()) {
      t.compile.push_back(c.as<std::string>());
    } else if (c.IsSequence()) {
      for (const auto& f : c)
        t.compile.push_back(scalar(name, f, "compile"));
    } else {
      fail(name, c, "`compile` is a list of Func names");
    }
  }
  if (!root["schedule"])
    throw TemplateFileError(name + ": error: missing `schedule:` (the template)\n");
  {
    const YAML::Node& s = root["schedule"];
    t.schedule = scalar(name, s, "schedule");
    // A block scalar (`schedule: |`) starts on the next line; a plain one where it stands.
    std::istringstream lines(yaml);
    std::string line;
    for (int i = 0; i <= s.Mark().line && std::getline(lines, line); ++i) {
    }
    bool block = line.find('|') != std::string::npos || line.find('>') != std::string::npos;
    t.schedule_line = block ? s.Mark().line + 1 : s.Mark().line;
    t.schedule_col = block ? 0 : s.Mark().column;
  }
  if (root["shapes"]) t.shapes = shapes(name, root["shapes"], "shapes");
  if (root["test_shapes"]) t.test_shapes = shapes(name, root["test_shapes"], "test_shapes");
  if (root["dtype"]) {
    t.dtype = scalar(name, root["dtype"], "dtype");
    if (std::string p = dtype_problem(t.dtype); !p.empty())
      fail(name, root["dtype"], p + ", not `" + t.dtype + "`");
  }
  if (root["baselines"]) {
    const YAML::Node& b = root["baselines"];
    if (!b.IsSequence()) fail(name, b, "`baselines` is a list, as in [torch, torch.compile]");
    for (const auto& e : b) {
      try {
        t.baselines.push_back(parse_baseline_entry(scalar(name, e, "baselines"), t.kernel, dir));
      } catch (const std::invalid_argument& err) {
        fail(name, e, err.what());
      }
    }
  }
  if (root["strategy"]) {
    t.strategy = scalar(name, root["strategy"], "strategy");
    if (std::string p = strategy_problem(t.strategy); !p.empty())
      fail(name, root["strategy"], p + ", not `" + t.strategy + "`");
  }
  if (root["budget"]) {
    const NumberRule& rule = setting_rule("budget");
    std::string text = scalar(name, root["budget"], "budget");
    if (std::string p = rule.problem(text); !p.empty())
      fail(name, root["budget"],
           "`budget`: " + p + " (distinct schedules to measure; 0: no limit)");
    t.budget = std::stoull(text);
  }
  return t;
}

TemplateFile load_template_file(const std::filesystem::path& path) {
  TemplateFile t = parse_template_file(read(path), path.string(), path.parent_path());
  t.path = path;
  return t;
}

std::string TemplateFile::program() const {
  std::string out = algorithm;
  if (!compile.empty()) {
    out += "\n";
    for (const std::string& f : compile)
      if (algorithm.find(f + ".compile") == std::string::npos &&
          algorithm.find(f + ".compile_to_kernel") == std::string::npos)
        out += f + ".compile();\n";
  }
  return out;
}

Template TemplateFile::parse_schedule() const {
  try {
    return parse_template(schedule);
  } catch (const TemplateParseError& e) {
    std::vector<TemplateError> errors = e.errors;
    for (TemplateError& err : errors)
      if (err.loc.line == 1) err.loc.col += schedule_col;
    throw TemplateFileError(render_template_errors(
        errors, name.empty() ? std::string("template") : name, schedule_line));
  }
}

} // namespace dtx
