#pragma once
// dtxd: the results store, one measurement pool, the exploration scheduler and the HTTP API
// (docs/server.md). start() opens everything and resumes unfinished explorations; run() serves
// until stop(), which checkpoints running explorations and stops every worker.
#include "dtx/server/Config.h"

#include <spdlog/logger.h>

#include <memory>

namespace dtx::server {

class Server {
public:
  Server(Config config, std::shared_ptr<spdlog::logger> log);
  ~Server();
  /// Opens the store, starts the workers, resumes or queues explorations, binds the port.
  /// Throws std::runtime_error when any of that fails.
  void start();
  /// Serves requests until stop(); returns then.
  void run();
  /// Thread-safe, idempotent.
  void stop();
  int port() const;

  struct Impl;

private:
  std::unique_ptr<Impl> impl_;
};

} // namespace dtx::server
