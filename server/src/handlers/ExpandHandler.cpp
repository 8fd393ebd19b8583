// POST /v1/expand: a template, an algorithm and a shape to the space's size, the pruned counts
// by reason and a page of distinct canonical schedules. Template errors come back at their line.
#include "../Api.h"

#include "dtx/Space.h"

#include <thread>

namespace dtx::server {

void register_expand(Api& api) {
  api.post(
      "/v1/expand", "/v1/expand",
      [](const httplib::Request& req, httplib::Response& res, Context& ctx) {
        nlohmann::json b = body_json(req);
        nlohmann::json as_exploration = b;
        std::int64_t offset = b.value("offset", 0), limit = b.value("limit", 100);
        std::uint64_t max_points = b.value("max_points", 2000000ULL);
        for (const char* k : {"offset", "limit", "max_points"})
          as_exploration.erase(k);
        if (!as_exploration.contains("kernel")) as_exploration["kernel"] = "expand";
        std::vector<ExploreJob> jobs = jobs_from_json(as_exploration, ctx.config);
        const ExploreJob& job = jobs.front();
        auto algorithm =
            std::make_shared<const dtc::Algorithm>(job.file.program(), job.file.algorithm_name);
        Space space(algorithm, parse_template(job.file.schedule), job.shape,
                    SpaceOptions{.dtype = job.file.dtype});
        unsigned threads = std::max(1u, std::min(4u, std::thread::hardware_concurrency()));
        Enumerator en(space, 0, max_points, threads);
        nlohmann::json page = nlohmann::json::array();
        std::int64_t n = 0;
        while (auto c = en.next()) {
          if (n >= offset && n < offset + limit)
            page.push_back({{"index", c->index}, {"canonical", c->canonical}});
          ++n;
        }
        const ExpansionStats& st = en.stats();
        send_json(res, {{"space_size", st.space_size},
                        {"overflowed", space.overflowed()},
                        {"truncated", space.size() > max_points},
                        {"unused_choices", st.unused},
                        {"rejected", st.rejected},
                        {"duplicates", st.duplicates},
                        {"distinct", st.distinct},
                        {"offset", offset},
                        {"limit", limit},
                        {"schedules", page}});
      },
      false);
}

} // namespace dtx::server
