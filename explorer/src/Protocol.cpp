#include "dtx/Protocol.h"

#include <dtx/Sha256.h>

#include <array>
#include <cstdint>
#include <cstdio>

namespace dtx {

namespace {

std::string_view kind_name(RequestKind kind) {
  switch (kind) {
  case RequestKind::Measure:
    return "measure";
  case RequestKind::Baseline:
    return "baseline";
  case RequestKind::Compile:
    return "compile";
  }
  return "measure";
}

nlohmann::json times_json(const TimesSpec& times) {
  nlohmann::json out = nlohmann::json::object();
  if (times.bench)
    out["bench"] = {{"warmup_ms", times.bench->warmup_ms}, {"rep_ms", times.bench->rep_ms}};
  if (times.gpu) out["gpu"] = {{"rep_ms", times.gpu->rep_ms}};
  if (times.host) out["host"] = {{"calls", times.host->calls}};
  return out;
}

double number(const nlohmann::json& object, const char* key, double fallback = 0) {
  auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : fallback;
}

std::string text(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end()) return {};
  return it->is_string() ? it->get<std::string>() : it->dump();
}

std::optional<TimeStats> parse_time(const nlohmann::json& times, const char* key) {
  auto it = times.find(key);
  if (it == times.end() || !it->is_object()) return std::nullopt;
  TimeStats t;
  t.median_ms = number(*it, "median_ms");
  t.q20_ms = number(*it, "q20_ms", t.median_ms);
  t.q80_ms = number(*it, "q80_ms", t.median_ms);
  t.min_ms = number(*it, "min_ms", t.median_ms);
  t.max_ms = number(*it, "max_ms", t.median_ms);
  t.samples = static_cast<std::int64_t>(number(*it, "samples"));
  return t;
}

} // namespace

std::string_view status_name(Status status) {
  switch (status) {
  case Status::Ok:
    return "ok";
  case Status::CompileError:
    return "compile_error";
  case Status::OutOfResources:
    return "out_of_resources";
  case Status::RuntimeError:
    return "runtime_error";
  case Status::WrongResult:
    return "wrong_result";
  case Status::Timeout:
    return "timeout";
  case Status::Crashed:
    return "crashed";
  }
  return "crashed";
}

std::optional<Status> parse_status(std::string_view name) {
  for (Status s : {Status::Ok, Status::CompileError, Status::OutOfResources, Status::RuntimeError,
                   Status::WrongResult, Status::Timeout, Status::Crashed})
    if (status_name(s) == name) return s;
  return std::nullopt;
}

nlohmann::json request_json(const Request& request, std::string_view id) {
  nlohmann::json j = {
      {"type", kind_name(request.kind)},
      {"id", id},
      {"module",
       {{"source", request.module_source}, {"sha256", sha256_hex(request.module_source)}}},
      {"func", request.func},
      {"sizes", request.sizes},
      {"dtype", request.dtype},
      {"seed", request.seed},
  };
  if (request.kind != RequestKind::Compile) {
    j["check"] = request.check;
    j["times"] = times_json(request.times);
  }
  if (request.kind == RequestKind::Baseline) {
    if (!request.baseline || request.baseline->reference) {
      j["baseline"] = {{"reference", true}};
    } else {
      const BaselineSpec& b = *request.baseline;
      j["baseline"] = {
          {"file", b.file}, {"function", b.function}, {"torch_compile", b.torch_compile}};
    }
  }
  return j;
}

std::optional<WorkerInfo> parse_hello(const nlohmann::json& message) {
  if (!message.is_object() || message.value("type", "") != "hello") return std::nullopt;
  WorkerInfo info;
  info.role = text(message, "role");
  info.pid = static_cast<long>(number(message, "pid"));
  info.protocol = static_cast<int>(number(message, "protocol"));
  info.python = text(message, "python");
  info.torch = text(message, "torch");
  info.triton = text(message, "triton");
  if (auto d = message.find("device"); d != message.end() && d->is_object()) {
    info.device_kind = text(*d, "kind");
    info.device_name = text(*d, "name");
  }
  auto c = message.find("comparable");
  info.comparable = c != message.end() && c->is_boolean() && c->get<bool>();
  info.raw = message;
  return info;
}

