// GET /v1/schedules/{id}: the canonical text, the full DT program, the generated module and
// every measurement of its code; GET /v1/best: the best correct schedule for CI.
#include "../Api.h"

#include <cctype>
#include <chrono>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>

namespace dtx::server {
namespace {

/// The algorithm with its schedule statements replaced by `canonical` (one per line); its
/// `compile` statements stay.
/// Whether `line` starts a schedule statement other than `compile` (`f.block(`, spaces allowed
/// around the dot and before the parenthesis). A scan in one pass over the line: no regex,
/// whose executor recurses once per character of user text.
bool starts_schedule_statement(const std::string& line) {
  static const std::set<std::string> primitives = {"block",     "tensorize", "map",      "fuse_at",
                                                   "atomic",    "precision", "relayout", "index",
                                                   "num_warps", "num_stages"};
  auto is_word = [](char c, bool first) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' ||
           (!first && std::isdigit(static_cast<unsigned char>(c)));
  };
  auto space = [&](std::size_t i) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i])))
      ++i;
    return i;
  };
  auto word = [&](std::size_t i) {
    std::size_t start = i;
    while (i < line.size() && is_word(line[i], i == start))
      ++i;
    return i;
  };
  std::size_t i = space(0), end = word(i);
  if (end == i) return false;
  i = space(end);
  if (i >= line.size() || line[i] != '.') return false;
  i = space(i + 1);
  end = word(i);
  if (!primitives.count(line.substr(i, end - i))) return false;
  i = space(end);
  return i < line.size() && line[i] == '(';
}

std::string program_with(const std::string& algorithm, const std::string& canonical) {
  std::istringstream in(algorithm);
  std::string line, out, compiles;
  while (std::getline(in, line)) {
    if (starts_schedule_statement(line)) continue;
    if (line.find(".compile") != std::string::npos) {
      compiles += line + "\n";
      continue;
    }
    out += line + "\n";
  }
  while (out.size() > 1 && out[out.size() - 1] == '\n' && out[out.size() - 2] == '\n')
    out.pop_back();
  out += "\n";
  std::istringstream parts(canonical);
  std::string s;
  while (std::getline(parts, s, ';'))
    if (!s.empty()) out += s + ";\n";
  return out + compiles;
}

/// A query parameter as written: `shape=x=1024,y=512` keeps its `=` and `,` unencoded, as CI
/// scripts write it (httplib's parsed value stops at the second `=`).
std::string raw_param(const httplib::Request& req, const std::string& key) {
  const std::string& t = req.target;
  size_t q = t.find('?');
  while (q != std::string::npos) {
    size_t start = q + 1;
    size_t end = t.find('&', start);
    std::string item = t.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (item.rfind(key + "=", 0) == 0)
      return httplib::detail::decode_url(item.substr(key.size() + 1), true);
    q = end;
  }
  return req.get_param_value(key);
}

/// Answers of /v1/best for a second, each with the count of the store's writes it was read
/// at: a write by this daemon (a schedule measured, an exploration ended) makes it stale at
/// once; one by another process shows up a second later at most.
class BestCache {
public:
  std::optional<std::pair<int, std::string>> get(const std::string& key, std::int64_t writes) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end() || it->second.writes != writes || Clock::now() - it->second.at > kLife)
      return std::nullopt;
    return std::make_pair(it->second.status, it->second.body);
  }
  void put(const std::string& key, std::int64_t writes, int status, std::string body) {
    std::lock_guard lock(mutex_);
    if (entries_.size() > 10000) entries_.clear();
    entries_[key] = {status, std::move(body), writes, Clock::now()};
  }

private:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kLife{1};
  struct Entry {
    int status;
    std::string body;
    std::int64_t writes;
    Clock::time_point at;
  };
  std::mutex mutex_;
  std::unordered_map<std::string, Entry> entries_;
};

BestCache& best_cache() {
  static BestCache cache;
  return cache;
}

} // namespace

