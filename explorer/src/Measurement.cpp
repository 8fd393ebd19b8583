#include "dtx/Measurement.h"

#include <chrono>
#include <thread>

namespace dtx {

std::optional<std::future<Result>> submit_unless(MeasurementBackend& backend, Request request,
                                                 ResultCallback callback,
                                                 const std::function<bool()>& stop) {
  while (true) {
    // try_submit consumes nothing when it returns nothing: the request is tried again.
    if (auto f = backend.try_submit(request, callback)) return f;
    if (stop && stop()) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

} // namespace dtx
