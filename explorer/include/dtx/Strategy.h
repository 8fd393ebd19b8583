#pragma once
// Search strategies over a template's space (docs/search.md). A strategy sees only the shape of
// the choice vector (one radix per variable) and the outcomes it is told about; it proposes
// points and is told what each one cost. It never measures, compiles or stores anything, so a
// strategy is tested against synthetic landscapes and replayed on recorded timings.
//
// Contract:
// - propose(n) returns at most n points never proposed before; an empty result means the
//   strategy has nothing more to try (the space is exhausted, or it converged and is not
//   allowed to restart).
// - observe(point, cost) is called once for each proposed point, in any order, possibly after
//   later propose calls: cost is the time to minimize, or nullopt for a point that is invalid
//   (pruned, failed, wrong).
// - Proposals are a deterministic function of the seed and of the observations in the order
//   they were made: the same seed and outcomes replay the same search.
// - `normalize` maps a point to its representative (unused variables at 0); strategies propose
//   normalized points only.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dtx {

using Point = std::vector<int>;

struct StrategyContext {
  std::vector<int> radices;              // alternatives per variable
  std::function<Point(Point)> normalize; // identity if empty
  std::uint64_t seed = 0;
};

class Strategy {
public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  virtual std::vector<Point> propose(std::size_t n) = 0;
  virtual void observe(const Point& point, std::optional<double> cost) = 0;
  /// Whether its proposals depend on the costs observed. An exploration keeps fewer of such a
  /// strategy's points in flight (Exploration::room_in_flight): a point proposed before the
  /// results of the points before it are in is drawn as if blind.
  virtual bool learns() const { return true; }
};

/// `exhaustive`, `random`, `evolution` (a genetic algorithm), `local` (hill climbing with
/// restarts), `tpe` (a tree-structured Parzen estimator). Throws std::invalid_argument for
/// another name.
std::unique_ptr<Strategy> make_strategy(const std::string& name, StrategyContext context);
/// The names make_strategy accepts.
const std::vector<std::string>& strategy_names();
/// Those names as a sentence lists them: "exhaustive, random, ... or tpe".
std::string strategy_list();

// One per file in src/search/.
std::unique_ptr<Strategy> make_exhaustive(StrategyContext context);
std::unique_ptr<Strategy> make_random(StrategyContext context);
std::unique_ptr<Strategy> make_evolution(StrategyContext context);
std::unique_ptr<Strategy> make_local(StrategyContext context);
std::unique_ptr<Strategy> make_tpe(StrategyContext context);

} // namespace dtx
