#include "dtx/results/Store.h"

namespace dtx::results {

std::string state_name(State state) {
  switch (state) {
  case State::Queued:
    return "queued";
  case State::Running:
    return "running";
  case State::Done:
    return "done";
  case State::Failed:
    return "failed";
  case State::Cancelled:
    return "cancelled";
  }
  return "queued";
}

std::optional<State> parse_state(const std::string& name) {
  for (State s : {State::Queued, State::Running, State::Done, State::Failed, State::Cancelled})
    if (state_name(s) == name) return s;
  return std::nullopt;
}

} // namespace dtx::results
