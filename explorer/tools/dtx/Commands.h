#pragma once
// The `dtx` subcommands: each file adds one to the CLI11 app and returns how to run it.
#include "dtx/Request.h"
#include "dtx/Space.h"
#include "dtx/cli/Checks.h"

#include <CLI/CLI.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace dtx::cli {

constexpr int kUsageError = 2;
/// `dtx explore --resume ID` of an exploration another process runs (it holds its lease).
constexpr int kLeaseHeld = 4;

struct Command {
  CLI::App* sub;
  std::function<int()> run;
};

Command add_measure_command(CLI::App& app);
Command add_expand_command(CLI::App& app);

std::vector<std::string> split(const std::string& s, char sep);
/// `x=4096,y=4096`; throws CLI::ValidationError naming `option`.
ShapeSizes parse_shape(const std::string& text, const std::string& option = "--shape");
std::string fmt_ms(double v);
/// Says why a request (a template file and the options) breaks a rule (Request.h) and returns
/// the exit status: a bad field names where it came from (the option, or `file`), 2; template
/// and algorithm errors at their lines, 1.
int report(const RequestError& e, const std::string& file);
std::string shape_text(const ShapeSizes& shape);

} // namespace dtx::cli

#include "dtx/WorkerPool.h"

#include <memory>

namespace dtx::cli {

/// The worker-pool options shared by measure and explore.
struct PoolArgs {
  int compile_workers = 1;
  std::string gpus, python, worker;
  double startup_timeout = 300;
  bool verbose = false;
  bool no_prefetch = false;
  std::string backend = "local"; // local or ray
  std::string ray_address;       // implies --backend ray
  int ray_interpreter_workers = 0;
  int ray_compile_per_node = -1; // -1: the driver's default
};
void add_pool_options(CLI::App& sub, PoolArgs& args);
PoolOptions make_pool_options(const PoolArgs& args);

/// The measurement backend the options name: the local pool or a Ray cluster (which throws
/// std::runtime_error, saying why, when it cannot be used). `workers` receives the number of
/// timing and compile workers, for sizing what is kept in flight; `description` a line for
/// the user.
std::unique_ptr<MeasurementBackend> make_backend(const PoolArgs& args, std::size_t& workers,
                                                 std::string& description);

Command add_explore_command(CLI::App& app);
Command add_results_command(CLI::App& app);
Command add_best_command(CLI::App& app);

/// The results database: --db, else $DTX_DB, else ./dtx.db.
std::string default_db();

struct Remote;
/// --server URL (default $DTX_SERVER) and --token (default $DTX_TOKEN): client mode.
void add_remote_options(CLI::App& sub, Remote& remote);
/// "" when `url` is http(s)://HOST[:PORT], else why not.
std::string server_url_problem(const std::string& url);
/// 0 when the remote's URL and token (perhaps from the environment) follow the rules of
/// --server and --token, else says why and returns kUsageError.
int check_remote(const Remote& remote);

} // namespace dtx::cli
