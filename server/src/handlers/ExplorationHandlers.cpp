// POST /v1/explorations (and POST /explore), GET /v1/explorations, GET /v1/explorations/{id},
// its events (server-sent), its cancel and its ranked schedules.
#include "../Api.h"
#include "../Connection.h"
#include "Variables.h"

#include "dtx/Request.h"
#include "dtx/Settings.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <set>

namespace dtx::server {
namespace {

std::string text_field(const nlohmann::json& b, const char* key, bool required) {
  if (!b.contains(key)) {
    if (required)
      throw ApiError(400, "missing_field", std::string("`") + key + "` is required", key);
    return "";
  }
  if (!b[key].is_string())
    throw ApiError(400, "bad_field", std::string("`") + key + "` must be a string", key);
  return b[key].get<std::string>();
}

ShapeSizes shape_of(const nlohmann::json& s, const std::string& field) {
  if (!s.is_object() || s.empty())
    throw ApiError(400, "bad_field", "a shape is an object of label to size, as {\"x\": 1024}",
                   field);
  ShapeSizes out;
  for (const auto& [label, size] : s.items()) {
    // Its range is checked with the rest of the shape (shape_problem), but for one beyond
    // 2^63 - 1: as a long long it would be a negative size.
    if (!size.is_number_integer())
      throw ApiError(400, "bad_field", "the size of `" + label + "` must be a whole number >= 1",
                     field);
    if (size.is_number_unsigned() &&
        size.get<std::uint64_t>() >
            static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      throw ApiError(400, "bad_field", "the size of `" + label + "` is over 2^63 - 1", field);
    out[label] = size.get<long long>();
  }
  return out;
}

/// A baseline named in a request: `torch`, `torch.compile`, `liger`, `helion`, `reference`, or a
/// file of the server's templates directory (never a path outside it: the workers run that code).
NamedBaseline baseline_of(const std::string& name, const std::string& kernel,
                          const Config& config) {
  if (std::string p = baseline_name_problem(name); !p.empty())
    throw ApiError(400, "bad_field", p, "baselines");
  std::string file = name.substr(0, name.find(':'));
  if (name != "torch" && name != "torch.compile" && name != "reference" &&
      (file.find('/') != std::string::npos || file.find("..") != std::string::npos))
    throw ApiError(400, "bad_field",
                   "baseline `" + name +
                       "`: name a file of the server's templates directory "
                       "(FILE.py:FUNCTION), not a path",
                   "baselines");
  try {
    return parse_baseline_entry(name, kernel, config.templates_dir);
  } catch (const std::invalid_argument& e) {
    throw ApiError(400, "bad_field", e.what(), "baselines");
  }
}

} // namespace

/// A broken rule as the API answers it: 400 naming the field, 422 with the diagnostics.
ApiError api_error(const RequestError& e) {
  nlohmann::json details = nullptr;
  if (!e.details.empty()) {
    details = nlohmann::json::array();
    for (const RequestError::Detail& d : e.details) {
      nlohmann::json j = {{"line", d.line}, {"col", d.col}, {"message", d.message}};
      if (e.kind == RequestError::Kind::AlgorithmError) {
        j["code"] = d.code;
        j["severity"] = d.severity;
      }
      details.push_back(j);
    }
  }
  switch (e.kind) {
  case RequestError::Kind::TemplateError:
    return ApiError(422, "template_error", e.what(), e.field, details);
  case RequestError::Kind::AlgorithmError:
    return ApiError(422, "algorithm_error", e.what(), e.field, details);
  case RequestError::Kind::BadField:
    break;
  }
  return ApiError(400, "bad_field", e.what(), e.field, details);
}

TemplateRequest request_from_json(const nlohmann::json& b, const Config& config) {
  // A template file's fields, and the settings a request carries (Settings.h).
  static const std::set<std::string> known = [] {
    std::set<std::string> k = {"kernel",   "algorithm", "algorithm_name", "source",
                               "schedule", "shapes",    "shape",          "dtype",
                               "compile",  "baselines", "test_shapes"};
    for (const Setting& s : settings())
      if (s.on(kRequestField)) k.insert(s.name);
    return k;
  }();
  for (const auto& [k, v] : b.items())
    if (!known.count(k)) throw ApiError(400, "unknown_field", "unknown field `" + k + "`", k);
  // What JSON needs (types, required fields) is checked here; what the fields mean, as for a
  // template file on dtx's command line, by check_request.
  TemplateRequest r;
  TemplateFile& tf = r.file;
  tf.kernel = text_field(b, "kernel", true);
  if (std::string p = kernel_name_problem(tf.kernel); !p.empty())
    throw ApiError(400, "bad_field", p, "kernel");
  if (b.contains("source") && b.contains("algorithm"))
    throw ApiError(400, "bad_field", "give `algorithm` or `source` (another name of it), not both",
                   "source");
  tf.algorithm = text_field(b, b.contains("source") ? "source" : "algorithm", true);
  tf.algorithm_name =
      b.contains("algorithm_name") ? text_field(b, "algorithm_name", false) : tf.kernel + ".dt";
  tf.schedule = text_field(b, "schedule", true);
  tf.name = "schedule";
  if (b.contains("dtype")) tf.dtype = text_field(b, "dtype", false);
  if (b.contains("compile")) {
    if (!b["compile"].is_array())
      throw ApiError(400, "bad_field", "`compile` is a list of Func names", "compile");
    for (const auto& f : b["compile"]) {
      if (!f.is_string()) throw ApiError(400, "bad_field", "`compile` lists names", "compile");
      tf.compile.push_back(f.get<std::string>());
    }
  }
  if (b.contains("baselines")) {
    if (!b["baselines"].is_array())
      throw ApiError(400, "bad_field", "`baselines` is a list, as [\"torch\", \"torch.compile\"]",
                     "baselines");
    for (const auto& x : b["baselines"]) {
      if (!x.is_string()) throw ApiError(400, "bad_field", "`baselines` lists names", "baselines");
      tf.baselines.push_back(baseline_of(x.get<std::string>(), tf.kernel, config));
    }
  }
  if (b.contains("shape")) r.shapes.push_back(shape_of(b["shape"], "shape"));
  if (b.contains("shapes")) {
    if (!b["shapes"].is_array() || b["shapes"].empty())
      throw ApiError(400, "bad_field", "`shapes` is a non-empty list of shapes", "shapes");
    for (const auto& s : b["shapes"])
      r.shapes.push_back(shape_of(s, "shapes"));
  }
  if (r.shapes.empty())
    throw ApiError(400, "missing_field", "give `shapes` (a list) or `shape`", "shapes");
  // A template file's field, taken so that a file's fields can be posted as they are: checked as
  // shapes, not used.
  if (b.contains("test_shapes")) {
    if (!b["test_shapes"].is_array())
      throw ApiError(400, "bad_field", "`test_shapes` is a list of shapes", "test_shapes");
    for (const auto& s : b["test_shapes"])
      for (const auto& [label, size] : shape_of(s, "test_shapes"))
        if (size < 1)
          throw ApiError(400, "bad_field",
                         "the size of `" + label + "` must be a whole number >= 1", "test_shapes");
  }

  // Each setting by its rule (the same as dtx's options and dtxd's `explore:` keys); the ones
  // left out take dtxd's defaults.
  ExploreSettings& s = r.settings;
  s = config.defaults;
  for (const Setting& f : settings()) {
    if (!f.on(kRequestField) || !b.contains(f.name)) continue;
    if (std::string p = f.problem(b[f.name]); !p.empty())
      throw ApiError(400, "bad_field", p, f.name);
    f.set(s, b[f.name]);
  }
  if (s.strategy == "exhaustive" && !b.contains("budget")) s.budget = 0;
  try {
    r.checked = check_request(tf, r.shapes, b.contains("shapes") ? "shapes" : "shape");
  } catch (const RequestError& e) {
    throw api_error(e);
  }
  return r;
}

std::vector<ExploreJob> jobs_from_json(const nlohmann::json& b, const Config& config) {
  TemplateRequest r = request_from_json(b, config);
  std::vector<ExploreJob> jobs;
  for (const ShapeSizes& shape : r.shapes)
    jobs.push_back({r.file, shape, r.settings, 0});
  return jobs;
}

void register_explorations(Api& api) {
  Handler create = [](const httplib::Request& req, httplib::Response& res, Context& ctx) {
    std::vector<ExploreJob> jobs = jobs_from_json(body_json(req), ctx.config);
    std::vector<results::ExplorationSpec> specs;
    for (const ExploreJob& job : jobs)
      specs.push_back(spec_of(job));
    // All of them, or none (a store that cannot be written: 503, and nothing half-stored).
    std::vector<std::int64_t> ids = ctx.store.create_explorations(specs);
    nlohmann::json created = nlohmann::json::array();
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      const ExploreJob& job = jobs[i];
      std::int64_t id = ids[i];
      ctx.scheduler.enqueue(id);
      created.push_back(
          {{"id", id}, {"url", "/v1/explorations/" + std::to_string(id)}, {"shape", job.shape}});
      ctx.log->info("exploration {} queued: {} at {}", id, job.file.kernel,
                    results::shape_key(results::Shape(job.shape.begin(), job.shape.end())));
    }
    res.set_header("Location", created[0]["url"].get<std::string>());
    send_json(res,
              {{"id", created[0]["id"]}, {"url", created[0]["url"]}, {"explorations", created}},
              202);
  };
  api.post("/v1/explorations", "/v1/explorations", create);
  api.post("/explore", "/explore", create);

