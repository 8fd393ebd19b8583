#include "WorkerProcess.h"

#include "dtx/Protocol.h"
#include "dtx/results/Utf8.h"

#include <boost/process/extend.hpp>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace bp = boost::process;

namespace dtx::detail {

namespace {

// Runs in the child between fork and exec (async-signal-safe calls only): the worker's pipes
// become its standard streams, it gets its own process group (the pool kills the group), it
// dies when the thread that started it dies (PR_SET_PDEATHSIG, which also covers SIGKILL of the
// parent), and it inherits no other descriptor and no blocked signal.
struct ChildSetup : bp::extend::handler {
  int in_fd, out_fd, err_fd;
  pid_t parent;

  template <typename Executor> void on_exec_setup(Executor&) const {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(111); // the parent died before prctl
    ::dup2(in_fd, 0);
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
#ifdef SYS_close_range
    if (::syscall(SYS_close_range, 3U, ~0U, 4U /* CLOSE_RANGE_CLOEXEC */) == 0) return;
#endif
    for (int fd = 3; fd < 4096; ++fd)
      ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
};

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<std::int64_t>(0, left.count()));
}

} // namespace

WorkerProcess::WorkerProcess(Spec spec) : spec_(std::move(spec)) {}

WorkerProcess::~WorkerProcess() {
  kill();
}

bool WorkerProcess::start(Clock::time_point deadline, const std::function<bool()>& stop,
                          std::string& error) {
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    error = std::string("cannot create pipes: ") + std::strerror(errno);
    return false;
  }
  bp::environment env = boost::this_process::environment();
  for (const auto& [key, value] : spec_.env)
    env[key] = value;
  try {
    child_ =
        std::make_unique<bp::child>(bp::exe = spec_.python, bp::args = spec_.args, bp::env = env,
                                    ChildSetup{{}, in[0], out[1], err[1], ::getpid()});
  } catch (const std::exception& e) {
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]})
      ::close(fd);
    error = "cannot start `" + spec_.python + "`: " + e.what();
    return false;
  }
  pid_ = child_->id();
  ::setpgid(static_cast<pid_t>(pid_), static_cast<pid_t>(pid_)); // also here: no race with kill
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  in_fd_ = in[1];
  out_fd_ = out[0];
  err_fd_ = err[0];
  ::fcntl(in_fd_, F_SETFL, ::fcntl(in_fd_, F_GETFL) | O_NONBLOCK);
  if (spec_.log) spec_.log(spec_.name, "started pid " + std::to_string(pid_));

  std::string line;
  Io io = read_line(line, deadline, stop);
  if (io == Io::Done) {
    nlohmann::json message = nlohmann::json::parse(line, nullptr, false);
    if (auto hello = parse_hello(message)) {
      info_ = *hello;
      if (info_.protocol != kProtocolVersion) {
        error = "the worker speaks protocol " + std::to_string(info_.protocol) + ", not " +
                std::to_string(kProtocolVersion);
        kill();
        return false;
      }
      return true;
    }
    error = "the worker's first line is not a hello: " + line.substr(0, 200);
    kill();
  } else if (io == Io::Closed) {
    error = "the worker exited before its hello (" + wait_and_describe() + ")";
  } else if (io == Io::Timeout) {
    error = "no hello from the worker within the startup timeout";
    kill();
  } else {
    error = "the pool is shutting down";
    kill();
  }
  return false;
}

void WorkerProcess::on_stderr(const char* data, std::size_t size) {
  tail_.append(data, size);
  if (tail_.size() > spec_.stderr_tail_bytes) tail_ = utf8_tail(tail_, spec_.stderr_tail_bytes);
  if (!spec_.log) return;
  err_line_.append(data, size);
  std::size_t start = 0, nl;
  while ((nl = err_line_.find('\n', start)) != std::string::npos) {
    spec_.log(spec_.name, err_line_.substr(start, nl - start));
    start = nl + 1;
  }
  err_line_.erase(0, start);
  if (err_line_.size() > 65536) { // a very long line without a newline: log it in pieces
    spec_.log(spec_.name, err_line_);
    err_line_.clear();
  }
}

void WorkerProcess::drain_stderr() {
  if (err_fd_ < 0) return;
  char buf[8192];
  for (;;) {
    pollfd p{err_fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0 || !(p.revents & (POLLIN | POLLHUP))) return;
    ssize_t n = ::read(err_fd_, buf, sizeof buf);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      close_fd(err_fd_);
      return;
    }
    on_stderr(buf, static_cast<std::size_t>(n));
  }
}

