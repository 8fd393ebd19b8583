#pragma once
// Client mode: `dtx explore|results|best --server URL` send the same work to a dtxd
// (docs/server.md) instead of running it here. URL also from $DTX_SERVER, a token from --token
// or $DTX_TOKEN.
#include "dtx/Explore.h"
#include "dtx/TemplateFile.h"

#include <string>
#include <vector>

namespace dtx::cli {

struct Remote {
  std::string url;   // http://host:port
  std::string token; // sent as `Authorization: Bearer TOKEN` when set
};

/// Posts one exploration per shape, follows each to its end (server-sent events) with a progress
/// line, and prints the ranked top 10 and the baselines (or JSON).
int remote_explore(const Remote& remote, const TemplateFile& tf,
                   const std::vector<ShapeSizes>& shapes, const ExploreSettings& settings,
                   bool json);
int remote_results(const Remote& remote, std::int64_t id, const std::string& kernel,
                   const std::string& state, std::int64_t limit, bool json);
int remote_best(const Remote& remote, const std::string& kernel, const std::string& shape,
                const std::string& dtype, const std::string& device, const std::string& out,
                bool json);

} // namespace dtx::cli
