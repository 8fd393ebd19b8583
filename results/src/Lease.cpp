// A lease holder's identity: the process, and whether a process of this machine has ended.
// Linux: /proc/PID/stat gives a process's start time, /proc/sys/kernel/random/boot_id the boot
// and /proc/self/ns/pid the PID namespace, so that a pid is compared only where it means the
// same process (a process of another boot, machine or container is never declared ended).
#include "dtx/results/Store.h"

#include <array>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include <unistd.h>

namespace dtx::results {

namespace {

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

/// Field 22 of /proc/PID/stat (start time, clock ticks after boot); nullopt when there is no
/// such process, or only its remains (a zombie, dead but not yet waited for). The second field,
/// the command, may hold spaces and parentheses: the fields after it are counted from its last
/// ')'.
std::optional<std::int64_t> start_time(std::int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return std::nullopt;
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  // After the command: state (3), ppid (4), ... starttime (22).
  for (int i = 3; i <= 22; ++i) {
    if (!(fields >> field)) return std::nullopt;
    if (i == 3 && (field == "Z" || field == "X")) return std::nullopt;
  }
  try {
    return std::stoll(field);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string this_pid_scope() {
  std::string boot = first_line("/proc/sys/kernel/random/boot_id");
  std::array<char, 128> ns{};
  ssize_t n = ::readlink("/proc/self/ns/pid", ns.data(), ns.size() - 1);
  if (boot.empty() || n <= 0) return ""; // cannot tell processes apart: expiry only
  return boot + " " + std::string(ns.data(), static_cast<std::size_t>(n));
}

std::string random_instance() {
  std::random_device random;
  std::string out;
  char hex[9];
  for (int i = 0; i < 4; ++i) {
    std::snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(random()));
    out += hex;
  }
  return out;
}

} // namespace

LeaseHolder LeaseHolder::this_process(const std::string& program) {
  // Drawn once: every lease this process takes names the same instance, so that it renews what
  // it holds (also after a failed write left a lease behind).
  static const std::string instance = random_instance();
  LeaseHolder h;
  h.instance = instance;
  h.program = program;
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) == 0) h.host = host.data();
  h.pid = ::getpid();
  h.started = start_time(h.pid).value_or(0);
  h.pid_scope = this_pid_scope();
  return h;
}

bool LeaseHolder::gone() const {
  static const std::string here = this_pid_scope();
  if (here.empty() || pid_scope != here || pid <= 0) return false;
  auto now = start_time(pid);
  return !now || *now != started;
}

std::string LeaseHolder::describe() const {
  return (program.empty() ? std::string("a process") : program) + " (pid " + std::to_string(pid) +
         " on host " + (host.empty() ? std::string("?") : host) + ")";
}

} // namespace dtx::results