  api.get("/v1/explorations", "/v1/explorations",
          [](const httplib::Request& req, httplib::Response& res, Context& ctx) {
            results::ExplorationQuery q;
            if (req.has_param("kernel")) q.kernel = req.get_param_value("kernel");
            if (req.has_param("kernel_contains")) {
              q.kernel_contains = req.get_param_value("kernel_contains");
              if (q.kernel_contains->size() > 200)
                throw ApiError(400, "bad_parameter", "`kernel_contains` is at most 200 bytes",
                               "kernel_contains");
            }
            if (req.has_param("state")) {
              q.state = results::parse_state(req.get_param_value("state"));
              if (!q.state)
                throw ApiError(400, "bad_parameter",
                               "`state` is queued, running, done, failed or cancelled", "state");
            }
            q.offset = query_number(req, "offset", 0, offset_rule());
            q.limit = query_number(req, "limit", 50, limit_rule(1000));
            nlohmann::json list = nlohmann::json::array();
            for (const auto& x : ctx.store.explorations(q))
              list.push_back(to_json(x, ctx));
            send_json(res, {{"explorations", list}, {"offset", q.offset}, {"limit", q.limit}});
          });

  api.get(R"(/v1/explorations/(\d+))", "/v1/explorations/{id}",
          [](const httplib::Request& req, httplib::Response& res, Context& ctx) {
            auto x = ctx.store.exploration(path_id(req));
            if (!x) throw ApiError(404, "not_found", "no exploration " + req.matches[1].str());
            nlohmann::json j = to_json(*x, ctx);
            j["rejected"] = ctx.store.rejections(x->id);
            j["template"] = x->spec.template_text;
            j["algorithm"] = x->spec.algorithm;
            send_json(res, j);
          });

