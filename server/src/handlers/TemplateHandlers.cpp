// GET /v1/templates: the template files of the server's templates directory (one per thesis
// kernel), so that a client (the page's new-exploration form) can start from one.
#include "../Api.h"

#include "dtx/TemplateFile.h"

#include <algorithm>
#include <fstream>

namespace dtx::server {
namespace {

/// The comment block at the top of a template file: what the template explores, in words.
std::string description_of(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line, out;
  while (std::getline(in, line) && line.rfind('#', 0) == 0)
    out += (out.empty() ? "" : " ") + line.substr(line.size() > 1 && line[1] == ' ' ? 2 : 1);
  return out;
}

nlohmann::json shapes_json(const std::vector<ShapeSizes>& shapes) {
  nlohmann::json out = nlohmann::json::array();
  for (const ShapeSizes& s : shapes)
    out.push_back(s);
  return out;
}

} // namespace

void register_templates(Api& api) {
  api.get("/v1/templates", "/v1/templates",
          [](const httplib::Request&, httplib::Response& res, Context& ctx) {
            std::vector<std::filesystem::path> files;
            std::error_code ec;
            for (const auto& e : std::filesystem::directory_iterator(ctx.config.templates_dir, ec))
              if (e.path().extension() == ".yaml") files.push_back(e.path());
            std::sort(files.begin(), files.end());
            nlohmann::json list = nlohmann::json::array(), errors = nlohmann::json::array();
            for (const auto& f : files) {
              try {
                TemplateFile tf = load_template_file(f);
                nlohmann::json baselines = nlohmann::json::array();
                for (const NamedBaseline& b : tf.baselines)
                  baselines.push_back(b.name);
                list.push_back({{"name", f.stem().string()},
                                {"kernel", tf.kernel},
                                {"description", description_of(f)},
                                {"algorithm", tf.algorithm},
                                {"algorithm_name", tf.algorithm_name},
                                {"compile", tf.compile},
                                {"schedule", tf.schedule},
                                {"shapes", shapes_json(tf.shapes)},
                                {"test_shapes", shapes_json(tf.test_shapes)},
                                {"dtype", tf.dtype},
                                {"baselines", baselines},
                                {"strategy", tf.strategy},
                                {"budget", tf.budget.value_or(0)}});
              } catch (const std::exception& e) {
                // One broken file does not hide the others.
                errors.push_back({{"name", f.stem().string()}, {"message", e.what()}});
              }
            }
            send_json(res, {{"templates", list}, {"errors", errors}});
          });
}

} // namespace dtx::server
