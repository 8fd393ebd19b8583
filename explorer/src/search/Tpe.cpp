// tpe: a tree-structured Parzen estimator over the choice vector (Bergstra et al., 2011; as
// optuna's TPESampler with `multivariate=True`). The points observed so far are split into the
// fastest (a share `gamma` of them) and the rest; each set defines a density over the choice
// vector, a mixture of one kernel per point and a uniform prior, where a point's kernel keeps
// each variable at the point's alternative with probability `kKeep` and spreads the rest over
// the other alternatives. Candidates drawn from the fast set's density are ranked by the ratio
// of the two densities, and the best one not proposed before is proposed. The kernels are over
// whole points, not one variable at a time, so alternatives that are fast only together (a block
// width with a warp count) are drawn together. Until `kStartup` points have a time, random
// points. An invalid point (pruned, failed, wrong) counts among the slow: candidates near it
// rank lower.
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
    return proposed_.draw(n, 2000, [&](int) {
      return timed_ < kStartup ? search::random_point(ctx_.radices, rng_) : modelled();
    });
  }

  void observe(const Point& p, std::optional<double> cost) override {
    observed_.push_back({proposed_.normalize(p), cost.value_or(kInvalid)});
    timed_ += cost.has_value();
  }

private:
  static constexpr std::size_t kStartup = 10;    // random points first
  static constexpr std::size_t kCandidates = 48; // drawn from the fast density per proposal
  static constexpr double kKeep = 0.75;          // a kernel's weight on its point's alternative
  static constexpr double kInvalid = std::numeric_limits<double>::infinity();

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
  std::size_t timed_ = 0; // observations with a time
};

} // namespace

std::unique_ptr<Strategy> make_tpe(StrategyContext context) {
  return std::make_unique<Tpe>(std::move(context));
}

} // namespace dtx
