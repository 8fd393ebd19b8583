// `dtx expand TEMPLATE.yaml`: the size of a template's space, what is pruned and why, and the
// distinct canonical schedules.
#include "Commands.h"
#include "dtx/Request.h"
#include "dtx/TemplateFile.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>
#include <thread>

namespace dtx::cli {
namespace {

struct ExpandArgs {
  std::string file, shape;
  bool count = false, list = false, json = false, rejected = false;
  std::uint64_t limit = 0;
  unsigned threads = 0;
};

int expand(const ExpandArgs& a) {
  TemplateFile tf;
  try {
    tf = load_template_file(a.file);
  } catch (const std::exception& e) {
    std::cerr << e.what();
    return 1;
  }
  std::vector<ShapeSizes> shapes;
  if (!a.shape.empty())
    shapes.push_back(parse_shape(a.shape));
  else
    shapes = tf.shapes;
  // The rules of dtx explore and of dtxd's /v1/expand and /v1/explorations.
  CheckedRequest request;
  try {
    request = check_request(tf, shapes, a.shape.empty() ? "shapes" : "--shape");
  } catch (const RequestError& e) {
    return report(e, a.file);
  }
  if (shapes.empty()) shapes.push_back({}); // the space without a shape

  nlohmann::json out = nlohmann::json::array();
  for (const ShapeSizes& shape : shapes) {
    auto space = std::make_unique<Space>(request.algorithm, request.tmpl, shape,
                                         SpaceOptions{.dtype = tf.dtype});
    auto start = std::chrono::steady_clock::now();
    unsigned threads = a.threads ? a.threads : std::max(1u, std::thread::hardware_concurrency());
    Enumerator en(*space, 0, UINT64_MAX, threads);
    std::uint64_t listed = 0;
    nlohmann::json schedules = nlohmann::json::array();
    while (auto c = en.next(a.rejected)) {
      if (!a.list) continue;
      if (a.limit && listed >= a.limit) continue;
      ++listed;
      if (a.json) {
        nlohmann::json s = {{"index", c->index}, {"ok", c->ok}};
        if (c->ok)
          s["canonical"] = c->canonical;
        else {
          s["reason"] = c->reason;
          s["message"] = c->message;
          s["schedule"] = c->schedule;
        }
        schedules.push_back(s);
      } else if (c->ok) {
        std::cout << c->canonical << "\n";
      } else {
        std::string flat = c->schedule;
        for (char& ch : flat)
          if (ch == '\n') ch = ' ';
        std::cout << "# rejected (" << c->reason << "): " << flat << "\n";
      }
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const ExpansionStats& st = en.stats();
    std::uint64_t pruned = 0;
    for (const auto& [reason, n] : st.rejected)
      pruned += n;
    if (a.json) {
      nlohmann::json j = {{"kernel", tf.kernel},         {"shape", shape},
                          {"space_size", st.space_size}, {"overflowed", space->overflowed()},
                          {"unused_choices", st.unused}, {"rejected", st.rejected},
                          {"valid", st.valid},           {"duplicates", st.duplicates},
                          {"distinct", st.distinct},     {"seconds", secs}};
      if (a.list) j["schedules"] = schedules;
      out.push_back(j);
      continue;
    }
    if (a.count || !a.list) {
      std::ostream& o = a.list ? std::cerr : std::cout;
      o << tf.kernel << " at " << (shape.empty() ? "(no shape)" : shape_text(shape)) << "\n";
      o << "  space before pruning  " << st.space_size << (space->overflowed() ? "+" : "") << "\n";
      o << "  unused choices        " << st.unused << "\n";
      o << "  pruned                " << pruned << "\n";
      for (const auto& [reason, n] : st.rejected)
        o << "    " << reason << std::string(reason.size() < 28 ? 28 - reason.size() : 1, ' ') << n
          << "\n";
      o << "  duplicates            " << st.duplicates << "\n";
      o << "  distinct schedules    " << st.distinct << "\n";
      o << "  (" << fmt_ms(secs) << " s, " << fmt_ms(st.visited / std::max(secs, 1e-9))
        << " points/s)\n";
    }
  }
  if (a.json)
    std::cout << (out.size() == 1 ? out[0] : out)
                     .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  return 0;
}

} // namespace

Command add_expand_command(CLI::App& app) {
  auto a = std::make_shared<ExpandArgs>();
  CLI::App* sub = app.add_subcommand(
      "expand", "expand a schedule template: the space's size, the pruned schedules by reason "
                "and the distinct canonical schedules");
  sub->add_option("TEMPLATE", a->file, "a template file (YAML, see templates/)")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("--shape", a->shape,
                  "sizes by DT label, x=4096,y=4096 (default: each shape of the file)");
  sub->add_flag("--count", a->count, "print the counts (the default)");
  sub->add_flag("--list", a->list, "print the distinct canonical schedules, one per line");
  sub->add_flag("--rejected", a->rejected, "with --list: also the rejected ones, as comments");
  sub->add_option("--limit", a->limit, "with --list: at most this many (0: all)")
      ->check(number_check({0, 1e15}));
  sub->add_flag("--json", a->json, "print JSON");
  sub->add_option("--threads", a->threads,
                  "threads evaluating points (default, or 0: one per core)")
      ->check(number_check({0, 1024}));
  for (CLI::Option* opt : sub->get_options())
    opt->multi_option_policy(CLI::MultiOptionPolicy::Throw);
  return {sub, [a] { return expand(*a); }};
}

} // namespace dtx::cli
