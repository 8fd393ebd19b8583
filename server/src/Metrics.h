#pragma once
// dtxd's metrics in the Prometheus text format (prometheus-cpp, Debian's prometheus-cpp-dev):
// HTTP requests and their latencies by route, the queue, measurements, explorations by outcome,
// worker (re)starts.
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

namespace dtx::server {

class Metrics {
public:
  Metrics();
  void request(const std::string& route, const std::string& method, int status, double seconds);
  void set_queue(std::size_t queued, std::size_t running);
  void add_measurements(std::uint64_t ok, std::uint64_t failed);
  void exploration_finished(const std::string& state);
  void worker_started();
  /// Everything, in the Prometheus text exposition format.
  std::string text() const;

private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& latency_;
  prometheus::Gauge& queued_;
  prometheus::Gauge& running_;
  prometheus::Family<prometheus::Counter>& measurements_;
  prometheus::Family<prometheus::Counter>& explorations_;
  prometheus::Counter& worker_starts_;
};

} // namespace dtx::server
