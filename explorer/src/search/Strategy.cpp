// The table of strategies and the helpers they share.
#include "SearchSupport.h"

#include "dtx/Text.h"

#include <stdexcept>

namespace dtx {

namespace search {

std::uint64_t space_size(const std::vector<int>& radices) {
  std::uint64_t n = 1;
  for (int r : radices) {
    if (n > UINT64_MAX / static_cast<std::uint64_t>(r)) return UINT64_MAX;
    n *= static_cast<std::uint64_t>(r);
  }
  return n;
}

std::uint64_t encode(const std::vector<int>& radices, const Point& p) {
  std::uint64_t index = 0;
  for (size_t i = 0; i < radices.size(); ++i)
    index = index * static_cast<std::uint64_t>(radices[i]) + static_cast<std::uint64_t>(p[i]);
  return index;
}

Point decode(const std::vector<int>& radices, std::uint64_t index) {
  Point p(radices.size(), 0);
  for (size_t i = radices.size(); i-- > 0;) {
    p[i] = static_cast<int>(index % static_cast<std::uint64_t>(radices[i]));
    index /= static_cast<std::uint64_t>(radices[i]);
  }
  return p;
}

Point random_point(const std::vector<int>& radices, std::mt19937_64& rng) {
  Point p(radices.size());
  for (size_t i = 0; i < p.size(); ++i)
    p[i] = std::uniform_int_distribution<int>(0, radices[i] - 1)(rng);
  return p;
}

} // namespace search

const std::vector<std::string>& strategy_names() {
  static const std::vector<std::string> names = {"exhaustive", "random", "evolution", "local",
                                                 "tpe"};
  return names;
}

std::string strategy_list() {
  return listed(strategy_names(), "or");
}

std::unique_ptr<Strategy> make_strategy(const std::string& name, StrategyContext context) {
  if (name == "exhaustive") return make_exhaustive(std::move(context));
  if (name == "random") return make_random(std::move(context));
  if (name == "evolution") return make_evolution(std::move(context));
  if (name == "local") return make_local(std::move(context));
  if (name == "tpe") return make_tpe(std::move(context));
  throw std::invalid_argument("unknown strategy `" + name + "`; the strategy is " +
                              strategy_list());
}

} // namespace dtx
