// tpe: a tree-structured Parzen estimator over the choice vector (Bergstra et al., 2011; as
// optuna's TPESampler with `multivariate=True`). The points observed so far are split into the
// fastest (a share `gamma` of them) and the rest; each set defines a density over the choice
// vector, a mixture of one kernel per point and a uniform prior, where a point's kernel keeps
// each variable at the point's alternative with probability `kKeep` and spreads the rest over
// the other alternatives. Candidates drawn from the fast set's density are ranked by the ratio
// of the two densities, and the best one not proposed before is proposed. The kernels are over
// whole points, not one variable at a time, so alternatives that are fast only together (a block
// width with a warp count) are drawn together. Until `kStartup` points have a time, the start:
// random points, each made to hold an alternative of one variable that no timed point holds yet
// (start_point), so that the start covers every alternative the space allows. An invalid point
// (pruned, failed, wrong) counts among the slow: candidates near it rank lower.
#include "SearchSupport.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dtx {
namespace {

class Tpe final : public Strategy {
public:
  explicit Tpe(StrategyContext ctx) : ctx_(std::move(ctx)), rng_(ctx_.seed), proposed_(ctx_) {}
  std::string name() const override { return "tpe"; }

  std::vector<Point> propose(std::size_t n) override {
    return proposed_.draw(n, 2000, [&](int misses) {
      if (timed_ >= kStartup) return modelled();
      // Start points that keep landing on proposed points (alternatives none of whose points
      // was valid, all proposed): random points, which reach the points left whatever
      // alternatives they hold, before draw() gives up on the space.
      return misses < kCoverMisses ? start_point() : search::random_point(ctx_.radices, rng_);
    });
  }

  void observe(const Point& p, std::optional<double> cost) override {
    observed_.push_back({proposed_.normalize(p), cost.value_or(kInvalid)});
    timed_ += cost.has_value();
    if (!cost) return;
    for (size_t v = 0; v < p.size(); ++v) // its alternatives are covered
      if (!tries_[v].empty()) tries_[v][static_cast<size_t>(observed_.back().point[v])] = 0;
    valid_.push_back(observed_.size() - 1);
  }

private:
  static constexpr std::size_t kStartup = 10;    // random points first
  static constexpr std::size_t kCandidates = 48; // drawn from the fast density per proposal
  static constexpr double kKeep = 0.75;          // a kernel's weight on its point's alternative
  static constexpr double kInvalid = std::numeric_limits<double>::infinity();
  static constexpr int kCoverTries = 80;   // proposals to cover an alternative before giving it up
  static constexpr int kCoverMisses = 100; // repeats in a row before a random point instead
  static constexpr int kCoverWidest = 64;  // variables of more alternatives are not covered

  struct Observation {
    Point point;
    double cost;
  };

  /// The fast set's size: a tenth of the timed points, at least 2 and at most 25 (optuna's
  /// gamma, with a floor so that the first fast set is not one point).
  std::size_t fast_count() const { return std::clamp<std::size_t>((timed_ + 9) / 10, 2, 25); }

  /// log of the mixture density at `x` of `set` (kernels at its points) and a uniform prior of
  /// weight one point.
  double log_density(const Point& x, const std::vector<const Point*>& set) const {
    double prior = 1.0;
    for (int r : ctx_.radices)
      prior /= r;
    double sum = prior;
    for (const Point* c : set) {
      double k = 1.0;
      for (size_t i = 0; i < x.size(); ++i) {
        const int r = ctx_.radices[i];
        if (r < 2) continue;
        k *= x[i] == (*c)[i] ? kKeep : (1.0 - kKeep) / (r - 1);
      }
      sum += k;
    }
    return std::log(sum / static_cast<double>(set.size() + 1));
  }

