// The HTTP layer of dtxd (see Api.h).
#include "Api.h"

#include "Connection.h"
#include "Guard.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <regex>

namespace dtx::server {

std::string json_text(const nlohmann::json& body) {
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void send_json(httplib::Response& res, const nlohmann::json& body, int status) {
  res.status = status;
  // Text from a worker, a stored row or a diagnostic quoting a stray byte may not be UTF-8:
  // replaced (U+FFFD), so that no answer fails to print.
  res.set_content(json_text(body), "application/json");
}

nlohmann::json body_json(const httplib::Request& req) {
  nlohmann::json j = nlohmann::json::parse(req.body, nullptr, false);
  if (j.is_discarded()) throw ApiError(400, "malformed_json", "the request body is not valid JSON");
  if (!j.is_object()) throw ApiError(400, "bad_request", "the request body must be a JSON object");
  return j;
}

std::int64_t path_id(const httplib::Request& req, int group) {
  // The routes match digits only: an id too large for 64 bits is a number, of nothing stored.
  std::string text = req.matches[group].str();
  try {
    return std::stoll(text);
  } catch (const std::exception&) {
    throw ApiError(404, "not_found",
                   "no id " + text.substr(0, 40) + " is stored (ids are below 2^63)");
  }
}

std::int64_t query_number(const httplib::Request& req, const char* key, std::int64_t fallback,
                          const NumberRule& rule) {
  if (!req.has_param(key)) return fallback;
  std::string text = req.get_param_value(key);
  if (std::string p = rule.problem(text); !p.empty())
    throw ApiError(400, "bad_parameter",
                   std::string("`") + key + "` is " + rule.describe() + ", not `" +
                       text.substr(0, 40) + "`",
                   key);
  return std::stoll(text);
}

NumberRule offset_rule() {
  return {0, 1e12, true};
}

NumberRule limit_rule(double max_limit) {
  return {1, max_limit, true};
}

httplib::Server::Handler Api::wrap(const std::string& method, const std::string& route, Handler h,
                                   bool write) {
  return [this, method, route, h, write](const httplib::Request& req, httplib::Response& res) {
    auto start = std::chrono::steady_clock::now();
    try {
      // The page itself is no secret: a browser cannot send a token when it opens a URL, and
      // the page asks for one before it reads anything.
      bool page = route == "/" && req.method == "GET" && wants_html(req);
      if (req.method == "POST")
        if (auto refused = refuse_content(req)) throw *refused;
      // Every POST needs the token (a compile or an expansion costs the server's time too).
      bool guarded =
          write || req.method == "POST" ||
          (ctx_.config.protect_reads && route != "/healthz" && route != "/metrics" && !page);
      if (guarded && !ctx_.config.tokens.empty()) {
        std::string auth = req.get_header_value("Authorization");
        if (!token_accepted(auth, ctx_.config.tokens))
          throw ApiError(401, "unauthorized",
                         auth.empty()
                             ? "this server needs a token: send `Authorization: Bearer TOKEN`"
                             : "the token was not accepted: check it (`Authorization: Bearer "
                               "TOKEN`, a token dtxd was started with)");
      }
      h(req, res, ctx_);
    } catch (const ApiError& e) {
      nlohmann::json err = {{"code", e.code}, {"message", e.what()}};
      if (!e.field.empty()) err["field"] = e.field;
      if (!e.details.is_null()) err["details"] = e.details;
      send_json(res, {{"error", err}}, e.status);
    } catch (const results::StoreError& e) {
      // A disk that is full, a read-only file: not the request's fault nor a bug; a retry
      // succeeds once the store can be written again (/healthz says when).
      ctx_.log->error("{} {}: {}", method, req.path, e.what());
      if (e.unwritable()) {
        res.set_header("Retry-After", "10");
        send_json(
            res,
            {{"error",
              {{"code", "store_unwritable"},
               {"message", std::string("the results store cannot be written: ") + e.what()}}}},
            503);
      } else {
        send_json(res, {{"error", {{"code", "internal"}, {"message", e.what()}}}}, 500);
      }
    } catch (const std::exception& e) {
      ctx_.log->error("{} {}: {}", method, req.path, e.what());
      send_json(res, {{"error", {{"code", "internal"}, {"message", e.what()}}}}, 500);
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ctx_.metrics.request(route, method, res.status, s);
    ctx_.log->debug("{} {} -> {} in {:.1f} ms", method, req.path, res.status, s * 1000);
  };
}

void Api::get(const std::string& pattern, const std::string& route, Handler h) {
  routes_.emplace_back("get", route);
  patterns_.emplace_back("GET", pattern);
  http_.Get(pattern, wrap("GET", route, std::move(h), false));
}

void Api::post(const std::string& pattern, const std::string& route, Handler h, bool write) {
  routes_.emplace_back("post", route);
  patterns_.emplace_back("POST", pattern);
  http_.Post(pattern, wrap("POST", route, std::move(h), write));
}

void Api::page(const std::string& pattern, httplib::Server::Handler handler) {
  patterns_.emplace_back("GET", pattern);
  http_.Get(pattern, std::move(handler));
}

void Api::static_files(const std::string& pattern) {
  patterns_.emplace_back("GET", pattern);
}

const Config& Api::config() const {
  return ctx_.config;
}

void Api::finish() {
  auto patterns = patterns_;
  const Config* config = &ctx_.config;
  // No route for the method and path: 405 with `Allow` on a known path, else 404.
  auto unrouted = [patterns](const httplib::Request& req, httplib::Response& res) {
    std::string allow;
    for (const auto& [method, pattern] : patterns)
      if (std::regex_match(req.path, std::regex(pattern)) &&
          allow.find(method) == std::string::npos)
        allow += (allow.empty() ? "" : ", ") + method;
    // No route, or a route for this method that found nothing (a file not under a mount).
    if (allow.empty() || allow.find(req.method) != std::string::npos) {
      send_json(res, {{"error", {{"code", "not_found"}, {"message", "no route " + req.path}}}},
                404);
      return;
    }
    res.set_header("Allow", allow);
    send_json(res,
              {{"error",
                {{"code", "method_not_allowed"},
                 {"message", req.method + " is not allowed on " + req.path + "; use " + allow}}}},
              405);
  };
  auto other = [unrouted, config](const httplib::Request& req, httplib::Response& res) {
    // A browser asking for a page the page does not have: the page says so, with its links.
    if (req.method == "GET" && wants_html(req) && req.path.rfind("/v1/", 0) != 0) {
      try {
        send_page(res, *config);
        res.status = 404;
        return;
      } catch (const ApiError&) {
        // No page to show: the JSON answer below.
      }
    }
    unrouted(req, res);
  };
  http_.Get(".*", other);
  http_.Post(".*", other);
  http_.Put(".*", other);
  http_.Delete(".*", other);
  http_.Patch(".*", other);
  http_.Options(".*", other);
  // What httplib answers by itself, with no body: JSON too, as every answer of the API.
  http_.set_error_handler([unrouted](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    auto error = [&](const std::string& code, const std::string& message) {
      send_json(res, {{"error", {{"code", code}, {"message", message}}}}, res.status);
    };
    if (res.status == 400) {
      // A method httplib routes nothing for (TRACE, CONNECT) or does not parse at all (QUERY, a
      // request line it refuses before reading the path): the answer of any other method.
      bool unknown = req.path.empty() && !req.method.empty() && !req.target.empty() &&
                     (req.version == "HTTP/1.1" || req.version == "HTTP/1.0") &&
                     std::all_of(req.method.begin(), req.method.end(),
                                 [](unsigned char c) { return std::isupper(c); });
      if (unknown || (!req.path.empty() && (req.method == "TRACE" || req.method == "CONNECT"))) {
        httplib::Request as_routed;
        as_routed.method = req.method;
        as_routed.path =
            unknown ? httplib::detail::decode_url(req.target.substr(0, req.target.find('?')), false)
                    : req.path;
        return unrouted(as_routed, res);
      }
      // A multipart body without its boundary, refused by httplib before the handler could.
      if (!req.path.empty() && req.method == "POST")
        if (auto refused = refuse_content(req)) {
          res.status = refused->status;
          return error(refused->code, refused->what());
        }
      return error("bad_request", malformed_request(req));
    }
    if (res.status == 404)
      error("not_found", "no route " + req.path);
    else if (res.status == 413)
      error("too_large", "the request body is too large");
    else if (res.status == 414)
      error("uri_too_long", "the request line is too long");
    else if (res.status == 416)
      error("bad_range", "the `Range` header is not one this server reads");
    else
      error("http_error",
            "the request could not be served (HTTP " + std::to_string(res.status) + ")");
  });
  // httplib reads a body only for POST, PUT, PATCH and DELETE, and only once routing begins: a
  // body it left unread (a GET's, a request refused before routing), or the rest of a request
  // it could not parse, would be read as the next request on the connection, and every later
  // answer on it would be one request off. The client is told to close the connection instead.
  http_.set_post_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    std::string length = req.get_header_value("Content-Length");
    bool has_body =
        req.has_header("Transfer-Encoding") || length.find_first_not_of('0') != std::string::npos;
    if ((has_body && req.body.empty()) || req.path.empty()) {
      res.headers.erase("Keep-Alive");
      res.set_header("Connection", "close");
    }
    // Whoever said so (a refusal before routing too): the connection ends with this answer.
    if (res.get_header_value("Connection") == "close") close_after_response();
  });
}

nlohmann::json to_json(const results::MeasurementRecord& m) {
  nlohmann::json j = {{"id", m.id},
                      {"protocol", m.protocol},
                      {"status", m.status},
                      {"message", m.message},
                      {"rounds", m.rounds},
                      {"compile_s", m.compile_s},
                      {"device", m.env.device_name},
                      {"device_kind", m.env.device_kind},
                      {"driver", m.env.driver},
                      {"cuda", m.env.cuda},
                      {"torch", m.env.torch},
                      {"triton", m.env.triton},
                      {"host", m.env.host},
                      {"node", m.env.node},
                      // Not `gpu`: that is the CUDA-graph time, below.
                      {"gpu_index", m.env.gpu ? nlohmann::json(*m.env.gpu) : nlohmann::json()},
                      {"created_at", m.created_at}};
  auto q = [](const results::TimeQuantiles& t) {
    return nlohmann::json{{"median_ms", t.median_ms}, {"q20_ms", t.q20_ms}, {"q80_ms", t.q80_ms},
                          {"min_ms", t.min_ms},       {"max_ms", t.max_ms}, {"samples", t.samples}};
  };
  if (m.time_ms) j["time_ms"] = *m.time_ms;
  if (m.time_stdev_ms) j["time_stdev_ms"] = *m.time_stdev_ms;
  if (m.bench) j["bench"] = q(*m.bench);
  if (m.gpu) j["gpu"] = q(*m.gpu);
  if (m.host_us) j["host_us"] = *m.host_us;
  if (m.rel_l2) j["rel_l2"] = *m.rel_l2;
  if (m.max_abs) j["max_abs"] = *m.max_abs;
  return j;
}

nlohmann::json to_json(const ExploreProgress& p) {
  nlohmann::json j = {{"phase", p.phase},
                      {"done", p.done},
                      {"budget", p.budget},
                      {"proposed", p.proposed},
                      {"rejected", p.rejected},
                      {"duplicates", p.duplicates},
                      {"reused", p.reused},
                      {"failed", p.failed},
                      {"elapsed_s", p.elapsed_s},
                      {"phase_done", p.phase_done},
                      {"phase_total", p.phase_total},
                      {"best_schedule", p.best_schedule},
                      {"best_baseline", p.best_baseline}};
  if (p.best_ms) j["best_ms"] = *p.best_ms;
  if (p.best_baseline_ms) j["best_baseline_ms"] = *p.best_baseline_ms;
  if (p.eta_s) j["eta_s"] = *p.eta_s;
  return j;
}

nlohmann::json to_json(const results::Exploration& x, const Context& ctx) {
  nlohmann::json settings = nlohmann::json::parse(x.spec.settings_json, nullptr, false);
  bool overflowed = space_size_overflowed(x.space_size); // a lower bound, then
  nlohmann::json j = {{"id", x.id},
                      {"url", "/v1/explorations/" + std::to_string(x.id)},
                      {"kernel", x.spec.kernel},
                      {"shape", x.spec.shape},
                      {"dtype", x.spec.dtype},
                      {"strategy", x.spec.strategy},
                      {"state", results::state_name(x.state)},
                      {"message", x.message},
                      {"space_size", overflowed ? kSpaceSizeKept : x.space_size},
                      {"space_overflowed", overflowed},
                      {"candidates", x.candidates},
                      {"measured", x.measured},
                      {"failed", x.failed},
                      {"device", x.device_name},
                      {"created_at", x.created_at},
                      {"updated_at", x.updated_at}};
  if (!settings.is_discarded()) {
    j["budget"] = settings_from_json(settings).budget;
    j["baselines"] = nlohmann::json::array();
    for (const auto& b : settings.value("baselines", nlohmann::json::array()))
      j["baselines"].push_back(b.value("name", ""));
  }
  if (x.best_ms) {
    j["best_ms"] = *x.best_ms;
    j["best_protocol"] = x.best_protocol;
  }
  if (x.best_baseline_ms) {
    j["best_baseline_ms"] = *x.best_baseline_ms;
    j["best_baseline_protocol"] = x.best_baseline_protocol;
  }
  // A speed-up compares times of one protocol only.
  if (x.best_ms && x.best_baseline_ms && x.best_protocol == x.best_baseline_protocol)
    j["speedup"] = *x.best_baseline_ms / *x.best_ms;
  if (auto e = ctx.scheduler.latest(x.id)) j["progress"] = to_json(e->progress);
  if (x.lease) j["runner"] = to_json(*x.lease, ctx);
  if (auto why = ctx.scheduler.paused(x.id)) j["paused"] = *why;
  return j;
}

nlohmann::json to_json(const results::Lease& lease, const Context& ctx) {
  return {{"program", lease.holder.program},
          {"host", lease.holder.host},
          {"pid", lease.holder.pid},
          {"instance", lease.holder.instance},
          {"here", lease.holder.instance == ctx.scheduler.holder().instance},
          {"live", lease.live()},
          {"acquired_at", lease.acquired_at},
          {"renewed_at", lease.renewed_at},
          {"expires_at", lease.expires_at}};
}

} // namespace dtx::server
