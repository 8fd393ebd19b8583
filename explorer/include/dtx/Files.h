#pragma once
// Where dtx's own files are: the worker script, the Ray driver, the templates, the web page and
// the OpenAPI document. The binaries find them relative to their own location, so an installed
// tree (`cmake --install`) works wherever it is copied:
//
//   PREFIX/bin/dtc, dtx, dtxd
//   PREFIX/share/dtx/src/dtx/worker.py   (the same paths as in the source tree)
//   PREFIX/share/dtx/explorer/ray/...
//   PREFIX/share/dtx/templates/, web/, server/openapi.json
//
// A binary run from its build tree uses the source tree it was built from.
#include <filesystem>
#include <string>

namespace dtx {

struct FilesRoot {
  std::filesystem::path dir; // holds explorer/, templates/, web/, server/openapi.json
  bool installed = false;    // PREFIX/share/dtx, not a source tree
  std::string how;           // how it was found, for the logs
};

/// The root of dtx's files: $DTX_SHARE_DIR when set; else PREFIX/share/dtx beside the running
/// executable (PREFIX/bin/...) when it holds the worker script; else the source tree of the
/// build. Found once.
const FilesRoot& files_root();

/// `relative` under files_root().
std::filesystem::path dtx_file(const std::filesystem::path& relative);

} // namespace dtx