Result parse_result(const nlohmann::json& message) {
  Result r;
  r.raw = message;
  if (!message.is_object()) {
    r.message = "malformed reply from the worker: not an object";
    return r;
  }
  r.id = text(message, "id");
  auto status = parse_status(text(message, "status"));
  if (!status) {
    r.message = "malformed reply from the worker: unknown status `" + text(message, "status") + "`";
    return r;
  }
  r.status = *status;
  r.message = text(message, "message");
  if (auto c = message.find("check"); c != message.end() && c->is_object()) {
    Check k;
    k.max_abs = number(*c, "max_abs");
    k.max_rel = number(*c, "max_rel");
    k.rel_l2 = number(*c, "rel_l2");
    k.mismatched = static_cast<std::int64_t>(number(*c, "mismatched"));
    k.unwritten = static_cast<std::int64_t>(number(*c, "unwritten"));
    k.rtol = number(*c, "rtol");
    k.atol = number(*c, "atol");
    k.outside = static_cast<std::int64_t>(number(*c, "outside"));
    r.check = k;
  }
  if (auto t = message.find("times"); t != message.end() && t->is_object()) {
    r.bench = parse_time(*t, "bench");
    r.gpu = parse_time(*t, "gpu");
    if (auto h = t->find("host"); h != t->end() && h->is_object())
      r.host = HostTime{number(*h, "per_call_us"), static_cast<std::int64_t>(number(*h, "calls"))};
  }
  r.compile_s = number(message, "compile_s");
  r.import_s = number(message, "import_s");
  r.wall_s = number(message, "wall_s");
  r.timed_s = number(message, "timed_s");
  if (auto p = message.find("prefetched"); p != message.end() && p->is_object())
    r.prefetch_s = number(*p, "prefetch_s");
  return r;
}

nlohmann::json to_json(const TimeStats& t) {
  return {{"median_ms", t.median_ms}, {"q20_ms", t.q20_ms}, {"q80_ms", t.q80_ms},
          {"min_ms", t.min_ms},       {"max_ms", t.max_ms}, {"samples", t.samples}};
}

nlohmann::json to_json(const Check& c) {
  return {{"max_abs", c.max_abs},     {"max_rel", c.max_rel},
          {"rel_l2", c.rel_l2},       {"mismatched", c.mismatched},
          {"unwritten", c.unwritten}, {"rtol", c.rtol},
          {"atol", c.atol},           {"outside", c.outside}};
}

nlohmann::json to_json(const WorkerInfo& info) {
  if (!info.raw.is_null()) return info.raw;
  return {{"type", "hello"},
          {"role", info.role},
          {"pid", info.pid},
          {"device", {{"kind", info.device_kind}, {"name", info.device_name}}},
          {"comparable", info.comparable}};
}

nlohmann::json to_json(const Result& r) {
  nlohmann::json j = {{"id", r.id}, {"status", status_name(r.status)}, {"message", r.message}};
  if (r.check) j["check"] = to_json(*r.check);
  nlohmann::json times = nlohmann::json::object();
  if (r.bench) times["bench"] = to_json(*r.bench);
  if (r.gpu) times["gpu"] = to_json(*r.gpu);
  if (r.host) times["host"] = {{"per_call_us", r.host->per_call_us}, {"calls", r.host->calls}};
  if (!times.empty()) j["times"] = times;
  j["compile_s"] = r.compile_s;
  j["import_s"] = r.import_s;
  j["wall_s"] = r.wall_s;
  j["timed_s"] = r.timed_s;
  if (r.ahead_compile_s) j["ahead_compile_s"] = *r.ahead_compile_s;
  if (r.prefetch_s) j["prefetch_s"] = *r.prefetch_s;
  if (r.arrived_s) j["arrived_s"] = *r.arrived_s;
  if (r.worker) {
    j["worker_pid"] = r.worker->pid;
    // Where it ran, when the worker said (a Ray actor's node, host and GPU).
    for (const char* key : {"host", "node", "gpu"})
      if (auto it = r.worker->raw.find(key); it != r.worker->raw.end() && !it->is_null())
        j[std::string("worker_") + key] = *it;
  }
  if (!r.stderr_tail.empty()) j["stderr_tail"] = r.stderr_tail;
  return j;
}

bool is_cuda_error(std::string_view message) {
  for (std::string_view needle :
       {"CUDA error", "cudaError", "CUDA_ERROR", "illegal memory access", "device-side assert",
        "unspecified launch failure", "CUDA context lost"})
    if (message.find(needle) != std::string_view::npos) return true;
  return false;
}

} // namespace dtx
