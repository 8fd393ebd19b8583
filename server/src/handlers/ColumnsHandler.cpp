// GET /v1/explorations/{id}/columns: every schedule of an exploration in one answer, column by
// column (one array per field), for a page that plots tens of thousands of schedules; and the
// template's variables at each schedule, decoded from its index in the space.
#include "../Api.h"
#include "Variables.h"

#include "dtx/Explore.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>

namespace dtx::server {

struct VariableDecoder {
  std::unique_ptr<Space> space;
  std::vector<std::string> names;
};

namespace {

/// A readable name for each variable: a tie's own (`$BY`); an anonymous choice's statement and
/// the label its value is given for (`geglu.block.y`), or the statement alone (`geglu.num_warps`);
/// a `?` statement's `?geglu.fuse_at`. Repeated names get `#2`, `#3`.
std::vector<std::string> variable_names(const Template& t) {
  std::vector<std::string> names(t.variables.size());
  for (size_t i = 0; i < names.size(); ++i)
    names[i] = t.variables[i].name;
  std::function<void(const Pieces&, const std::string&)> walk = [&](const Pieces& pieces,
                                                                    const std::string& statement) {
    std::string before;
    for (const Piece& p : pieces) {
      if (p.kind == Piece::Kind::Text) {
        before += p.text;
        continue;
      }
      if (p.kind != Piece::Kind::Choice) {
        before += "0";
        continue;
      }
      const Variable& v = t.variables[static_cast<size_t>(p.var)];
      if (v.kind == Variable::Kind::Choice && v.name.find('@') != std::string::npos) {
        // `x:` right before the choice names its label.
        std::string s = before;
        while (!s.empty() && s.back() == ' ')
          s.pop_back();
        std::string label;
        if (!s.empty() && s.back() == ':') {
          s.pop_back();
          size_t k = s.size();
          while (k > 0 && (std::isalnum(static_cast<unsigned char>(s[k - 1])) || s[k - 1] == '_'))
            --k;
          label = s.substr(k);
        }
        names[static_cast<size_t>(p.var)] = statement + (label.empty() ? "" : "." + label);
      }
      for (const Pieces& alt : v.alternatives)
        walk(alt, statement);
      before += "0";
    }
  };
  for (const TemplateStatement& s : t.statements)
    walk(s.pieces, s.func + "." + s.primitive);
  std::map<std::string, int> seen;
  for (std::string& n : names)
    if (int k = ++seen[n]; k > 1) n += "#" + std::to_string(k);
  return names;
}

/// The space of an exploration, built once per exploration (explorations do not change their
/// algorithm, template or shape); null when it cannot be built (then no variables are given).
std::shared_ptr<const VariableDecoder> decoder_of(const results::Exploration& x) {
  // Keyed by what the space is built from, not by the id alone: ids repeat across stores (two
  // daemons in one process, a store replaced under the same path).
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const VariableDecoder>> cache;
  const std::string key = std::to_string(x.id) + '\0' + x.spec.algorithm + '\0' +
                          x.spec.template_text + '\0' + x.spec.shape + '\0' + x.spec.dtype + '\0' +
                          x.spec.settings_json;
  {
    std::lock_guard lock(mutex);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  std::shared_ptr<const VariableDecoder> out;
  try {
    ExploreJob job = job_of(x);
    auto algorithm =
        std::make_shared<const dtc::Algorithm>(job.file.program(), job.file.algorithm_name);
    if (algorithm->ok()) {
      auto d = std::make_shared<VariableDecoder>();
      d->space = std::make_unique<Space>(algorithm, job.file.parse_schedule(), job.shape,
                                         SpaceOptions{.dtype = job.file.dtype});
      d->names = variable_names(d->space->tmpl());
      out = d;
    }
  } catch (const std::exception&) {
    out = nullptr; // a stored template this build cannot read: no variables
  }
  std::lock_guard lock(mutex);
  if (cache.size() > 256) cache.clear();
  cache[key] = out;
  return out;
}

} // namespace

ScheduleVariables::ScheduleVariables(const results::Exploration& x) : decoder_(decoder_of(x)) {}

const std::vector<std::string>& ScheduleVariables::names() const {
  static const std::vector<std::string> none;
  return decoder_ ? decoder_->names : none;
}

std::vector<std::optional<std::string>> ScheduleVariables::at(std::int64_t index) const {
  const VariableDecoder* d = decoder_.get();
  if (!d || index < 0) return {};
  if (!d->space->overflowed() && static_cast<std::uint64_t>(index) >= d->space->size()) return {};
  return d->space->values(d->space->decode(static_cast<std::uint64_t>(index)));
}

nlohmann::json ScheduleVariables::json_at(std::int64_t index) const {
  nlohmann::json j = nlohmann::json::object();
  auto v = at(index);
  for (size_t i = 0; i < v.size() && i < names().size(); ++i)
    if (v[i]) j[names()[i]] = *v[i];
  return j;
}

namespace {

/// The answer of /columns is written as text: 50,000 schedules are a million values, which a
/// tree of JSON nodes takes most of a second to build and print.
class ColumnWriter {
public:
  std::string out;

