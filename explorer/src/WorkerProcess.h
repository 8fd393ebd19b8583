#pragma once
// One worker process: started with Boost.Process in its own process group with
// PR_SET_PDEATHSIG=SIGKILL, spoken to over pipes with deadlines (poll), its standard error
// drained into a tail buffer and a log callback. Used by one pool thread at a time.
#include "dtx/Measurement.h"

#include <boost/process.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dtx::detail {

using Clock = std::chrono::steady_clock;
using LogFn = std::function<void(const std::string& worker, const std::string& line)>;

class WorkerProcess {
public:
  struct Spec {
    std::string name; // for logs: "compile-0", "timing-gpu1"
    std::string python;
    std::vector<std::string> args;          // the script and its arguments
    std::map<std::string, std::string> env; // set on top of this process' environment
    std::size_t stderr_tail_bytes = 4096;
    LogFn log;
  };

  explicit WorkerProcess(Spec spec);
  ~WorkerProcess(); // kills the process group
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  /// Spawns the process and waits for its hello line. False (with `error`) when it cannot be
  /// started, exits, says something else first, or says nothing before the deadline; the
  /// process is killed then.
  bool start(Clock::time_point deadline, const std::function<bool()>& stop, std::string& error);

  enum class Io { Done, Timeout, Closed, Stopped };
  /// Writes `line` (newline included), a request: stderr_tail() starts again with it.
  /// Closed: the worker is gone (broken pipe).
  Io send(const std::string& line, Clock::time_point deadline, const std::function<bool()>& stop);
  /// Writes `line` and nothing else: the tail is kept, and nothing is read, so one thread may
  /// write while another reads (kill and wait_and_describe kept apart from both).
  Io write(const std::string& line, Clock::time_point deadline, const std::function<bool()>& stop);
  /// Reads the next line of standard output. Closed: end of output (the worker exited).
  Io read_line(std::string& line, Clock::time_point deadline, const std::function<bool()>& stop);
  /// Reads whatever the worker wrote on standard error, without waiting.
  void drain_stderr();

  bool running();
  /// SIGKILL to the whole process group, then reaps the process.
  void kill();
  /// Reaps the process (after it closed its output) and says how it ended.
  std::string wait_and_describe();
  /// The end of what the worker wrote on standard error since the latest send() (before one,
  /// since it started): a request's own output, never a traceback of the one before it.
  std::string stderr_tail() const { return tail_; }
  long pid() const { return pid_; }
  const WorkerInfo& info() const { return info_; }

private:
  // Polls standard output (and standard input while `out` has bytes left) until one of them is
  // ready; standard error is drained on the way.
  Io pump(Clock::time_point deadline, const std::function<bool()>& stop, bool want_line,
          std::string* line, std::string_view* out);
  void on_stderr(const char* data, std::size_t size);

  Spec spec_;
  std::unique_ptr<boost::process::child> child_;
  int in_fd_ = -1, out_fd_ = -1, err_fd_ = -1;
  long pid_ = 0;
  bool reaped_ = false;
  std::string out_buffer_, err_line_, tail_;
  WorkerInfo info_;
};

} // namespace dtx::detail
