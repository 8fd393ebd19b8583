// local: hill climbing with random restarts. From the current point, its neighbours (each
// variable moved to the next or previous alternative; for variables of at most four
// alternatives, to every other one) are tried in a random order; the first that is faster
// becomes the current point. A point none of whose neighbours is faster is a local optimum:
// the search restarts from a random point not tried before.
#include "SearchSupport.h"

#include <algorithm>
#include <map>

namespace dtx {
namespace {

class LocalSearch final : public Strategy {
public:
  explicit LocalSearch(StrategyContext ctx)
      : ctx_(std::move(ctx)), rng_(ctx_.seed), proposed_(ctx_) {}
  std::string name() const override { return "local"; }

  std::vector<Point> propose(std::size_t n) override {
    std::vector<Point> out;
    int failures = 0;
    while (out.size() < n && failures < 2000) {
      if (!current_) {
        // Looking for a starting point: random ones until one is valid.
        if (pending_start_ >= kStartsInFlight) break;
        Point p = search::random_point(ctx_.radices, rng_);
        if (proposed_.take(p)) {
          ++pending_start_;
          starts_.push_back(search::encode(ctx_.radices, p));
          out.push_back(std::move(p));
          failures = 0;
        } else {
          ++failures;
        }
        continue;
      }
      if (next_neighbour_ >= neighbours_.size()) {
        // Every neighbour proposed; once all are observed without improvement, restart.
        if (outstanding_ == 0)
          restart();
        else
          break;
        continue;
      }
      Point p = neighbours_[next_neighbour_++];
      if (proposed_.take(p)) {
        ++outstanding_;
        waiting_.insert(search::encode(ctx_.radices, p));
        out.push_back(std::move(p));
      }
    }
    return out;
  }

  void observe(const Point& p, std::optional<double> cost) override {
    std::uint64_t key = search::encode(ctx_.radices, p);
    if (std::find(starts_.begin(), starts_.end(), key) != starts_.end()) {
      starts_.erase(std::find(starts_.begin(), starts_.end(), key));
      --pending_start_;
      if (cost && (!current_ || *cost < current_cost_)) move_to(p, *cost);
      return;
    }
    if (waiting_.erase(key)) --outstanding_;
    if (cost && current_ && *cost < current_cost_) move_to(p, *cost);
  }

private:
  static constexpr int kStartsInFlight = 4;
  static constexpr int kAllValues = 4; // variables of at most this many alternatives: every one

  void move_to(const Point& p, double cost) {
    current_ = p;
    current_cost_ = cost;
    neighbours_.clear();
    for (size_t i = 0; i < p.size(); ++i) {
      int r = ctx_.radices[i];
      for (int v = 0; v < r; ++v) {
        if (v == p[i]) continue;
        if (r > kAllValues && std::abs(v - p[i]) != 1) continue;
        Point q = p;
        q[i] = v;
        q = proposed_.normalize(std::move(q));
        if (!proposed_.seen(q)) neighbours_.push_back(std::move(q));
      }
    }
    std::shuffle(neighbours_.begin(), neighbours_.end(), rng_);
    next_neighbour_ = 0;
    outstanding_ = 0;
    waiting_.clear();
  }

  void restart() {
    current_.reset();
    neighbours_.clear();
    next_neighbour_ = 0;
  }

  StrategyContext ctx_;
  std::mt19937_64 rng_;
  search::Proposed proposed_;
  std::optional<Point> current_;
  double current_cost_ = 0;
  std::vector<Point> neighbours_;
  std::size_t next_neighbour_ = 0;
  int outstanding_ = 0;
  std::unordered_set<std::uint64_t> waiting_;
  std::vector<std::uint64_t> starts_;
  int pending_start_ = 0;
};

} // namespace

std::unique_ptr<Strategy> make_local(StrategyContext context) {
  return std::make_unique<LocalSearch>(std::move(context));
}

} // namespace dtx