  api.post(R"(/v1/explorations/(\d+)/cancel)", "/v1/explorations/{id}/cancel",
           [](const httplib::Request& req, httplib::Response& res, Context& ctx) {
             std::int64_t id = path_id(req);
             // A cancel has no fields: no body, or an empty object.
             if (!req.body.empty())
               if (nlohmann::json b = body_json(req); !b.empty())
                 throw ApiError(400, "unknown_field", "unknown field `" + b.begin().key() + "`",
                                b.begin().key());
             auto x = ctx.store.exploration(id);
             if (!x) throw ApiError(404, "not_found", "no exploration " + std::to_string(id));
             Scheduler::CancelResult r = ctx.scheduler.cancel(id);
             if (r.outcome == Scheduler::Cancel::Elsewhere)
               throw ApiError(409, "running_elsewhere",
                              describe_lease(*r.holder) + "; cancel it there", "",
                              nlohmann::json::array({to_json(*r.holder, ctx)}));
             if (r.outcome == Scheduler::Cancel::NotActive) {
               x = ctx.store.exploration(id);
               throw ApiError(409, "not_running",
                              "exploration " + std::to_string(id) + " is " +
                                  results::state_name(x ? x->state : results::State::Cancelled) +
                                  ", not queued or running");
             }
             send_json(res, {{"id", id}, {"cancelling", true}}, 202);
           });

