// POST /v1/expand: a template, an algorithm and a shape to the space's size, the pruned counts
// by reason and a page of distinct canonical schedules. Template errors come back at their line.
// The walk is bounded: `max_points` points in index order, `expand_time_s` of the configuration,
// and it ends when the client goes or the daemon stops.
#include "../Api.h"
#include "../Connection.h"

#include "dtx/Space.h"

#include <chrono>
#include <thread>

namespace dtx::server {

void register_expand(Api& api) {
  api.post(
      "/v1/expand", "/v1/expand",
      [](const httplib::Request& req, httplib::Response& res, Context& ctx) {
        nlohmann::json b = body_json(req);
        nlohmann::json as_exploration = b;
        auto paging = [&](const char* key, double fallback, const NumberRule& rule) {
          if (!b.contains(key)) return fallback;
          double v = b[key].is_number() ? b[key].get<double>() : -1;
          if (std::string p = rule.problem(v); !b[key].is_number() || !p.empty())
            throw ApiError(400, "bad_field",
                           std::string("`") + key + "` must be " + rule.describe(), key);
          return v;
        };
        auto offset = static_cast<std::int64_t>(paging("offset", 0, {0, 1e12}));
        auto limit = static_cast<std::int64_t>(paging("limit", 100, {0, 10000}));
        auto max_points = static_cast<std::uint64_t>(paging("max_points", 2e6, {1, 1e9}));
        for (const char* k : {"offset", "limit", "max_points"})
          as_exploration.erase(k);
        if (!as_exploration.contains("kernel")) as_exploration["kernel"] = "expand";
        // The fields of an exploration, checked by the same rules; the first shape expanded.
        TemplateRequest r = request_from_json(as_exploration, ctx.config);
        Space space(r.checked.algorithm, r.checked.tmpl, r.shapes.front(),
                    SpaceOptions{.dtype = r.file.dtype});
        unsigned threads = std::max(1u, std::min(4u, std::thread::hardware_concurrency()));
        Enumerator en(space, 0, max_points, threads);
        auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(ctx.config.expand_time_s));
        bool out_of_time = false;
        en.stop_when([&] {
          out_of_time = std::chrono::steady_clock::now() >= deadline;
          return out_of_time || client_gone() || stopping();
        });
        nlohmann::json page = nlohmann::json::array();
        std::int64_t n = 0;
        while (auto c = en.next()) {
          if (n >= offset && n < offset + limit)
            page.push_back({{"index", c->index}, {"canonical", c->canonical}});
          ++n;
        }
        if (en.stopped() && !out_of_time) {
          if (stopping()) throw ApiError(503, "stopping", "dtxd is stopping");
          return; // the client has gone: nobody reads an answer
        }
        const ExpansionStats& st = en.stats();
        nlohmann::json stopped = nullptr;
        if (en.stopped())
          stopped = "time";
        else if (space.size() > max_points)
          stopped = "max_points";
        send_json(res, {{"space_size", st.space_size},
                        {"overflowed", space.overflowed()},
                        {"truncated", !stopped.is_null()},
                        {"stopped", stopped},
                        {"walked", st.visited + st.unused},
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
