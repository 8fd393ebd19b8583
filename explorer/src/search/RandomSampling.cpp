// random: uniform sampling without replacement. Small spaces are shuffled once (every point
// exactly once); large ones are sampled with rejection of repeats.
#include "SearchSupport.h"

#include <algorithm>
#include <numeric>

namespace dtx {
namespace {

class RandomSampling final : public Strategy {
public:
  explicit RandomSampling(StrategyContext ctx)
      : ctx_(std::move(ctx)), rng_(ctx_.seed), proposed_(ctx_),
        size_(search::space_size(ctx_.radices)) {
    if (size_ <= kShuffleLimit) {
      order_.resize(size_);
      std::iota(order_.begin(), order_.end(), 0);
      std::shuffle(order_.begin(), order_.end(), rng_);
    }
  }
  std::string name() const override { return "random"; }
  bool learns() const override { return false; }
  std::vector<Point> propose(std::size_t n) override {
    std::vector<Point> out;
    if (!order_.empty() || size_ <= kShuffleLimit) {
      while (out.size() < n && next_ < order_.size()) {
        Point p = search::decode(ctx_.radices, order_[next_++]);
        if (proposed_.take(p)) out.push_back(std::move(p));
      }
      return out;
    }
    // A large space: draws; give up after many repeats in a row (nearly exhausted).
    return proposed_.draw(n, 10000, [&](int) { return search::random_point(ctx_.radices, rng_); });
  }
  void observe(const Point&, std::optional<double>) override {}

private:
  static constexpr std::uint64_t kShuffleLimit = 1 << 22;
  StrategyContext ctx_;
  std::mt19937_64 rng_;
  search::Proposed proposed_;
  std::uint64_t size_;
  std::vector<std::uint64_t> order_;
  std::size_t next_ = 0;
};

} // namespace

std::unique_ptr<Strategy> make_random(StrategyContext context) {
  return std::make_unique<RandomSampling>(std::move(context));
}

} // namespace dtx