  api.get(R"(/v1/explorations/(\d+)/schedules)", "/v1/explorations/{id}/schedules",
          [](const httplib::Request& req, httplib::Response& res, Context& ctx) {
            std::int64_t id = path_id(req);
            auto x = ctx.store.exploration(id);
            if (!x) throw ApiError(404, "not_found", "no exploration " + std::to_string(id));
            results::RankedQuery q;
            if (req.has_param("status")) q.status = req.get_param_value("status");
            q.offset = query_number(req, "offset", 0, offset_rule());
            q.limit = query_number(req, "limit", 100, limit_rule(10000));
            if (req.has_param("shape") && req.get_param_value("shape") != x->spec.shape)
              throw ApiError(400, "bad_parameter",
                             "exploration " + std::to_string(id) + " is at " + x->spec.shape,
                             "shape");
            nlohmann::json list = nlohmann::json::array();
            ScheduleVariables vars(*x);
            for (const auto& r : ctx.store.ranked(id, q)) {
              nlohmann::json j = {{"schedule_id", r.schedule_id},
                                  {"url", "/v1/schedules/" + std::to_string(r.schedule_id)},
                                  {"rank", r.rank},
                                  {"canonical", r.canonical},
                                  {"code_hash", r.code_hash},
                                  {"index", r.candidate_index},
                                  {"variables", vars.json_at(r.candidate_index)}};
              if (r.screen) j["screen"] = to_json(*r.screen);
              if (r.full) j["full"] = to_json(*r.full);
              list.push_back(j);
            }
            nlohmann::json baselines = nlohmann::json::array();
            for (const auto& bl : ctx.store.baselines(id))
              baselines.push_back({{"name", bl.name}, {"measurement", to_json(bl.measurement)}});
            send_json(res, {{"exploration", id},
                            {"shape", x->spec.shape},
                            {"schedules", list},
                            {"baselines", baselines},
                            {"offset", q.offset},
                            {"limit", q.limit}});
          });

  api.get(R"(/v1/explorations/(\d+)/events)", "/v1/explorations/{id}/events",
          [](const httplib::Request& req, httplib::Response& res, Context& ctx) {
            std::int64_t id = path_id(req);
            auto x = ctx.store.exploration(id);
            if (!x) throw ApiError(404, "not_found", "no exploration " + std::to_string(id));
            // Each open stream holds a connection's thread: a bounded number at once.
            std::shared_ptr<void> place = take_event_stream();
            if (!place) {
              res.set_header("Retry-After", "5");
              throw ApiError(503, "busy",
                             "dtxd has " + std::to_string(connection_counts().max_event_streams) +
                                 " event streams open (max_event_streams); poll GET "
                                 "/v1/explorations/" +
                                 std::to_string(id) + " or try again shortly");
            }
            auto last = std::make_shared<std::uint64_t>(0);
            auto ended = std::make_shared<bool>(false);
            Context* c = &ctx;
            res.set_header("Cache-Control", "no-cache");
            res.set_chunked_content_provider(
                "text/event-stream", [c, id, last, ended, place](size_t, httplib::DataSink& sink) {
                  if (*ended || stopping()) {
                    sink.done();
                    return true;
                  }
                  auto finished_event = [&] {
                    auto now = c->store.exploration(id);
                    nlohmann::json j = now ? to_json(*now, *c) : nlohmann::json::object();
                    std::string msg = "event: done\ndata: " + json_text(j) + "\n\n";
                    *ended = true;
                    return sink.write(msg.data(), msg.size());
                  };
                  auto e = c->scheduler.wait(id, *last, 15.0);
                  if (!e) {
                    // Not run by this process: its stored state is all there is.
                    auto now = c->store.exploration(id);
                    if (!now || (now->state != results::State::Queued &&
                                 now->state != results::State::Running))
                      return finished_event();
                    std::string ping = ": waiting\n\n";
                    return sink.write(ping.data(), ping.size());
                  }
                  if (e->seq == *last) {
                    std::string ping = ": alive\n\n";
                    return sink.write(ping.data(), ping.size());
                  }
                  *last = e->seq;
                  if (e->finished) return finished_event();
                  std::string msg = "event: progress\nid: " + std::to_string(e->seq) +
                                    "\ndata: " + json_text(to_json(e->progress)) + "\n\n";
                  return sink.write(msg.data(), msg.size());
                });
          });
}

} // namespace dtx::server
