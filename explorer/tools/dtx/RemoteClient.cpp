// Client mode of dtx (see RemoteClient.h), on cpp-httplib's client.
#include "RemoteClient.h"

#include "Commands.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <iomanip>
#include <iostream>

#ifdef DTX_HAVE_HTTP
#include <httplib.h>
#endif

namespace dtx::cli {

#ifndef DTX_HAVE_HTTP

namespace {
int unavailable() {
  std::cerr << "dtx: this build has no HTTP client (cpp-httplib was not found): --server is "
               "unavailable\n";
  return kUsageError;
}
} // namespace
int remote_explore(const Remote&, const TemplateFile&, const std::vector<ShapeSizes>&,
                   const ExploreSettings&, bool) {
  return unavailable();
}
int remote_results(const Remote&, std::int64_t, const std::string&, const std::string&,
                   std::int64_t, bool) {
  return unavailable();
}
int remote_best(const Remote&, const std::string&, const std::string&, const std::string&,
                const std::string&, const std::string&, bool) {
  return unavailable();
}

#else

namespace {

struct Answer {
  int status = 0;
  nlohmann::json body;
};

httplib::Client client(const Remote& r) {
  httplib::Client c(r.url);
  c.set_connection_timeout(10);
  c.set_read_timeout(600);
  if (!r.token.empty()) c.set_bearer_token_auth(r.token);
  return c;
}

Answer call(const Remote& r, const std::string& method, const std::string& path,
            const nlohmann::json& body = nullptr) {
  httplib::Client c = client(r);
  httplib::Result res =
      method == "POST"
          ? c.Post(path,
                   body.is_null()
                       ? std::string("{}")
                       : body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                   "application/json")
          : c.Get(path);
  if (!res)
    throw std::runtime_error("cannot reach dtxd at " + r.url + ": " +
                             httplib::to_string(res.error()));
  Answer a;
  a.status = res->status;
  a.body = nlohmann::json::parse(res->body, nullptr, false);
  return a;
}

/// The server's error, as `dtx: MESSAGE` (with diagnostics at their line where there are some).
int report(const Answer& a) {
  if (a.body.is_object() && a.body.contains("error")) {
    const auto& e = a.body["error"];
    std::cerr << "dtx: the server answered " << a.status << ": " << e.value("message", "")
              << (e.contains("field") ? " (`" + e["field"].get<std::string>() + "`)" : "") << "\n";
    if (e.contains("details"))
      for (const auto& d : e["details"])
        std::cerr << "  line " << d.value("line", 0) << ":" << d.value("col", 0) << ": "
                  << d.value("message", "") << "\n";
  } else {
    std::cerr << "dtx: the server answered " << a.status << "\n";
  }
  return a.status == 404 ? 3 : 1;
}

std::string progress_text(const nlohmann::json& p) {
  std::ostringstream o;
  o << "[" << p.value("done", 0);
  if (p.value("budget", 0)) o << "/" << p.value("budget", 0);
  o << "] " << p.value("phase", "");
  if (p.contains("best_ms")) {
    o << "  best " << fmt_ms(p["best_ms"].get<double>()) << " ms";
    if (p.contains("best_baseline_ms"))
      o << " (" << std::fixed << std::setprecision(2)
        << p["best_baseline_ms"].get<double>() / p["best_ms"].get<double>() << std::defaultfloat
        << "x " << p.value("best_baseline", "") << ")";
  }
  o << "  rejected " << p.value("rejected", 0) << ", failed " << p.value("failed", 0);
  return o.str();
}

void print_ranked(const nlohmann::json& page) {
  std::cout << " rank    time ms  protocol  schedule\n";
  for (const auto& s : page["schedules"]) {
    const nlohmann::json& m = s.contains("full") ? s["full"] : s.value("screen", nlohmann::json());
    std::cout << std::setw(5) << (s.value("rank", 0) ? std::to_string(s.value("rank", 0)) : "-")
              << "  " << std::setw(9)
              << (m.is_object() && m.contains("time_ms")
                      ? fmt_ms(m["time_ms"].get<double>())
                      : (m.is_object() ? m.value("status", "") : ""))
              << "  " << std::setw(8) << (s.contains("full") ? "full" : "screen") << "  "
              << s.value("canonical", "") << "\n";
  }
  for (const auto& b : page["baselines"]) {
    const auto& m = b["measurement"];
    std::cout << "  baseline " << b.value("name", "") << " (" << m.value("protocol", "") << "): "
              << (m.contains("time_ms") ? fmt_ms(m["time_ms"].get<double>()) + " ms"
                                        : m.value("status", ""))
              << "\n";
  }
}

} // namespace

int remote_explore(const Remote& r, const TemplateFile& tf, const std::vector<ShapeSizes>& shapes,
                   const ExploreSettings& s, bool json) {
  nlohmann::json body = {
      {"kernel", tf.kernel},     {"algorithm", tf.algorithm}, {"algorithm_name", tf.algorithm_name},
      {"schedule", tf.schedule}, {"shapes", shapes},          {"dtype", tf.dtype},
      {"compile", tf.compile}};
  body.update(request_fields(s));
  body["baselines"] = nlohmann::json::array();
  for (const NamedBaseline& b : tf.baselines)
    body["baselines"].push_back(b.name);
  Answer created = call(r, "POST", "/v1/explorations", body);
  if (created.status != 202) return report(created);
  nlohmann::json out = nlohmann::json::array();
  int rc = 0;
  for (const auto& e : created.body["explorations"]) {
    std::int64_t id = e["id"];
    std::cerr << "dtx: exploration " << id << " at " << r.url << e["url"].get<std::string>()
              << "\n";
    // Follow its events to the end.
    httplib::Client c = client(r);
    std::string buffer;
    auto res = c.Get("/v1/explorations/" + std::to_string(id) + "/events",
                     [&](const char* data, size_t n) {
                       buffer.append(data, n);
                       size_t end;
                       while ((end = buffer.find("\n\n")) != std::string::npos) {
                         std::string event = buffer.substr(0, end);
                         buffer.erase(0, end + 2);
                         size_t d = event.find("data: ");
                         if (event.rfind("event: progress", 0) == 0 && d != std::string::npos) {
                           auto p = nlohmann::json::parse(event.substr(d + 6), nullptr, false);
                           if (!p.is_discarded()) std::cerr << progress_text(p) << "\n";
                         }
                         if (event.rfind("event: done", 0) == 0) return false;
                       }
                       return true;
                     });
    (void)res; // a closed stream ends the wait either way; the state is read below
    Answer x = call(r, "GET", "/v1/explorations/" + std::to_string(id));
    Answer page = call(r, "GET", "/v1/explorations/" + std::to_string(id) + "/schedules?limit=10");
    if (x.status != 200 || page.status != 200) return report(x.status != 200 ? x : page);
    if (x.body.value("state", "") == "failed") { // as a local exploration: its reason, status 1
      std::cerr << "dtx: exploration " << id << " failed: " << x.body.value("message", "") << "\n";
      rc = 1;
    }
    if (json) {
      out.push_back({{"exploration", x.body}, {"top", page.body}});
      continue;
    }
    std::cout << "\nexploration " << id << ": " << x.body.value("kernel", "") << " at "
              << x.body.value("shape", "") << ", " << x.body.value("state", "") << ", "
              << x.body.value("measured", 0) << " measured on " << x.body.value("device", "")
              << "\n";
    print_ranked(page.body);
  }
  if (json) std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return rc;
}

int remote_results(const Remote& r, std::int64_t id, const std::string& kernel,
                   const std::string& state, std::int64_t limit, bool json) {
  // dtxd's pages hold at most 1000 explorations and 10000 schedules (it refuses more).
  if (id == 0) {
    std::string q = "/v1/explorations?limit=" + std::to_string(std::min<std::int64_t>(limit, 1000));
    if (!kernel.empty()) q += "&kernel=" + httplib::detail::encode_query_param(kernel);
    if (!state.empty()) q += "&state=" + state;
    Answer a = call(r, "GET", q);
    if (a.status != 200) return report(a);
    if (json) {
      std::cout << a.body["explorations"].dump(2, ' ', false,
                                               nlohmann::json::error_handler_t::replace)
                << "\n";
      return 0;
    }
    for (const auto& x : a.body["explorations"])
      std::cout << std::setw(5) << x.value("id", 0) << "  " << std::left << std::setw(12)
                << x.value("kernel", "") << "  " << std::setw(20) << x.value("shape", "") << "  "
                << std::setw(9) << x.value("state", "") << std::right << "  " << std::setw(6)
                << x.value("measured", 0) << "  "
                << (x.contains("best_ms") ? fmt_ms(x["best_ms"].get<double>()) + " ms" : "-")
                << "\n";
    return 0;
  }
  Answer a = call(r, "GET",
                  "/v1/explorations/" + std::to_string(id) +
                      "/schedules?limit=" + std::to_string(std::min<std::int64_t>(limit, 10000)));
  if (a.status != 200) return report(a);
  if (json)
    std::cout << a.body.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  else
    print_ranked(a.body);
  return 0;
}

int remote_best(const Remote& r, const std::string& kernel, const std::string& shape,
                const std::string& dtype, const std::string& device, const std::string& out,
                bool json) {
  std::string q = "/v1/best?kernel=" + kernel + "&shape=" + shape + "&dtype=" + dtype;
  if (!device.empty()) q += "&device=" + httplib::detail::encode_query_param(device);
  Answer a = call(r, "GET", q);
  if (a.status != 200) return report(a);
  if (!out.empty()) {
    std::ofstream o(out, std::ios::binary);
    o << a.body.value("module", "");
    if (!o) {
      std::cerr << "dtx: cannot write " << out << "\n";
      return 1;
    }
  }
  if (json) {
    nlohmann::json j = a.body;
    j.erase("module");
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << a.body.value("canonical", "") << "\n";
  }
  return 0;
}

#endif

} // namespace dtx::cli
