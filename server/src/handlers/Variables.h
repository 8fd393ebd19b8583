#pragma once
// The template's variables at a schedule of an exploration, decoded from the schedule's index
// in the exploration's space (dtx::Space::values).
#include <dtx/results/Store.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dtx::server {

struct VariableDecoder;

class ScheduleVariables {
public:
  /// The exploration's space is built once per exploration and kept.
  explicit ScheduleVariables(const results::Exploration& x);
  /// Names of the variables in the template's order (empty when the space cannot be built).
  const std::vector<std::string>& names() const;
  /// Each variable's value at the schedule of this index, nullopt where the schedule does not
  /// use it; empty for an unknown index (-1).
  std::vector<std::optional<std::string>> at(std::int64_t index) const;
  /// {name: value} of the variables the schedule uses.
  nlohmann::json json_at(std::int64_t index) const;

private:
  std::shared_ptr<const VariableDecoder> decoder_;
};

} // namespace dtx::server
