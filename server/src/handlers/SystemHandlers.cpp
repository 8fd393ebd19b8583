// GET /healthz (503 when the results store cannot be written; with the number of GPUs timing
// kernels: 0 is the Triton interpreter),
// GET /metrics (Prometheus text), GET /v1/openapi.json, GET / (where to look, or the page).
#include "../Api.h"
#include "../Connection.h"
#include "../Guard.h"
#include "dtx/Files.h"

#include <fstream>
#include <sstream>

namespace dtx::server {

void register_system(Api& api) {
  api.get("/healthz", "/healthz",
          [](const httplib::Request& req, httplib::Response& res, Context& ctx) {
            // The store is written to find out whether it can be (at most once a second):
            // a daemon that cannot store what it measures is not healthy, busy or not.
            results::WriteHealth store = ctx.scheduler.store_health();
            nlohmann::json store_json = {{"writable", store.ok}};
            if (!store.ok) {
              store_json["error"] = store.error;
              store_json["since"] = store.since;
            }
            nlohmann::json body = {
                {"status", store.ok ? "ok" : "unhealthy"}, {"store", store_json},
                {"queued", ctx.scheduler.queue_depth()},   {"running", ctx.scheduler.running()},
                {"paused", ctx.scheduler.paused_count()},  {"elsewhere", ctx.scheduler.elsewhere()},
                {"gpus", ctx.config.gpus.size()},          {"backend", ctx.config.backend}};
            // Where the store lies on the server's disk is for those who may use the server: with
            // tokens, a caller whose token is accepted (a probe or a load balancer needs none).
            if (ctx.config.tokens.empty() ||
                token_accepted(req.get_header_value("Authorization"), ctx.config.tokens))
              body["database"] = ctx.config.db_path().string();
            ConnectionCounts conns = connection_counts();
            body["connections"] = {{"open", conns.open},
                                   {"max_connections", conns.max_connections},
                                   {"event_streams", conns.event_streams},
                                   {"max_event_streams", conns.max_event_streams}};
            if (!store.ok)
              body["reason"] =
                  "the results store cannot be written since " + store.since + ": " + store.error;
            send_json(res, body, store.ok ? 200 : 503);
          });
  api.get("/metrics", "/metrics",
          [](const httplib::Request&, httplib::Response& res, Context& ctx) {
            ctx.metrics.set_queue(ctx.scheduler.queue_depth(), ctx.scheduler.running());
            res.set_content(ctx.metrics.text(), "text/plain; version=0.0.4");
          });
  api.get("/v1/openapi.json", "/v1/openapi.json",
          [](const httplib::Request&, httplib::Response& res, Context&) {
            std::ifstream in(dtx_file(std::filesystem::path("server") / "openapi.json"));
            if (!in)
              throw ApiError(500, "internal",
                             "server/openapi.json is missing under " + files_root().dir.string());
            std::stringstream ss;
            ss << in.rdbuf();
            res.set_content(ss.str(), "application/json");
          });
  api.get("/", "/", [](const httplib::Request& req, httplib::Response& res, Context& ctx) {
    if (wants_html(req)) return send_page(res, ctx.config); // a browser: the page
    send_json(res, {{"service", "dtxd"},
                    {"api", "/v1/openapi.json"},
                    {"explorations", "/v1/explorations"},
                    {"health", "/healthz"},
                    {"metrics", "/metrics"}});
  });
}

} // namespace dtx::server
