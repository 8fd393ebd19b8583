// dtxd's Prometheus metrics (see Metrics.h).
#include "Metrics.h"

#include <prometheus/text_serializer.h>

namespace dtx::server {

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      requests_(prometheus::BuildCounter()
                    .Name("dtxd_http_requests_total")
                    .Help("HTTP requests by route, method and status")
                    .Register(*registry_)),
      latency_(prometheus::BuildHistogram()
                   .Name("dtxd_http_request_seconds")
                   .Help("HTTP request latency by route")
                   .Register(*registry_)),
      queued_(prometheus::BuildGauge()
                  .Name("dtxd_explorations_queued")
                  .Help("explorations waiting for the workers")
                  .Register(*registry_)
                  .Add({})),
      running_(prometheus::BuildGauge()
                   .Name("dtxd_explorations_running")
                   .Help("explorations being measured")
                   .Register(*registry_)
                   .Add({})),
      measurements_(prometheus::BuildCounter()
                        .Name("dtxd_schedules_measured_total")
                        .Help("distinct schedules screened or reused by explorations, by "
                              "outcome (ok, failed: any other status)")
                        .Register(*registry_)),
      explorations_(prometheus::BuildCounter()
                        .Name("dtxd_explorations_finished_total")
                        .Help("explorations that ended, by state")
                        .Register(*registry_)),
      worker_starts_(prometheus::BuildCounter()
                         .Name("dtxd_worker_starts_total")
                         .Help("measurement worker processes started (restarts included)")
                         .Register(*registry_)
                         .Add({})) {}

void Metrics::request(const std::string& route, const std::string& method, int status,
                      double seconds) {
  requests_.Add({{"route", route}, {"method", method}, {"status", std::to_string(status)}})
      .Increment();
  latency_
      .Add({{"route", route}},
           prometheus::Histogram::BucketBoundaries{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5})
      .Observe(seconds);
}

void Metrics::set_queue(std::size_t queued, std::size_t running) {
  queued_.Set(static_cast<double>(queued));
  running_.Set(static_cast<double>(running));
}

void Metrics::add_measurements(std::uint64_t ok, std::uint64_t failed) {
  measurements_.Add({{"status", "ok"}}).Increment(static_cast<double>(ok));
  measurements_.Add({{"status", "failed"}}).Increment(static_cast<double>(failed));
}

void Metrics::exploration_finished(const std::string& state) {
  explorations_.Add({{"state", state}}).Increment();
}

void Metrics::worker_started() {
  worker_starts_.Increment();
}

std::string Metrics::text() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

} // namespace dtx::server
