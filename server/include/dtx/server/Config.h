#pragma once
// dtxd's configuration: a YAML file (docs/server.md) with command-line overrides.
#include "dtx/Explore.h"
#include "dtx/Request.h"

#include <cstddef>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtx::server {

class ConfigError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct Config {
  std::string bind = "127.0.0.1";
  // Host names this server answers to besides loopback and `bind` (a request whose Host or
  // Origin names another is refused: DNS rebinding, cross-site pages).
  std::vector<std::string> hosts;
  int port = 8080;
  std::filesystem::path data_dir = "data"; // the database and the Triton cache live here
  std::filesystem::path db;                // default: data_dir/dtx.db
  std::filesystem::path templates_dir;     // baselines.py and baseline files; default templates/
  std::filesystem::path web_dir;           // the page's static files; default web/
  std::filesystem::path vendor_dir = "/usr/share/javascript"; // Debian's libjs-* packages
  // The measurement pool.
  int compile_workers = 1;
  std::vector<int> gpus; // empty: those visible (none: the interpreter)
  bool gpus_given = false;
  std::string python, worker_script;
  // Or a Ray cluster (docs/ray.md): backend `ray` and the head's address.
  std::string backend = "local"; // local or ray
  std::string ray_address;
  int ray_interpreter_workers = 0; // testing: time on CPU actors with the Triton interpreter
  int ray_compile_per_node = -1;   // -1: one per GPU, at most the node's CPUs
  // Explorations.
  int max_running = 2; // explorations measured at once, sharing the pool
  /// The lease on each exploration it runs (docs/results-store.md): renewed every sixth of it;
  /// another process takes an exploration over once its lease has run out (or at once, on this
  /// machine, when this process has ended).
  double lease_s = 30;
  ExploreSettings defaults; // for fields a request leaves out
  std::size_t max_body = 1 << 20;
  /// Connections open at once (each has a thread), event streams open at once, the time a
  /// request may take to arrive (docs/server.md, "Limits").
  struct Connections {
    std::size_t max_connections = 512;
    std::size_t max_event_streams = 64;
    double request_timeout_s = 20;
  } connections;
  double expand_time_s = 30;       // the most one /v1/expand request walks its space
  std::vector<std::string> tokens; // non-empty: writes need `Authorization: Bearer TOKEN`
  bool protect_reads = false;      // with tokens: reads need one too (not /healthz, /metrics)
  std::string log_format = "text"; // text or json
  std::string log_level = "info";
  bool example = true; // queue the example exploration on a first start

  std::filesystem::path db_path() const { return db.empty() ? data_dir / "dtx.db" : db; }
};

/// Reads a configuration file; unknown keys and bad values are errors naming file:line and the
/// key.
Config load_config(const std::filesystem::path& path);

/// The range of a numeric setting by its key (`port`, `max_running`, `max_body`,
/// `max_connections`, `max_event_streams`, `request_timeout_s`, `expand_time_s`), for the file and
/// the command line alike (the pool's: pool_rule).
const NumberRule& config_rule(const std::string& key);
/// "" when `bind` is an address to listen on (or a host name that resolves to one), else why
/// not.
std::string bind_problem(const std::string& bind);

} // namespace dtx::server
