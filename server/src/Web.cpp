// The web page (web/, docs/web.md): its static files under /web/, the front-end libraries of
// Debian's libjs-chart.js and libjs-highlight.js under /vendor/, and index.html for every page
// URL, so that a shared link to an exploration, a schedule or a comparison opens that view.
#include "Api.h"

#include <fstream>
#include <sstream>

namespace dtx::server {
namespace {

// No inline script, nothing from another origin: the page works with no internet, and data
// shown in it (kernel names, messages, generated code) can never run as code.
constexpr const char* kPolicy = "default-src 'self'; img-src 'self' data: blob:; "
                                "style-src 'self' 'unsafe-inline'; object-src 'none'; "
                                "base-uri 'none'; frame-ancestors 'none'";

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace

bool wants_html(const httplib::Request& req) {
  const std::string accept = req.get_header_value("Accept");
  return accept.find("text/html") != std::string::npos;
}

void send_page(httplib::Response& res, const Config& config) {
  // Read on every request: the page is small, and an edited web/ shows without a restart.
  std::string html = read_file(config.web_dir / "index.html");
  if (html.empty())
    throw ApiError(500, "internal",
                   "the web page is missing: " + (config.web_dir / "index.html").string() +
                       " (set `web_dir` in the configuration)");
  res.set_header("Content-Security-Policy", kPolicy);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Cache-Control", "no-cache");
  res.set_content(html, "text/html; charset=utf-8");
}

void register_web(Api& api, httplib::Server& http, spdlog::logger& log) {
  const Config& config = api.config();
  httplib::Headers no_cache = {{"Cache-Control", "no-cache"}};
  api.static_files(R"(/web(/.*)?)");
  api.static_files(R"(/vendor/.*)");
  if (!http.set_mount_point("/web", config.web_dir.string(), no_cache))
    log.warn("web page: {} is not a directory; the page is off", config.web_dir.string());
  // Only the two libraries the page loads, not all of /usr/share/javascript.
  for (const char* lib : {"chart.js", "highlight.js"}) {
    std::filesystem::path dir = config.vendor_dir / lib;
    if (!http.set_mount_point(std::string("/vendor/") + lib, dir.string(),
                              {{"Cache-Control", "max-age=86400"}}))
      log.warn("web page: {} is missing (Debian's libjs-{}); the page shows no {}", dir.string(),
               lib, std::string(lib) == "chart.js" ? "charts" : "highlighting");
  }
  // Every static file gets the page's policy too (`/web/` is index.html), and no browser may
  // guess a type other than the one sent.
  http.set_file_request_handler([](const httplib::Request&, httplib::Response& res) {
    res.set_header("Content-Security-Policy", kPolicy);
    res.set_header("X-Content-Type-Options", "nosniff");
  });
  const Config* c = &config;
  auto page = [c](const httplib::Request&, httplib::Response& res) {
    try {
      send_page(res, *c);
    } catch (const ApiError& e) {
      send_json(res, {{"error", {{"code", e.code}, {"message", e.what()}}}}, e.status);
    }
  };
  for (const char* route : {R"(/explorations/?)", R"(/explorations/[0-9,]+/?)",
                            R"(/schedules/\d+/?)", R"(/compare/\d+/\d+/?)", R"(/new/?)"})
    api.page(route, page);
}

} // namespace dtx::server
