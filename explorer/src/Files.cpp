#include "dtx/Files.h"

#include <cstdlib>
#include <system_error>

namespace dtx {

namespace {

const std::filesystem::path kWorker = std::filesystem::path("src") / "dtx" / "worker.py";

FilesRoot find_root() {
  if (const char* env = std::getenv("DTX_SHARE_DIR"); env && *env)
    return {env, !std::filesystem::exists(std::filesystem::path(env) / ".git"), "$DTX_SHARE_DIR"};
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    std::filesystem::path share = exe.parent_path().parent_path() / "share" / "dtx";
    if (std::filesystem::is_regular_file(share / kWorker, ec))
      return {share, true, "installed beside " + exe.string()};
  }
  return {DTX_SOURCE_DIR, false, "the source tree of the build"};
}

} // namespace

const FilesRoot& files_root() {
  static const FilesRoot root = find_root();
  return root;
}

std::filesystem::path dtx_file(const std::filesystem::path& relative) {
  return files_root().dir / relative;
}

} // namespace dtx
