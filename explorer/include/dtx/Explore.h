#pragma once
// An exploration: a template's space at one shape, searched by a strategy, every candidate
// checked and timed through a MeasurementBackend, everything kept in the results store.
//
// The measurement plan (docs/search.md):
// 1. The baselines are screened first, so progress can compare with them from the start.
// 2. Each candidate the strategy proposes is evaluated (constraints, compiler, shape rules);
//    a rejected one is counted by reason and costs no measurement. A candidate with the canonical
//    text of one already seen is the same schedule: the strategy is told its cost again.
// 3. A new schedule is compiled, stored, and screened (do_bench with short warm-up and
//    repetitions, one round) unless the store already holds a screening of the same generated
//    module at this shape, dtype and environment (reuse: across explorations and templates).
// 4. The best few are re-measured with the full protocol together with the baselines: several
//    rounds, each in a fresh random order, the mean of the rounds' medians.
// Budget: distinct schedules screened (or reused); and/or wall time.
// Resuming: the same seed replays the same search; measurements already stored are reused, so
// a killed exploration continues where it stopped without measuring anything twice.
// Ownership: a process runs an exploration only while it holds its lease in the store, so two
// processes on one store never measure one exploration twice.
#include "dtx/Measurement.h"
#include "dtx/Settings.h"
#include "dtx/Space.h"
#include "dtx/TemplateFile.h"

#include <dtx/results/Store.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>

namespace dtx {

struct ExploreJob {
  TemplateFile file;
  ShapeSizes shape;
  ExploreSettings settings;
  std::int64_t exploration_id = 0; // resume this one (0: a new exploration)
};

struct ExploreProgress {
  std::string phase; // baselines, search, full, done
  std::uint64_t done = 0, budget = 0;
  /// The current phase's own count: baselines measured of those to measure; in `search`, the
  /// schedules measured of the budget (0: no budget); in `full`, timings done of the rounds
  /// times the schedules and baselines timed.
  std::uint64_t phase_done = 0, phase_total = 0;
  std::uint64_t proposed = 0, rejected = 0, duplicates = 0, reused = 0, failed = 0;
  std::optional<double> best_ms, best_baseline_ms;
  std::string best_schedule, best_baseline;
  double elapsed_s = 0;
  std::optional<double> eta_s;
};

/// The most candidates an exploration keeps in flight for its strategy, whatever room the pool
/// has: no limit for a strategy that does not learn from results (exhaustive, random); for one
/// that does, a quarter of the budget, so that most proposals are drawn knowing the results of
/// the points before them (with 32 in flight, a budget of 32 was all drawn blind, as random
/// sampling), but at least 4 and two a timing worker, which keep the devices busy.
std::size_t search_window(bool learns, std::uint64_t budget, std::size_t timing_workers);

/// The size of a space as the store keeps it (an SQLite INTEGER, and so the API's JSON):
/// Space::size() up to kSpaceSizeKept. A kept size of kSpaceSizeKept means "that many or more":
/// the space has more points than a signed 64-bit count holds (Space::size() saturates too).
constexpr std::int64_t kSpaceSizeKept = INT64_MAX;
std::int64_t kept_space_size(const Space& space);
/// Whether a kept size stands for that many points or more (`space_overflowed` in the API).
/// Stores written before sizes were kept so kept the saturated count wrapped around, as -1:
/// that too.
inline bool space_size_overflowed(std::int64_t kept) {
  return kept >= kSpaceSizeKept || kept < 0;
}

struct ExploreSummary {
  std::int64_t exploration_id = 0;
  results::State state = results::State::Done;
  std::int64_t space_size = 0; // kept_space_size: as the store and the API show it
  bool space_overflowed = false;
  ExploreProgress progress;
  std::map<std::string, std::uint64_t> rejected; // by reason
  double wall_s = 0;
  /// Requests still queued when it ended (abandoned by a stop), taken back from the backend
  /// (MeasurementBackend::withdraw) so that they cost no worker time.
  std::size_t withdrawn = 0;
};

using ExploreProgressFn = std::function<void(const ExploreProgress&)>;

/// How a caller runs an exploration: who it is (the lease's holder), how long its lease lasts,
/// and how it stops it.
struct ExploreControl {
  /// Set: stop proposing, abandon the requests in flight, store the exploration `cancelled`.
  const std::atomic<bool>* cancel = nullptr;
  /// Set: stop the same way but store it `queued` with `interrupt_message`, for a later start to
  /// resume (a daemon shutting down).
  const std::atomic<bool>* interrupt = nullptr;
  std::string interrupt_message = "interrupted; resumes on the next start";
  /// The lease that makes this process the exploration's only runner: taken before anything is
  /// written, renewed every `renew_s` seconds (and before a write when the latest renewal is
  /// older than half the lease), released at the end.
  results::LeaseHolder holder = results::LeaseHolder::this_process("dtx explore");
  double lease_s = 30, renew_s = 5;
  /// Told when the lease taken replaced one that had expired or whose holder had ended.
  std::function<void(const results::Lease& replaced)> took_over;
};

/// Another process holds the exploration's live lease: nothing was written.
struct LeaseHeld : std::runtime_error {
  explicit LeaseHeld(const results::Lease& held);
  results::Lease lease;
};

/// The lease was taken over while this process ran the exploration (it had stopped renewing
/// it for longer than the lease, e.g. the process was stopped): it stopped at once, leaving the
/// exploration to the new holder.
struct LeaseLost : std::runtime_error {
  explicit LeaseLost(std::int64_t exploration_id);
};

/// Runs (or resumes) an exploration to its end, its budget, a cancel or an interrupt. Throws
/// LeaseHeld when another process runs it, LeaseLost when one took it over meanwhile,
/// results::StoreError when the store cannot be written (the exploration stays as it was stored,
/// for a later run to resume), and std::runtime_error for a template or program that cannot be
/// explored at all (the exploration, if created, is marked failed with the message).
ExploreSummary explore(const ExploreJob& job, MeasurementBackend& backend, results::Store& store,
                       const ExploreProgressFn& progress = {}, const ExploreControl& control = {});

/// `exploration 7 is run by dtxd (pid 4242 on host gpu-1) since T; its lease ends at T2 unless
/// renewed`.
std::string describe_lease(const results::Lease& lease);

/// The stored form of a job (what create_exploration takes; job_of reverses it).
results::ExplorationSpec spec_of(const ExploreJob& job);

/// Rebuilds the job of a stored exploration (to resume it).
ExploreJob job_of(const results::Exploration& exploration);

/// The measurement environment a worker's hello describes.
results::Environment environment_of(const WorkerInfo& worker);

} // namespace dtx