void register_schedules(Api& api) {
  api.get(R"(/v1/schedules/(\d+))", "/v1/schedules/{id}",
          [](const httplib::Request& req, httplib::Response& res, Context& ctx) {
            std::int64_t id = path_id(req);
            auto s = ctx.store.schedule(id);
            if (!s) throw ApiError(404, "not_found", "no schedule " + std::to_string(id));
            nlohmann::json measurements = nlohmann::json::array();
            std::int64_t exploration = s->exploration_id;
            for (const auto& h : ctx.store.history(s->code_hash)) {
              nlohmann::json m = to_json(h.measurement);
              m["exploration"] = h.exploration_id;
              measurements.push_back(m);
            }
            nlohmann::json j = {
                {"id", id},        {"canonical", s->canonical},   {"code_hash", s->code_hash},
                {"rank", s->rank}, {"index", s->candidate_index}, {"measurements", measurements}};
            if (auto module = ctx.store.module_source(s->code_hash)) j["module"] = *module;
            if (exploration) {
              auto x = ctx.store.exploration(exploration);
              j["exploration"] = exploration;
              j["kernel"] = x->spec.kernel;
              j["shape"] = x->spec.shape;
              j["dtype"] = x->spec.dtype;
              j["program"] = program_with(x->spec.algorithm, s->canonical);
            }
            if (s->screen) j["screen"] = to_json(*s->screen);
            if (s->full) j["full"] = to_json(*s->full);
            send_json(res, j);
          });

  api.get(
      "/v1/best", "/v1/best",
      [](const httplib::Request& req, httplib::Response& res, Context& ctx) {
        if (!req.has_param("kernel") || !req.has_param("shape"))
          throw ApiError(400, "missing_parameter", "give `kernel` and `shape` (as x=1024,y=512)",
                         req.has_param("kernel") ? "shape" : "kernel");
        std::string kernel = req.get_param_value("kernel");
        std::string dtype = req.has_param("dtype") ? req.get_param_value("dtype") : "float32";
        // The names an exploration can have (as `dtx best` checks them).
        if (std::string p = kernel_name_problem(kernel); !p.empty())
          throw ApiError(400, "bad_parameter", p, "kernel");
        if (std::string p = dtype_problem(dtype); !p.empty())
          throw ApiError(400, "bad_parameter", p, "dtype");
        results::Shape shape;
        try {
          shape = results::parse_shape(raw_param(req, "shape"));
        } catch (const std::invalid_argument& e) {
          throw ApiError(400, "bad_parameter", e.what(), "shape");
        }
        if (shape.empty())
          throw ApiError(400, "bad_parameter",
                         "`shape` is empty: give the sizes by label, as x=1024,y=512", "shape");
        std::optional<std::string> device;
        if (req.has_param("device")) device = req.get_param_value("device");
        // CI jobs ask for the same few answers over and over: each is kept for a second
        // (a result stored by another process shows up that much later, at most).
        std::string key =
            kernel + "\n" + results::shape_key(shape) + "\n" + dtype + "\n" + device.value_or("");
        const std::int64_t writes = ctx.store.writes(); // read before the answer is
        if (auto hit = best_cache().get(key, writes)) {
          res.status = hit->first;
          res.set_content(hit->second, "application/json");
          return;
        }
        auto best = ctx.store.best(kernel, results::shape_key(shape), dtype, device);
        if (!best) {
          nlohmann::json err = {
              {"error",
               {{"code", "no_result"},
                {"message", "no correct schedule of `" + kernel + "` is known at " +
                                results::shape_key(shape) + " in " + dtype +
                                (device ? " on a device matching `" + *device + "`" : "") +
                                "; POST /v1/explorations to explore it"}}}};
          best_cache().put(key, writes, 404, json_text(err));
          send_json(res, err, 404);
          return;
        }
        nlohmann::json j = {{"kernel", best->kernel},
                            {"canonical", best->canonical},
                            {"schedule_id", best->schedule_id},
                            {"schedule_url", "/v1/schedules/" + std::to_string(best->schedule_id)},
                            {"exploration", best->exploration_id},
                            {"code_hash", best->code_hash},
                            {"module", best->module_source},
                            {"measurement", to_json(best->measurement)}};
        best_cache().put(key, writes, 200, json_text(j));
        send_json(res, j);
      });
}

} // namespace dtx::server
