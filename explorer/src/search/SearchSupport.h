#pragma once
// Shared by the strategies: mixed-radix encoding of points and the set of points proposed.
#include "dtx/Strategy.h"

#include <functional>
#include <random>
#include <unordered_set>

namespace dtx::search {

/// Mixed radix, the last variable fastest (the same order as Space::decode). Saturates.
std::uint64_t encode(const std::vector<int>& radices, const Point& p);
Point decode(const std::vector<int>& radices, std::uint64_t index);
std::uint64_t space_size(const std::vector<int>& radices);

/// Remembers proposed points (by index) and normalizes.
class Proposed {
public:
  explicit Proposed(const StrategyContext& ctx) : ctx_(ctx) {}
  Point normalize(Point p) const { return ctx_.normalize ? ctx_.normalize(std::move(p)) : p; }
  /// Normalizes `p`; true (and remembered) when it was not proposed before.
  bool take(Point& p) {
    p = normalize(std::move(p));
    return seen_.insert(encode(ctx_.radices, p)).second;
  }
  bool seen(const Point& p) const { return seen_.count(encode(ctx_.radices, p)) > 0; }
  /// Up to `n` new points drawn from `next` (given the repeats in a row so far), taken as
  /// `take` does; gives up after `give_up` repeats in a row (the space nearly exhausted).
  std::vector<Point> draw(std::size_t n, int give_up, const std::function<Point(int)>& next) {
    std::vector<Point> out;
    for (int misses = 0; out.size() < n && misses < give_up;) {
      Point p = next(misses);
      if (take(p)) {
        out.push_back(std::move(p));
        misses = 0;
      } else {
        ++misses;
      }
    }
    return out;
  }
  std::size_t count() const { return seen_.size(); }

private:
  const StrategyContext& ctx_;
  std::unordered_set<std::uint64_t> seen_;
};

/// A uniformly random point.
Point random_point(const std::vector<int>& radices, std::mt19937_64& rng);

} // namespace dtx::search
