// dtxd's YAML configuration (yaml-cpp).
#include "dtx/server/Config.h"

#include "dtx/Request.h"
#include "dtx/Settings.h"
#include "dtx/WorkerPool.h"

#include <yaml-cpp/yaml.h>

#include <map>
#include <set>
#include <type_traits>

#include <netdb.h>
#include <sys/socket.h>

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

/// A number by its rule (config_rule, pool_rule: the command line's too).
template <class T>
T number(const std::filesystem::path& file, const YAML::Node& n, const std::string& key,
         const NumberRule& rule) {
  if (!n.IsScalar()) fail(file, n, "`" + key + "` is " + rule.describe());
  std::string text = n.Scalar();
  if (std::string p = rule.problem(text); !p.empty()) fail(file, n, "`" + key + "`: " + p);
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(std::stoll(text));
  else
    return static_cast<T>(std::stod(text));
}

std::string text(const std::filesystem::path& file, const YAML::Node& n, const std::string& key,
                 std::initializer_list<const char*> allowed) {
  std::string v = get<std::string>(file, n, key.c_str());
  std::string list;
  for (const char* a : allowed) {
    if (v == a) return v;
    list += std::string(list.empty() ? "" : ", ") + a;
  }
  fail(file, n, "`" + key + "` is one of " + list + ", not `" + v + "`");
}

std::filesystem::path directory(const std::filesystem::path& file, const YAML::Node& n,
                                const char* key) {
  std::filesystem::path dir = get<std::string>(file, n, key);
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    fail(file, n, std::string("`") + key + "`: " + dir.string() + " is not a directory");
  return dir;
}

/// A key of `explore:`: the default of a request's field, read by the setting's rule (as dtx's
/// option and the request's field are). A list (`times: [gpu, host]`) reads as its items
/// separated by commas.
void explore_default(const std::filesystem::path& file, const std::string& key,
                     const YAML::Node& key_node, const YAML::Node& n, ExploreSettings& defaults) {
  const Setting* s = nullptr;
  for (const Setting& f : settings())
    if (f.on(kConfigKey) && key == f.name) s = &f;
  if (!s) {
    std::string keys;
    for (const Setting& f : settings())
      if (f.on(kConfigKey)) keys += std::string(keys.empty() ? "" : ", ") + f.name;
    fail(file, key_node, "unknown `explore` setting `" + key + "` (the settings are " + keys + ")");
  }
  std::string text;
  if (n.IsScalar()) {
    text = n.Scalar();
  } else if (n.IsSequence() && s->kind == SettingKind::Choices) {
    for (const auto& item : n) {
      if (!item.IsScalar()) fail(file, item, "`" + key + "` is " + s->describe());
      text += (text.empty() ? "" : ",") + item.Scalar();
    }
  } else {
    fail(file, n, "`" + key + "` is " + s->describe());
  }
  if (std::string p = s->text_problem(text); !p.empty()) fail(file, n, "`" + key + "`: " + p);
  s->set(defaults, s->from_text(text));
}

} // namespace

const NumberRule& config_rule(const std::string& key) {
  static const std::map<std::string, NumberRule> rules = {
      {"port", {0, 65535, true}},
      {"max_running", {1, 64, true}},
      {"max_body", {1024, 1 << 30, true}},
      {"max_connections", {1, 65536, true}},
      {"max_event_streams", {1, 65536, true}},
      {"request_timeout_s", {1, 3600, false}},
      {"expand_time_s", {0.1, 3600, false}},
  };
  return rules.at(key);
}