  void key(const char* k) {
    out += first_ ? "" : ",";
    first_ = false;
    out += '"';
    out += k;
    out += "\":";
  }
  void open_object() {
    out += '{';
    first_ = true;
  }
  void close_object() {
    out += '}';
    first_ = false;
  }
  template <class T, class F> void array(const std::vector<T>& items, F write) {
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += ',';
      write(items[i]);
    }
    out += ']';
    first_ = false;
  }
  void number(std::int64_t v) { out += std::to_string(v); }
  /// Seven significant digits: a time to a tenth of a nanosecond in a millisecond.
  void number(const std::optional<double>& v) {
    if (!v || !std::isfinite(*v)) {
      out += "null";
      return;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.7g", *v);
    out += buf;
  }
  void string(const std::string& s) {
    // Plain printable ASCII as it is; anything else through nlohmann (escapes, bad UTF-8).
    for (unsigned char c : s)
      if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
        out += nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        return;
      }
    out += '"';
    out += s;
    out += '"';
  }
  void raw(const std::string& json) {
    out += json;
    first_ = false;
  }

private:
  bool first_ = true;
};

using Times = std::optional<results::ProtocolTimes>;

void write_times(ColumnWriter& w, const std::vector<results::ScheduleTimes>& rows,
                 Times results::ScheduleTimes::*which) {
  using Field = std::optional<double> results::ProtocolTimes::*;
  const std::pair<const char*, Field> fields[] = {
      {"time_ms", &results::ProtocolTimes::time_ms},
      {"median_ms", &results::ProtocolTimes::median_ms},
      {"q20_ms", &results::ProtocolTimes::q20_ms},
      {"q80_ms", &results::ProtocolTimes::q80_ms},
      {"gpu_ms", &results::ProtocolTimes::gpu_ms},
      {"host_us", &results::ProtocolTimes::host_us},
  };
  w.open_object();
  for (const auto& [name, field] : fields) {
    w.key(name);
    w.array(rows, [&](const results::ScheduleTimes& r) {
      const Times& t = r.*which;
      w.number(t ? (*t).*field : std::nullopt);
    });
  }
  w.close_object();
}

} // namespace

/// The last answers for settled explorations (done, failed, cancelled), whose schedules no
/// longer change: reading 50,000 schedules' times from the store takes half a second. An
/// answer is kept with what the exploration's summary was; a store written since (a process
/// measuring again) has another summary, and the answer is made again.
class ColumnsCache {
public:
  std::shared_ptr<const std::string> get(std::int64_t id, const std::string& key) {
    std::lock_guard lock(mutex_);
    for (const auto& e : entries_)
      if (e.id == id && e.key == key) return e.body;
    return nullptr;
  }
  void put(std::int64_t id, const std::string& key, std::shared_ptr<const std::string> body) {
    std::lock_guard lock(mutex_);
    std::erase_if(entries_, [&](const Entry& e) { return e.id == id; });
    entries_.insert(entries_.begin(), {id, key, std::move(body)});
    if (entries_.size() > kEntries) entries_.pop_back();
  }

private:
  static constexpr size_t kEntries = 4;
  struct Entry {
    std::int64_t id;
    std::string key;
    std::shared_ptr<const std::string> body;
  };
  std::mutex mutex_;
  std::vector<Entry> entries_;
};

std::string summary_key(const results::Exploration& x) {
  auto opt = [](const std::optional<double>& v) { return v ? std::to_string(*v) : "-"; };
  return results::state_name(x.state) + "|" + x.updated_at + "|" + std::to_string(x.measured) +
         "|" + std::to_string(x.failed) + "|" + opt(x.best_ms) + "|" + opt(x.best_baseline_ms);
}

void register_columns(Api& api) {
  api.get(R"(/v1/explorations/(\d+)/columns)", "/v1/explorations/{id}/columns",
          [](const httplib::Request& req, httplib::Response& res, Context& ctx) {
            std::int64_t id = path_id(req);
            auto x = ctx.store.exploration(id);
            if (!x) throw ApiError(404, "not_found", "no exploration " + std::to_string(id));
            static ColumnsCache cache;
            bool settled = x->state == results::State::Done || x->state == results::State::Failed ||
                           x->state == results::State::Cancelled;
            std::string key = summary_key(*x);
            auto send = [&](const std::string& body) {
              res.status = 200;
              // With its charset named, httplib sends it as it is: it compresses a plain
              // `application/json` for a browser with Brotli at its slowest setting, seconds for
              // the megabytes of 50,000 schedules that a local page reads in a fraction of one.
              res.set_content(body, "application/json; charset=utf-8");
            };
            if (settled)
              if (auto hit = cache.get(id, key)) return send(*hit);
            ScheduleVariables vars(*x);
            const auto& names = vars.names();
            std::vector<results::ScheduleTimes> rows = ctx.store.schedule_times(id);

            // Each variable's distinct values, in the order first seen; a schedule holds indices.
            std::vector<std::vector<std::string>> values(names.size());
            std::vector<std::map<std::string, int>> value_index(names.size());
            std::vector<std::vector<int>> at(names.size(), std::vector<int>(rows.size(), -1));
            for (size_t r = 0; r < rows.size(); ++r) {
              auto v = vars.at(rows[r].candidate_index);
              for (size_t i = 0; i < names.size() && i < v.size(); ++i) {
                if (!v[i]) continue;
                auto [it, fresh] =
                    value_index[i].emplace(*v[i], static_cast<int>(values[i].size()));
                if (fresh) values[i].push_back(*v[i]);
                at[i][r] = it->second;
              }
            }
            auto ranking = [](const results::ScheduleTimes& r) -> const Times& {
              return r.full ? r.full : r.screen;
            };

            ColumnWriter w;
            w.open_object();
            w.key("exploration");
            w.number(id);
            w.key("shape");
            w.string(x->spec.shape);
            w.key("count");
            w.number(static_cast<std::int64_t>(rows.size()));
            w.key("schedule_id");
            w.array(rows, [&](const auto& r) { w.number(r.schedule_id); });
            w.key("rank");
            w.array(rows, [&](const auto& r) { w.number(r.rank); });
            w.key("canonical");
            w.array(rows, [&](const auto& r) { w.string(r.canonical); });
            w.key("index");
            w.array(rows, [&](const auto& r) { w.number(r.candidate_index); });
            w.key("status");
            w.array(rows, [&](const auto& r) {
              const Times& m = ranking(r);
              w.string(m ? m->status : "unmeasured");
            });
            w.key("message");
            w.array(rows, [&](const auto& r) {
              const Times& m = ranking(r);
              w.string(m ? m->message : "");
            });
            // Measurement order: the schedule's first stored measurement (ids only grow).
            w.key("order");
            w.array(rows, [&](const auto& r) {
              std::int64_t first = 0;
              for (const Times* m : {&r.screen, &r.full})
                if (*m && (!first || (*m)->measurement_id < first)) first = (*m)->measurement_id;
              if (first)
                w.number(first);
              else
                w.raw("null");
            });
            w.key("screen");
            write_times(w, rows, &results::ScheduleTimes::screen);
            w.key("full");
            write_times(w, rows, &results::ScheduleTimes::full);
            w.key("variables");
            std::vector<size_t> var_index(names.size());
            for (size_t i = 0; i < names.size(); ++i)
              var_index[i] = i;
            w.array(var_index, [&](size_t i) {
              w.open_object();
              w.key("name");
              w.string(names[i]);
              w.key("values");
              w.array(values[i], [&](const std::string& v) { w.string(v); });
              w.key("at");
              w.array(at[i], [&](int k) {
                if (k < 0)
                  w.raw("null");
                else
                  w.number(k);
              });
              w.close_object();
            });
            nlohmann::json baselines = nlohmann::json::array();
            for (const auto& bl : ctx.store.baselines(id))
              baselines.push_back({{"name", bl.name}, {"measurement", to_json(bl.measurement)}});
            w.key("baselines");
            w.raw(json_text(baselines));
            w.close_object();
            auto body = std::make_shared<const std::string>(std::move(w.out));
            if (settled) cache.put(id, key, body);
            send(*body);
          });
}

} // namespace dtx::server
