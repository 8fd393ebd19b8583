#pragma once
// The JSON side of docs/worker-protocol.md: building request lines, reading hello and result
// lines. Pure functions, no I/O.
#include "dtx/Measurement.h"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace dtx {

constexpr int kProtocolVersion = 1;

/// The request as the worker reads it (one JSON object; the caller adds the newline).
nlohmann::json request_json(const Request& request, std::string_view id);

/// A hello line; nullopt when `message` is not one.
std::optional<WorkerInfo> parse_hello(const nlohmann::json& message);

/// A result line. A malformed one (no known status) becomes `crashed` with a message saying so.
Result parse_result(const nlohmann::json& message);

nlohmann::json to_json(const Result& result);
nlohmann::json to_json(const WorkerInfo& info);
nlohmann::json to_json(const TimeStats& stats);
nlohmann::json to_json(const Check& check);

/// True when a worker's `runtime_error` message says the CUDA context is gone (the worker exits
/// after it, so the pool replaces it at once rather than send it another request).
bool is_cuda_error(std::string_view message);

} // namespace dtx
