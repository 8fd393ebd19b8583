// dtxd's YAML configuration (yaml-cpp).
#include "dtx/server/Config.h"

#include <yaml-cpp/yaml.h>

#include <set>

namespace dtx::server {
namespace {

[[noreturn]] void fail(const std::filesystem::path& file, const YAML::Node& node,
                       const std::string& what) {
  const YAML::Mark m = node.Mark();
  throw ConfigError(file.string() + (m.is_null() ? "" : ":" + std::to_string(m.line + 1)) +
                    ": error: " + what);
}

template <class T> T get(const std::filesystem::path& file, const YAML::Node& n, const char* key) {
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    fail(file, n, std::string("`") + key + "` has the wrong type");
  }
}

} // namespace

Config load_config(const std::filesystem::path& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path.string());
  } catch (const YAML::BadFile&) {
    throw ConfigError(path.string() + ": error: cannot read the configuration file");
  } catch (const YAML::Exception& e) {
    throw ConfigError(path.string() + ":" + std::to_string(e.mark.line + 1) +
                      ": error: not valid YAML: " + e.msg);
  }
  Config c;
  if (root.IsNull()) return c;
  if (!root.IsMap()) throw ConfigError(path.string() + ": error: the configuration is a YAML map");
  static const std::set<std::string> keys = {
      "bind",          "port",         "data_dir",        "db",
      "templates_dir", "web_dir",      "compile_workers", "gpus",
      "python",        "worker",       "max_running",     "max_body",
      "tokens",        "log_format",   "log_level",       "example",
      "explore",       "http_threads", "protect_reads",   "vendor_dir",
      "backend",       "ray",          "lease_s",         "hosts"};
  for (const auto& kv : root) {
    std::string k = kv.first.as<std::string>();
    if (!keys.count(k)) fail(path, kv.first, "unknown setting `" + k + "`");
    const YAML::Node& v = kv.second;
    if (k == "bind") c.bind = get<std::string>(path, v, "bind");
    if (k == "port") c.port = get<int>(path, v, "port");
    if (k == "data_dir") c.data_dir = get<std::string>(path, v, "data_dir");
    if (k == "db") c.db = get<std::string>(path, v, "db");
    if (k == "templates_dir") c.templates_dir = get<std::string>(path, v, "templates_dir");
    if (k == "web_dir") c.web_dir = get<std::string>(path, v, "web_dir");
    if (k == "vendor_dir") c.vendor_dir = get<std::string>(path, v, "vendor_dir");
    if (k == "compile_workers") c.compile_workers = get<int>(path, v, "compile_workers");
    if (k == "gpus") {
      c.gpus = get<std::vector<int>>(path, v, "gpus");
      c.gpus_given = true;
    }
    if (k == "python") c.python = get<std::string>(path, v, "python");
    if (k == "worker") c.worker_script = get<std::string>(path, v, "worker");
    if (k == "max_running") c.max_running = get<int>(path, v, "max_running");
    if (k == "lease_s") c.lease_s = get<double>(path, v, "lease_s");
    if (k == "max_body") c.max_body = get<std::size_t>(path, v, "max_body");
    if (k == "protect_reads") c.protect_reads = get<bool>(path, v, "protect_reads");
    if (k == "http_threads") c.http_threads = get<std::size_t>(path, v, "http_threads");
    if (k == "tokens") c.tokens = get<std::vector<std::string>>(path, v, "tokens");
    if (k == "hosts") c.hosts = get<std::vector<std::string>>(path, v, "hosts");
    if (k == "log_format") c.log_format = get<std::string>(path, v, "log_format");
    if (k == "log_level") c.log_level = get<std::string>(path, v, "log_level");
    if (k == "example") c.example = get<bool>(path, v, "example");
    if (k == "backend") {
      c.backend = get<std::string>(path, v, "backend");
      if (c.backend != "local" && c.backend != "ray")
        fail(path, v, "`backend` is local or ray, not `" + c.backend + "`");
    }
    if (k == "ray") {
      if (!v.IsMap())
        fail(path, v, "`ray` is a map: address, interpreter_workers, compile_per_node");
      for (const auto& e : v) {
        std::string rk = e.first.as<std::string>();
        if (rk == "address")
          c.ray_address = get<std::string>(path, e.second, "address");
        else if (rk == "interpreter_workers")
          c.ray_interpreter_workers = get<int>(path, e.second, "interpreter_workers");
        else if (rk == "compile_per_node")
          c.ray_compile_per_node = get<int>(path, e.second, "compile_per_node");
        else
          fail(path, e.first, "unknown `ray` setting `" + rk + "`");
      }
    }
    if (k == "explore") {
      if (!v.IsMap()) fail(path, v, "`explore` is a map of measurement defaults");
      for (const auto& e : v) {
        std::string ek = e.first.as<std::string>();
        const YAML::Node& ev = e.second;
        ExploreSettings& d = c.defaults;
        if (ek == "strategy")
          d.strategy = get<std::string>(path, ev, "strategy");
        else if (ek == "budget")
          d.budget = get<std::uint64_t>(path, ev, "budget");
        else if (ek == "top")
          d.top = get<int>(path, ev, "top");
        else if (ek == "rounds")
          d.rounds = get<int>(path, ev, "rounds");
        else if (ek == "screen_warmup_ms")
          d.screen.warmup_ms = get<double>(path, ev, ek.c_str());
        else if (ek == "screen_rep_ms")
          d.screen.rep_ms = get<double>(path, ev, ek.c_str());
        else if (ek == "full_warmup_ms")
          d.full.warmup_ms = get<double>(path, ev, ek.c_str());
        else if (ek == "full_rep_ms")
          d.full.rep_ms = get<double>(path, ev, ek.c_str());
        else if (ek == "timeout_s")
          d.timeout_s = get<double>(path, ev, ek.c_str());
        else
          fail(path, e.first, "unknown `explore` setting `" + ek + "`");
      }
    }
  }
  if (c.port < 0 || c.port > 65535) fail(path, root["port"], "`port` must be 0..65535");
  if (c.log_format != "text" && c.log_format != "json")
    fail(path, root["log_format"], "`log_format` is text or json");
  if (c.max_running < 1) fail(path, root["max_running"], "`max_running` must be at least 1");
  if (!(c.lease_s >= 1 && c.lease_s <= 3600))
    fail(path, root["lease_s"], "`lease_s` must be from 1 to 3600 seconds");
  if (c.backend == "ray" && c.ray_address.empty())
    fail(path, root["backend"],
         "`backend: ray` needs `ray: {address: HOST:PORT}`, the head's address as `ray start "
         "--head` printed it");
  return c;
}

} // namespace dtx::server
