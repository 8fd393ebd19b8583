#pragma once
// The HTTP layer of dtxd: routes registered with their name (for metrics and the OpenAPI test),
// JSON helpers, errors as `{"error": {"code", "message", "field"?}}`, and bearer tokens.
// One file per group of handlers in handlers/.
#include "Metrics.h"
#include "Scheduler.h"

#include "dtx/Request.h"
#include "dtx/server/Config.h"

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <spdlog/logger.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtx::server {

/// A request the server refuses: HTTP status, a code, a message, and the field at fault.
struct ApiError : std::runtime_error {
  ApiError(int status_, std::string code_, const std::string& message, std::string field_ = "",
           nlohmann::json details_ = nullptr)
      : std::runtime_error(message), status(status_), code(std::move(code_)),
        field(std::move(field_)), details(std::move(details_)) {}
  int status;
  std::string code, field;
  nlohmann::json details; // e.g. diagnostics with line and column
};

struct Context {
  const Config& config;
  results::Store& store;
  Scheduler& scheduler;
  Metrics& metrics;
  std::shared_ptr<spdlog::logger> log;
};

using Handler = std::function<void(const httplib::Request&, httplib::Response&, Context&)>;

class Api {
public:
  Api(httplib::Server& http, Context& context) : http_(http), ctx_(context) {}
  /// `pattern` is httplib's (a regex for paths with ids); `route` names it in metrics and in
  /// the OpenAPI document (`/v1/explorations/{id}`). `write`: needs a token when tokens are set.
  void get(const std::string& pattern, const std::string& route, Handler h);
  void post(const std::string& pattern, const std::string& route, Handler h, bool write = true);
  /// Every registered (method, route).
  const std::vector<std::pair<std::string, std::string>>& routes() const { return routes_; }
  /// A page URL of the web page: GET answers with `handler`, other methods 405 (not in
  /// routes(): the API's OpenAPI document does not list pages).
  void page(const std::string& pattern, httplib::Server::Handler handler);
  /// Paths a mount point serves (GET only): other methods on them answer 405.
  void static_files(const std::string& pattern);
  /// After every route: other methods on a known path answer 405 with `Allow`, unknown paths
  /// 404; what httplib answers by itself is JSON too, and the answer to a request whose body
  /// httplib left unread closes the connection (`Connection: close`).
  void finish();
  const Config& config() const;

private:
  httplib::Server::Handler wrap(const std::string& method, const std::string& route, Handler h,
                                bool write);
  httplib::Server& http_;
  Context& ctx_;
  std::vector<std::pair<std::string, std::string>> routes_;
  std::vector<std::pair<std::string, std::string>> patterns_; // (method, regex)
};

void send_json(httplib::Response& res, const nlohmann::json& body, int status = 200);
/// `body` as JSON text, invalid UTF-8 in its strings replaced by U+FFFD (never a throw).
std::string json_text(const nlohmann::json& body);
/// The request body as a JSON object (ApiError 400 when it is not).
nlohmann::json body_json(const httplib::Request& req);
/// The id of the path's group `group` (404 when it is too large to be one).
std::int64_t path_id(const httplib::Request& req, int group = 1);
/// A whole-number query parameter (`offset`, `limit`) checked by `rule`, or `fallback` when the
/// query has none: anything else (`1e3`, `-5`, a number out of range) is an ApiError 400 naming
/// the parameter and its range, never a number made up.
std::int64_t query_number(const httplib::Request& req, const char* key, std::int64_t fallback,
                          const NumberRule& rule);
/// The paging rules of the lists: `offset` from 0, `limit` from 1 to `max_limit`.
NumberRule offset_rule();
NumberRule limit_rule(double max_limit);

// JSON of stored rows, shared by handlers.
nlohmann::json to_json(const results::MeasurementRecord& m);
nlohmann::json to_json(const results::Exploration& x, const Context& ctx);
nlohmann::json to_json(const ExploreProgress& p);
/// Who runs an exploration: its lease's holder and times, whether it is live, and whether the
/// holder is this process (`here`).
nlohmann::json to_json(const results::Lease& lease, const Context& ctx);

// One registration function per file of handlers/.
void register_system(Api& api);       // /healthz, /metrics, /v1/openapi.json
void register_compile(Api& api);      // /v1/compile
void register_expand(Api& api);       // /v1/expand
void register_explorations(Api& api); // /v1/explorations..., /explore
void register_columns(Api& api);      // /v1/explorations/{id}/columns
void register_schedules(Api& api);    // /v1/schedules/{id}, /v1/best
void register_templates(Api& api);    // /v1/templates

// The web page (Web.cpp): static files, vendored libraries and page URLs; before Api::finish.
void register_web(Api& api, httplib::Server& http, spdlog::logger& log);
/// Whether a request comes from a browser asking for a page (Accept: text/html).
bool wants_html(const httplib::Request& req);
/// web/index.html, with the page's security headers.
void send_page(httplib::Response& res, const Config& config);

/// A request body with the fields of a template file, checked (check_request, the rules dtx
/// follows too): the template file it stands for, its shapes and settings, the parsed
/// algorithm and template. ApiError for anything wrong, with the field named.
struct TemplateRequest {
  TemplateFile file;
  std::vector<ShapeSizes> shapes;
  ExploreSettings settings;
  CheckedRequest checked;
};
TemplateRequest request_from_json(const nlohmann::json& body, const Config& config);

/// Exploration jobs from a request body (one job per shape). Shared with the example.
std::vector<ExploreJob> jobs_from_json(const nlohmann::json& body, const Config& config);

} // namespace dtx::server
