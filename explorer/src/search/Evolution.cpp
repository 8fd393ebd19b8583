// evolution: a genetic algorithm over the choice vector. Parents are drawn by tournament from
// the best points observed so far; a child takes each variable from either parent (uniform
// crossover) and is then mutated (each variable with probability 1/n, at least one: most often
// to a neighbouring alternative, sometimes to any). Children already proposed are redrawn, so
// every proposal is a new point. A share of each generation is random immigrants.
#include "SearchSupport.h"

#include <algorithm>
#include <map>

namespace dtx {
namespace {

class Evolution final : public Strategy {
public:
  explicit Evolution(StrategyContext ctx)
      : ctx_(std::move(ctx)), rng_(ctx_.seed), proposed_(ctx_) {}
  std::string name() const override { return "evolution"; }

  std::vector<Point> propose(std::size_t n) override {
    return proposed_.draw(n, 2000, [&](int failures) {
      // Random points seed the population, stand in when offspring keep repeating, and join
      // as immigrants now and then so that the population does not settle in one basin.
      bool immigrant = elite().size() < 2 || proposed_.count() < kPopulation || failures > 50 ||
                       std::bernoulli_distribution(kImmigrants)(rng_);
      return immigrant ? random() : offspring();
    });
  }

  void observe(const Point& p, std::optional<double> cost) override {
    if (!cost) return;
    ranked_.emplace(*cost, p);
    if (ranked_.size() > kPopulation) ranked_.erase(std::prev(ranked_.end()));
  }

private:
  static constexpr std::size_t kPopulation = 12;
  static constexpr int kTournament = 3;
  static constexpr double kImmigrants = 0.15;

  const std::multimap<double, Point>& elite() const { return ranked_; }

  Point random() { return search::random_point(ctx_.radices, rng_); }

  const Point& tournament() {
    std::uniform_int_distribution<std::size_t> pick(0, ranked_.size() - 1);
    std::size_t best = ranked_.size();
    for (int i = 0; i < kTournament; ++i)
      best = std::min(best, pick(rng_)); // ranked_ is ordered: a lower position is fitter
    return std::next(ranked_.begin(), static_cast<long>(best))->second;
  }

  Point offspring() {
    const Point& a = tournament();
    const Point& b = tournament();
    Point child(a.size());
    std::bernoulli_distribution coin(0.5);
    for (size_t i = 0; i < a.size(); ++i)
      child[i] = coin(rng_) ? a[i] : b[i];
    const std::size_t n = child.size();
    std::bernoulli_distribution mutate(1.0 / static_cast<double>(std::max<std::size_t>(n, 1)));
    bool changed = false;
    for (size_t i = 0; i < n; ++i)
      if (mutate(rng_)) changed |= mutate_gene(child, i);
    for (int tries = 0; !changed && tries < 8; ++tries) // at least one change
      changed = mutate_gene(child, std::uniform_int_distribution<size_t>(0, n - 1)(rng_));
    return child;
  }

  bool mutate_gene(Point& p, size_t i) {
    int r = ctx_.radices[i];
    if (r < 2) return false;
    int old = p[i];
    if (std::bernoulli_distribution(0.7)(rng_)) {
      int step = std::bernoulli_distribution(0.5)(rng_) ? 1 : -1;
      p[i] = std::clamp(p[i] + step, 0, r - 1);
      if (p[i] == old) p[i] = std::clamp(old - step, 0, r - 1);
    } else {
      p[i] = std::uniform_int_distribution<int>(0, r - 1)(rng_);
    }
    return p[i] != old;
  }

  StrategyContext ctx_;
  std::mt19937_64 rng_;
  search::Proposed proposed_;
  std::multimap<double, Point> ranked_; // the best observed points, fastest first
};

} // namespace

std::unique_ptr<Strategy> make_evolution(StrategyContext context) {
  return std::make_unique<Evolution>(std::move(context));
}

} // namespace dtx
