// dtx: the explorer's command line (one file per subcommand beside this one).
#include "Commands.h"
#include "RemoteClient.h"
#include "dtx/RayBackend.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string_view>

namespace dtx::cli {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

ShapeSizes parse_shape(const std::string& text, const std::string& option) {
  ShapeSizes sizes;
  for (const auto& item : split(text, ',')) {
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw CLI::ValidationError(option, "`" + item + "` is not LABEL=SIZE");
    try {
      std::size_t used = 0;
      long long v = std::stoll(item.substr(eq + 1), &used);
      if (used != item.size() - eq - 1 || v < 0) throw std::invalid_argument("size");
      sizes[item.substr(0, eq)] = v;
    } catch (const std::exception&) {
      throw CLI::ValidationError(option, "`" + item + "`: the size is not a whole number");
    }
  }
  if (sizes.empty()) throw CLI::ValidationError(option, "give LABEL=SIZE,...");
  return sizes;
}

int report(const RequestError& e, const std::string& file) {
  if (e.kind == RequestError::Kind::BadField) {
    std::cerr << "dtx: " << (e.field.rfind("--", 0) == 0 ? e.field : file) << ": " << e.what()
              << "\n";
    return kUsageError;
  }
  std::cerr << (e.rendered.empty() ? std::string(e.what()) + "\n" : e.rendered);
  return 1;
}

std::string fmt_ms(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string shape_text(const ShapeSizes& shape) {
  std::string out;
  for (const auto& [label, size] : shape)
    out += (out.empty() ? "" : ",") + label + "=" + std::to_string(size);
  return out;
}

} // namespace dtx::cli

int main(int argc, char** argv) {
  CLI::App app{"dtx: explores Decoupled Triton schedules: expands templates, compiles, checks "
               "and times kernels.",
               "dtx"};
  app.require_subcommand(1);
  std::vector<dtx::cli::Command> commands = {
      dtx::cli::add_measure_command(app), dtx::cli::add_expand_command(app),
      dtx::cli::add_explore_command(app), dtx::cli::add_results_command(app),
      dtx::cli::add_best_command(app),
  };
  try {
    app.parse(argc, argv);
    for (auto& c : commands)
      if (c.sub->parsed()) return c.run();
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : dtx::cli::kUsageError;
  }
  return dtx::cli::kUsageError;
}

namespace dtx::cli {

void add_pool_options(CLI::App& sub, PoolArgs& a) {
  sub.add_option("--compile-workers", a.compile_workers, "compile workers (default 1)")
      ->check(number_check(pool_rule("compile_workers")));
  sub.add_option("--gpus", a.gpus,
                 "GPU indices, one timing worker each (default: all visible; none: no GPU, the "
                 "Triton interpreter)")
      ->check(gpus_check());
  sub.add_option("--startup-timeout", a.startup_timeout, "seconds a worker may take to start")
      ->check(number_check(pool_rule("startup_timeout_s")));
  sub.add_option("--python", a.python,
                 "the workers' Python (default: the project's .venv/bin/python)")
      ->check(program_check());
  sub.add_option("--worker", a.worker, "the worker script (default: src/dtx/worker.py)")
      ->check(CLI::ExistingFile);
  sub.add_flag("-v,--verbose", a.verbose, "log the workers' standard error");
  sub.add_flag("--no-prefetch", a.no_prefetch,
               "do not let a timing worker ready its next request while it times one");
  sub.add_option("--backend", a.backend,
                 "local: worker processes on this machine (default); ray: actors on a Ray "
                 "cluster (docs/ray.md)")
      ->check(CLI::IsMember({"local", "ray"}));
  sub.add_option("--ray-address", a.ray_address,
                 "the Ray cluster: the head's HOST:PORT, `auto`, ray://HOST:PORT, or `local` "
                 "(default $RAY_ADDRESS); implies --backend ray")
      ->check(non_empty_check());
  sub.add_option("--ray-interpreter-workers", a.ray_interpreter_workers,
                 "time on this many CPU actors with the Triton interpreter instead of GPUs "
                 "(testing a cluster without GPUs)")
      ->check(number_check(pool_rule("ray_interpreter_workers")));
  sub.add_option("--ray-compile-per-node", a.ray_compile_per_node,
                 "compile actors per node (default: one per GPU, at most the node's CPUs)")
      ->check(number_check(pool_rule("ray_compile_per_node")));
}

namespace {

std::function<void(const std::string&, const std::string&)> pool_log(bool verbose) {
  return [verbose](const std::string& who, const std::string& line) {
    bool event = who == "ray" || line.rfind("dtx-ray: ", 0) == 0;
    for (const char* prefix : {"started pid", "hello:", "worker ", "request ", "CUDA error"})
      event = event || line.rfind(prefix, 0) == 0;
    if (!verbose && !event) return;
    // One write per line: the exploration's own messages go to stderr from another thread.
    std::cerr << ("dtx: [" + who + "] " + line + "\n");
  };
}

} // namespace

std::unique_ptr<MeasurementBackend> make_backend(const PoolArgs& a, std::size_t& workers,
                                                 std::string& description) {
  std::string address = a.ray_address;
  if (address.empty() && a.backend == "ray")
    if (const char* env = std::getenv("RAY_ADDRESS"); env && *env) address = env;
  if (a.backend == "ray" || !a.ray_address.empty()) {
    if (address.empty())
      throw std::runtime_error("--backend ray needs --ray-address (or $RAY_ADDRESS): the "
                               "head's HOST:PORT as `ray start --head` printed it");
    RayOptions o;
    o.address = address;
    if (!a.python.empty()) o.python = a.python;
    if (!a.worker.empty()) o.worker_script = a.worker;
    o.interpreter_workers = a.ray_interpreter_workers;
    if (a.ray_compile_per_node >= 0) o.compile_per_node = a.ray_compile_per_node;
    o.startup_timeout_s = a.startup_timeout;
    o.log = pool_log(a.verbose);
    auto backend = std::make_unique<RayBackend>(std::move(o));
    nlohmann::json hello = backend->cluster();
    std::size_t timing = hello.value("timing_workers", 0),
                compile = hello.value("compile_workers", 0);
    workers = std::max<std::size_t>(1, timing + compile);
    std::size_t gpus = 0;
    if (hello.contains("nodes"))
      for (const auto& n : hello["nodes"])
        gpus += n.value("gpus", 0);
    description = "Ray cluster at " + address + ": " +
                  std::to_string(hello.contains("nodes") ? hello["nodes"].size() : 0) +
                  " node(s), " + std::to_string(gpus) + " GPU(s); " + std::to_string(timing) +
                  " timing and " + std::to_string(compile) + " compile actor(s)" +
                  (a.ray_interpreter_workers > 0 ? " on the Triton interpreter" : "");
    return backend;
  }
  PoolOptions po = make_pool_options(a);
  std::size_t timing = std::max<std::size_t>(1, po.gpus.size());
  workers = timing + static_cast<std::size_t>(std::max(0, po.compile_workers));
  description = std::to_string(po.compile_workers) + " compile worker(s), " +
                std::to_string(timing) + " timing worker(s)" +
                (po.gpus.empty() ? " on the Triton interpreter (no GPU)" : "");
  return std::make_unique<WorkerPool>(std::move(po));
}

PoolOptions make_pool_options(const PoolArgs& a) {
  PoolOptions o;
  o.compile_workers = a.compile_workers;
  o.prefetch = !a.no_prefetch;
  if (!a.python.empty()) o.python = a.python;
  if (!a.worker.empty()) o.worker_script = a.worker;
  o.gpus = a.gpus.empty() ? visible_gpus() : parse_gpus(a.gpus); // checked by gpus_check
  o.startup_timeout_s = a.startup_timeout;
  o.log = pool_log(a.verbose);
  return o;
}

void add_remote_options(CLI::App& sub, Remote& remote) {
  if (const char* env = std::getenv("DTX_SERVER")) remote.url = env;
  if (const char* env = std::getenv("DTX_TOKEN")) remote.token = env;
  sub.add_option("--server", remote.url,
                 "send the work to a dtxd at this URL (default $DTX_SERVER), e.g. "
                 "http://127.0.0.1:8080")
      ->check(CLI::Validator([](std::string& url) { return server_url_problem(url); }, "URL"));
  sub.add_option("--token", remote.token, "the server's token (default $DTX_TOKEN)")
      ->check(token_check());
}

std::string server_url_problem(const std::string& url) {
  // http(s)://HOST[:PORT], HOST a name or an [IPv6 address]: scanned, not matched by a regex
  // (the text is the user's, of any length).
  const std::string bad = "`" + url + "` is not a server URL: give http://HOST:PORT";
  auto all = [](std::string_view s, auto ok) {
    return !s.empty() && std::all_of(s.begin(), s.end(), ok);
  };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  std::string_view rest = url;
  if (rest.starts_with("http://"))
    rest.remove_prefix(7);
  else if (rest.starts_with("https://"))
    rest.remove_prefix(8);
  else
    return bad;
  if (rest.starts_with('[')) {
    std::size_t close = rest.find(']');
    if (close == rest.npos || !all(rest.substr(1, close - 1), [&](char c) {
          return digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' ||
                 c == '.';
        }))
      return bad;
    rest.remove_prefix(close + 1);
  } else {
    std::size_t colon = std::min(rest.find(':'), rest.size());
    if (!all(rest.substr(0, colon), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
        }))
      return bad;
    rest.remove_prefix(colon);
  }
  if (rest.empty() || (rest.front() == ':' && rest.size() <= 6 && all(rest.substr(1), digit)))
    return "";
  return bad;
}

int check_remote(const Remote& remote) {
  // $DTX_SERVER and $DTX_TOKEN follow the rules of --server and --token.
  std::string problem = remote.url.empty() ? "" : server_url_problem(remote.url);
  if (!problem.empty()) {
    std::cerr << "dtx: --server (or $DTX_SERVER): " << problem << "\n";
    return kUsageError;
  }
  problem = remote.token.empty() ? "" : token_problem(remote.token);
  if (!problem.empty()) {
    std::cerr << "dtx: --token (or $DTX_TOKEN): " << problem << "\n";
    return kUsageError;
  }
  return 0;
}

std::string default_db() {
  const char* env = std::getenv("DTX_DB");
  return env && *env ? env : "dtx.db";
}

} // namespace dtx::cli
