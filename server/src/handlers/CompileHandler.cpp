// POST /v1/compile: DT source and an optional schedule to the generated module, or diagnostics
// with their line, column and code (200 either way: the request was understood).
#include "../Api.h"

namespace dtx::server {
namespace {

nlohmann::json messages_json(const std::vector<dtc::Message>& messages) {
  nlohmann::json out = nlohmann::json::array();
  for (const dtc::Message& m : messages)
    out.push_back({{"severity", m.severity},
                   {"code", m.code},
                   {"source", m.source},
                   {"line", m.line},
                   {"col", m.col},
                   {"message", m.text}});
  return out;
}

} // namespace

void register_compile(Api& api) {
  api.post(
      "/v1/compile", "/v1/compile",
      [](const httplib::Request& req, httplib::Response& res, Context&) {
        nlohmann::json b = body_json(req);
        for (const auto& [k, v] : b.items())
          if (k != "source" && k != "schedule" && k != "emit" && k != "file_name")
            throw ApiError(400, "unknown_field", "unknown field `" + k + "`", k);
        if (!b.contains("source") || !b["source"].is_string())
          throw ApiError(400, "missing_field", "`source` (the DT program) is required", "source");
        for (const char* k : {"file_name", "emit"})
          if (b.contains(k) && !b[k].is_string())
            throw ApiError(400, "bad_field", std::string("`") + k + "` must be a string", k);
        dtc::CompileOptions o;
        o.file_name = b.value("file_name", std::string("program.dt"));
        if (b.contains("schedule")) {
          if (!b["schedule"].is_string())
            throw ApiError(400, "bad_field", "`schedule` must be a string", "schedule");
          o.schedule = b["schedule"].get<std::string>();
        }
        std::string emit = b.value("emit", std::string("python"));
        if (emit == "python")
          o.emit = dtc::Emit::Python;
        else if (emit == "canonical")
          o.emit = dtc::Emit::Canonical;
        else if (emit == "check")
          o.emit = dtc::Emit::Check;
        else if (emit == "ir")
          o.emit = dtc::Emit::Ir;
        else
          throw ApiError(400, "bad_field", "`emit` is python, canonical, check or ir", "emit");
        dtc::CompileResult r = dtc::compile(b["source"].get<std::string>(), o);
        send_json(res, {{"ok", r.ok},
                        {"output", r.output},
                        {"canonical", r.canonical_schedule},
                        {"diagnostics", messages_json(r.messages)},
                        {"rendered", r.diagnostics}});
      },
      false);
}

} // namespace dtx::server