std::string bind_problem(const std::string& bind) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(bind.c_str(), nullptr, &hints, &found);
  if (found) freeaddrinfo(found);
  if (bind.empty() || rc != 0)
    return "`" + bind + "` is not an address to listen on" +
           (rc != 0 ? std::string(" (") + gai_strerror(rc) + ")" : std::string());
  return "";
}

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
  static const std::set<std::string> keys = {"bind",
                                             "port",
                                             "data_dir",
                                             "db",
                                             "templates_dir",
                                             "web_dir",
                                             "compile_workers",
                                             "gpus",
                                             "python",
                                             "worker",
                                             "max_running",
                                             "max_body",
                                             "tokens",
                                             "log_format",
                                             "log_level",
                                             "example",
                                             "explore",
                                             "protect_reads",
                                             "vendor_dir",
                                             "backend",
                                             "ray",
                                             "lease_s",
                                             "hosts",
                                             "max_connections",
                                             "max_event_streams",
                                             "request_timeout_s",
                                             "expand_time_s"};
  for (const auto& kv : root) {
    std::string k = kv.first.as<std::string>();
    if (!keys.count(k)) fail(path, kv.first, "unknown setting `" + k + "`");
    const YAML::Node& v = kv.second;
    if (k == "bind") {
      c.bind = get<std::string>(path, v, "bind");
      if (std::string p = bind_problem(c.bind); !p.empty()) fail(path, v, "`bind`: " + p);
    }
    if (k == "port") c.port = number<int>(path, v, k, config_rule(k));
    if (k == "data_dir") c.data_dir = get<std::string>(path, v, "data_dir");
    if (k == "db") c.db = get<std::string>(path, v, "db");
    if (k == "templates_dir") c.templates_dir = directory(path, v, "templates_dir");
    if (k == "web_dir") c.web_dir = directory(path, v, "web_dir");
    if (k == "vendor_dir") c.vendor_dir = directory(path, v, "vendor_dir");
    if (k == "compile_workers") c.compile_workers = number<int>(path, v, k, pool_rule(k));
    if (k == "gpus") {
      // `none`, `0,1` or a list of indices: parse_gpus, as --gpus.
      std::string list;
      if (v.IsSequence())
        for (const auto& g : v)
          list += (list.empty() ? "" : ",") + get<std::string>(path, g, "gpus");
      else
        list = get<std::string>(path, v, "gpus");
      try {
        c.gpus = v.IsSequence() && v.size() == 0 ? std::vector<int>{} : parse_gpus(list);
      } catch (const std::invalid_argument& e) {
        fail(path, v, std::string("`gpus`: ") + e.what());
      }
      c.gpus_given = true;
    }
    if (k == "python") {
      c.python = get<std::string>(path, v, "python");
      if (std::string p = program_problem(c.python); !p.empty()) fail(path, v, "`python`: " + p);
    }
    if (k == "worker") {
      c.worker_script = get<std::string>(path, v, "worker");
      std::error_code ec;
      if (!std::filesystem::is_regular_file(c.worker_script, ec))
        fail(path, v, "`worker`: " + c.worker_script + " is not a file");
    }
    if (k == "max_running") c.max_running = number<int>(path, v, k, config_rule(k));
    if (k == "lease_s") c.lease_s = get<double>(path, v, "lease_s");
    if (k == "max_body") c.max_body = number<std::size_t>(path, v, k, config_rule(k));
    if (k == "protect_reads") c.protect_reads = get<bool>(path, v, "protect_reads");
    if (k == "max_connections")
      c.connections.max_connections = number<std::size_t>(path, v, k, config_rule(k));
    if (k == "max_event_streams")
      c.connections.max_event_streams = number<std::size_t>(path, v, k, config_rule(k));
    if (k == "request_timeout_s")
      c.connections.request_timeout_s = number<double>(path, v, k, config_rule(k));
    if (k == "expand_time_s") c.expand_time_s = number<double>(path, v, k, config_rule(k));
    if (k == "tokens") {
      c.tokens = get<std::vector<std::string>>(path, v, "tokens");
      for (const std::string& t : c.tokens)
        if (std::string p = token_problem(t); !p.empty()) fail(path, v, "`tokens`: " + p);
    }
    if (k == "hosts") c.hosts = get<std::vector<std::string>>(path, v, "hosts");
    if (k == "log_format") c.log_format = text(path, v, k, {"text", "json"});
    if (k == "log_level") c.log_level = text(path, v, k, {"debug", "info", "warn", "error"});
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
        if (rk == "address") {
          c.ray_address = get<std::string>(path, e.second, "address");
          if (c.ray_address.empty()) fail(path, e.second, "`address` is the head's HOST:PORT");
        } else if (rk == "interpreter_workers")
          c.ray_interpreter_workers =
              number<int>(path, e.second, rk, pool_rule("ray_interpreter_workers"));
        else if (rk == "compile_per_node")
          c.ray_compile_per_node =
              number<int>(path, e.second, rk, pool_rule("ray_compile_per_node"));
        else
          fail(path, e.first, "unknown `ray` setting `" + rk + "`");
      }
    }
    if (k == "explore") {
      if (!v.IsMap()) fail(path, v, "`explore` is a map of measurement defaults");
      for (const auto& e : v) {
        std::string ek = e.first.as<std::string>();
        explore_default(path, ek, e.first, e.second, c.defaults);
      }
    }
  }
  if (!(c.lease_s >= 1 && c.lease_s <= 3600))
    fail(path, root["lease_s"], "`lease_s` must be from 1 to 3600 seconds");
  if (c.backend == "ray" && c.ray_address.empty())
    fail(path, root["backend"],
         "`backend: ray` needs `ray: {address: HOST:PORT}`, the head's address as `ray start "
         "--head` printed it");
  return c;
}

} // namespace dtx::server