  /// A point of the fast density: a kernel's centre (or the prior), each variable kept or moved.
  Point draw(const std::vector<const Point*>& fast) {
    std::size_t which = std::uniform_int_distribution<std::size_t>(0, fast.size())(rng_);
    if (which == fast.size()) return search::random_point(ctx_.radices, rng_);
    Point x = *fast[which];
    std::bernoulli_distribution keep(kKeep);
    for (size_t i = 0; i < x.size(); ++i) {
      const int r = ctx_.radices[i];
      if (r < 2 || keep(rng_)) continue;
      int other = std::uniform_int_distribution<int>(0, r - 2)(rng_);
      x[i] = other >= x[i] ? other + 1 : other; // any alternative but the centre's
    }
    return x;
  }

  /// A point of the start: an alternative that no timed point holds yet (one of those with tries
  /// left, at random) set in a random point, or, every other try, in a timed point, where the
  /// other variables already suit the space's rules (an alternative allowed only with particular
  /// others, as warp specialization with 128-row blocks, descriptors and 8 warps, is then found
  /// in a few tries rather than by chance). Every alternative covered or given up: a random
  /// point.
  Point start_point() {
    std::vector<std::pair<size_t, size_t>> open;
    for (size_t v = 0; v < tries_.size(); ++v)
      for (size_t a = 0; a < tries_[v].size(); ++a)
        if (tries_[v][a] > 0) open.emplace_back(v, a);
    if (open.empty()) return search::random_point(ctx_.radices, rng_);
    auto [v, a] = open[std::uniform_int_distribution<size_t>(0, open.size() - 1)(rng_)];
    const int tries = tries_[v][a]--;
    Point p =
        valid_.empty() || tries % 2
            ? search::random_point(ctx_.radices, rng_)
            : observed_[valid_[std::uniform_int_distribution<size_t>(0, valid_.size() - 1)(rng_)]]
                  .point;
    p[v] = static_cast<int>(a);
    return p;
  }

  Point modelled() {
    std::vector<const Observation*> by_cost;
    for (const Observation& o : observed_)
      by_cost.push_back(&o);
    std::stable_sort(by_cost.begin(), by_cost.end(),
                     [](const Observation* a, const Observation* b) { return a->cost < b->cost; });
    const std::size_t n_fast = std::min(fast_count(), timed_);
    std::vector<const Point*> fast, slow;
    for (std::size_t i = 0; i < by_cost.size(); ++i)
      (i < n_fast ? fast : slow).push_back(&by_cost[i]->point);
    Point best;
    double best_score = -std::numeric_limits<double>::infinity();
    for (std::size_t c = 0; c < kCandidates; ++c) {
      Point x = proposed_.normalize(draw(fast));
      if (proposed_.seen(x)) continue;
      double score = log_density(x, fast) - log_density(x, slow);
      if (score > best_score) {
        best_score = score;
        best = std::move(x);
      }
    }
    // Every candidate was proposed before (the fast region is exhausted): a random point.
    return best.empty() ? search::random_point(ctx_.radices, rng_) : best;
  }

  StrategyContext ctx_;
  std::mt19937_64 rng_;
  search::Proposed proposed_;
  std::vector<Observation> observed_;
  std::size_t timed_ = 0;     // observations with a time
  std::vector<size_t> valid_; // their places in observed_
  /// Per variable and alternative, the start's tries left to cover it (0: covered or given up).
  /// A variable of one alternative, or of more than kCoverWidest (a range of sizes, say), is not
  /// covered: its table stays empty, so that the start's cost does not grow with it.
  std::vector<std::vector<int>> tries_ = [this] {
    std::vector<std::vector<int>> t;
    for (int r : ctx_.radices)
      t.emplace_back(r > 1 && r <= kCoverWidest ? static_cast<size_t>(r) : 0, kCoverTries);
    return t;
  }();
};

} // namespace

std::unique_ptr<Strategy> make_tpe(StrategyContext context) {
  return std::make_unique<Tpe>(std::move(context));
}

} // namespace dtx