WorkerProcess::Io WorkerProcess::pump(Clock::time_point deadline, const std::function<bool()>& stop,
                                      bool want_line, std::string* line, std::string_view* out) {
  char buf[65536];
  for (;;) {
    if (want_line) {
      if (auto nl = out_buffer_.find('\n'); nl != std::string::npos) {
        *line = out_buffer_.substr(0, nl);
        out_buffer_.erase(0, nl + 1);
        return Io::Done;
      }
      if (out_fd_ < 0) return Io::Closed;
    } else if (out->empty()) {
      return Io::Done;
    }
    if (stop && stop()) return Io::Stopped;
    int wait_ms = remaining_ms(deadline);
    if (wait_ms == 0) return Io::Timeout;
    pollfd fds[3];
    int n = 0;
    int out_i = -1, err_i = -1, in_i = -1;
    if (out_fd_ >= 0) fds[out_i = n++] = {out_fd_, POLLIN, 0};
    if (err_fd_ >= 0) fds[err_i = n++] = {err_fd_, POLLIN, 0};
    if (!want_line) fds[in_i = n++] = {in_fd_, POLLOUT, 0};
    int ready = ::poll(fds, static_cast<nfds_t>(n), std::min(wait_ms, 100));
    if (ready < 0 && errno != EINTR) return Io::Closed;
    if (ready <= 0) continue;
    if (err_i >= 0 && (fds[err_i].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t got = ::read(err_fd_, buf, sizeof buf);
      if (got > 0)
        on_stderr(buf, static_cast<std::size_t>(got));
      else if (got == 0 || errno != EINTR)
        close_fd(err_fd_);
    }
    if (out_i >= 0 && (fds[out_i].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t got = ::read(out_fd_, buf, sizeof buf);
      if (got > 0)
        out_buffer_.append(buf, static_cast<std::size_t>(got));
      else if (got == 0 || errno != EINTR)
        close_fd(out_fd_);
    }
    if (in_i >= 0 && fds[in_i].revents) {
      if (fds[in_i].revents & (POLLERR | POLLHUP)) return Io::Closed;
      ssize_t put = ::write(in_fd_, out->data(), out->size());
      if (put > 0)
        out->remove_prefix(static_cast<std::size_t>(put));
      else if (put < 0 && errno != EAGAIN && errno != EINTR)
        return Io::Closed; // EPIPE: the worker is gone
    }
    if (!want_line && out_fd_ < 0) return Io::Closed; // it exited while we were writing
  }
}

WorkerProcess::Io WorkerProcess::send(const std::string& line, Clock::time_point deadline,
                                      const std::function<bool()>& stop) {
  if (in_fd_ < 0) return Io::Closed;
  // What the previous request wrote is in the pipe already (the worker writes its standard
  // error before its result): read it, and leave it out of this request's tail.
  drain_stderr();
  tail_.clear();
  std::string_view rest = line;
  return pump(deadline, stop, false, nullptr, &rest);
}

WorkerProcess::Io WorkerProcess::write(const std::string& line, Clock::time_point deadline,
                                       const std::function<bool()>& stop) {
  std::string_view rest = line;
  while (!rest.empty()) {
    if (in_fd_ < 0) return Io::Closed;
    if (stop && stop()) return Io::Stopped;
    int wait_ms = remaining_ms(deadline);
    if (wait_ms == 0) return Io::Timeout;
    pollfd p{in_fd_, POLLOUT, 0};
    int ready = ::poll(&p, 1, std::min(wait_ms, 100));
    if (ready < 0 && errno != EINTR) return Io::Closed;
    if (ready <= 0) continue;
    if (p.revents & (POLLERR | POLLHUP)) return Io::Closed;
    ssize_t put = ::write(in_fd_, rest.data(), rest.size());
    if (put > 0)
      rest.remove_prefix(static_cast<std::size_t>(put));
    else if (put < 0 && errno != EAGAIN && errno != EINTR)
      return Io::Closed; // EPIPE: the process is gone
  }
  return Io::Done;
}

WorkerProcess::Io WorkerProcess::read_line(std::string& line, Clock::time_point deadline,
                                           const std::function<bool()>& stop) {
  return pump(deadline, stop, true, &line, nullptr);
}

bool WorkerProcess::running() {
  if (!child_ || reaped_) return false;
  std::error_code ec;
  return child_->running(ec);
}

void WorkerProcess::kill() {
  if (child_ && !reaped_) {
    ::kill(-static_cast<pid_t>(pid_), SIGKILL); // the group: the worker and anything it started
    ::kill(static_cast<pid_t>(pid_), SIGKILL);
    std::error_code ec;
    child_->wait(ec);
    reaped_ = true;
  }
  drain_stderr();
  close_fd(in_fd_);
  close_fd(out_fd_);
  close_fd(err_fd_);
}

std::string WorkerProcess::wait_and_describe() {
  if (!child_) return "not started";
  // Its standard output is closed, so it is exiting; give it a moment, then make sure.
  std::error_code ec;
  auto until = Clock::now() + std::chrono::seconds(5);
  while (child_->running(ec) && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  drain_stderr();
  bool was_running = child_->running(ec);
  if (was_running) ::kill(-static_cast<pid_t>(pid_), SIGKILL);
  child_->wait(ec);
  reaped_ = true;
  int raw = child_->native_exit_code();
  close_fd(in_fd_);
  close_fd(out_fd_);
  close_fd(err_fd_);
  if (was_running) return "closed its output without exiting; killed";
  if (WIFSIGNALED(raw)) {
    int sig = WTERMSIG(raw);
    const char* name = ::sigabbrev_np(sig);
    return "killed by signal " + std::to_string(sig) +
           (name ? std::string(" (SIG") + name + ")" : "");
  }
  if (WIFEXITED(raw)) return "exited with status " + std::to_string(WEXITSTATUS(raw));
  return "ended with wait status " + std::to_string(raw);
}

} // namespace dtx::detail
