// dtxd's connections (see Connection.h): a thread per open connection, taken from the idle ones
// or started; a stream over the socket whose reads end at the request's deadline; the keep-alive
// loop around httplib's request parsing and routing.
#include "Connection.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace dtx::server {

namespace {

using Clock = std::chrono::steady_clock;

/// The server and socket of the request this thread serves.
struct Current {
  HttpServer* server = nullptr;
  socket_t sock = -1;
  bool close = false; // after the response being made
};
thread_local Current current;

/// poll() on one socket for `events`, waiting at most until `deadline`, in slices so that a
/// stopping server is noticed; `stop` may be null. Whether the socket is ready.
bool await(socket_t sock, short events, Clock::time_point deadline,
           const std::atomic<bool>* stop = nullptr) {
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0 || (stop && *stop)) return false;
    pollfd p{sock, events, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 100)));
    if (rc > 0) return true; // ready, or an error or hang-up the next call reports
    if (rc < 0 && errno != EINTR) return false;
  }
}

Clock::time_point after(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

/// Whether the peer has closed (or reset) `sock`: no byte of a next request is waiting and the
/// socket reads as ended.
bool peer_closed(socket_t sock) {
  pollfd p{sock, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return true;
  char byte;
  ssize_t n = ::recv(sock, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

void address_of(const sockaddr_storage& a, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = "";
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    ::inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
    port = ntohs(v4.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    ::inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
    port = ntohs(v6.sin6_port);
  }
  ip = text;
}

/// A connection's socket as httplib's Stream. Reads wait at most until the deadline of the
/// request being read (begin_request); bytes read ahead stay for the next request.
class ConnectionStream : public httplib::Stream {
public:
  ConnectionStream(socket_t sock, const ConnectionLimits& limits) : sock_(sock), limits_(limits) {}

  /// Waits for the first byte of a next request, at most the idle timeout.
  bool await_request(const std::atomic<bool>& stop) {
    return off_ < size_ || await(sock_, POLLIN, after(limits_.idle_timeout_s), &stop);
  }
  void begin_request() { deadline_ = after(limits_.request_timeout_s); }

  bool is_readable() const override { return off_ < size_ || await(sock_, POLLIN, deadline_); }
  bool is_writable() const override {
    return await(sock_, POLLOUT, after(limits_.write_timeout_s)) && !peer_closed(sock_);
  }
  ssize_t read(char* ptr, size_t size) override {
    if (off_ == size_) {
      if (!await(sock_, POLLIN, deadline_)) return -1;
      ssize_t n;
      do
        n = ::recv(sock_, buffer_.data(), buffer_.size(), 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      off_ = 0;
      size_ = static_cast<std::size_t>(n);
    }
    std::size_t k = std::min(size, size_ - off_);
    std::memcpy(ptr, buffer_.data() + off_, k);
    off_ += k;
    return static_cast<ssize_t>(k);
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!await(sock_, POLLOUT, after(limits_.write_timeout_s))) return -1;
    ssize_t n;
    do
      n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (::getpeername(sock_, reinterpret_cast<sockaddr*>(&a), &len) == 0) address_of(a, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (::getsockname(sock_, reinterpret_cast<sockaddr*>(&a), &len) == 0) address_of(a, ip, port);
  }
  socket_t socket() const override { return sock_; }

private:
  socket_t sock_;
  const ConnectionLimits& limits_;
  Clock::time_point deadline_ = Clock::now();
  std::array<char, 4096> buffer_{};
  std::size_t off_ = 0, size_ = 0;
};

/// Runs each connection on a thread of its own: an idle one when there is one, else a new one.
/// Threads idle for a minute end. shutdown() waits for every connection to be done.
class ThreadPerConnection : public httplib::TaskQueue {
public:
  void enqueue(std::function<void()> fn) override {
    std::unique_lock lock(s_->mutex);
    if (s_->idle > 0) {
      --s_->idle; // this job is that thread's
      s_->jobs.push_back(std::move(fn));
      s_->wake.notify_one();
      return;
    }
    ++s_->live;
    lock.unlock();
    std::thread(run, s_, std::move(fn)).detach();
  }
  void shutdown() override {
    std::unique_lock lock(s_->mutex);
    s_->ending = true;
    s_->wake.notify_all();
    s_->done.wait(lock, [&] { return s_->live == 0; });
  }

private:
  struct State {
    std::mutex mutex;
    std::condition_variable wake, done;
    std::deque<std::function<void()>> jobs;
    std::size_t idle = 0, live = 0;
    bool ending = false;
  };
  static void run(std::shared_ptr<State> s, std::function<void()> fn) {
    while (true) {
      fn();
      fn = nullptr;
      std::unique_lock lock(s->mutex);
      ++s->idle;
      s->wake.wait_for(lock, std::chrono::seconds(60),
                       [&] { return !s->jobs.empty() || s->ending; });
      if (s->jobs.empty()) { // timed out, or ending: no job was handed to this thread
        --s->idle;
        if (--s->live == 0) s->done.notify_all();
        return;
      }
      fn = std::move(s->jobs.front());
      s->jobs.pop_front();
    }
  }
  std::shared_ptr<State> s_ = std::make_shared<State>();
};

/// The answer to a connection beyond the limit, written without waiting.
void answer_busy(socket_t sock, std::size_t limit) {
  char drain[4096]; // what the request sent so far: closing with it unread would reset
  while (::recv(sock, drain, sizeof drain, MSG_DONTWAIT) > 0) {
  }
  std::string body = R"({"error":{"code":"busy","message":"dtxd has )" + std::to_string(limit) +
                     R"( connections open (max_connections); try again shortly"}})";
  std::string reply = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                      "Retry-After: 1\r\nConnection: close\r\nContent-Length: " +
                      std::to_string(body.size()) + "\r\n\r\n" + body;
  ::send(sock, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

} // namespace

HttpServer::HttpServer(ConnectionLimits limits) : limits_(limits) {
  new_task_queue = [] { return new ThreadPerConnection(); };
  set_keep_alive_max_count(1000);
}

HttpServer::~HttpServer() = default;

void HttpServer::shut_down() {
  stopping_ = true;
  // httplib's stop() does nothing until listen() has begun its loop, so a stop between binding
  // and that loop was lost and the loop then ran for ever (dtxd, stopped at once after its start,
  // logged "stopped" and never exited). Closing the listening socket here, as stop() does when
  // the loop runs, works either way: a loop that has not begun finds it closed and returns.
  socket_t sock = svr_sock_.exchange(INVALID_SOCKET);
  if (sock != INVALID_SOCKET) {
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
  }
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  struct Open {
    HttpServer& s;
    explicit Open(HttpServer& server) : s(server) {
      ++s.open_;
      current = {&s, -1};
    }
    ~Open() {
      --s.open_;
      current = {};
    }
  } open(*this);
  bool ret = false;
  if (open_ > limits_.max_connections) {
    answer_busy(sock, limits_.max_connections);
  } else {
    current.sock = sock;
    ConnectionStream strm(sock, limits_);
    for (std::size_t left = keep_alive_max_count_; left > 0 && svr_sock_ != INVALID_SOCKET;
         --left) {
      if (!strm.await_request(stopping_)) break;
      strm.begin_request();
      current.close = false;
      bool closed = false;
      ret = process_request(strm, left == 1, closed, nullptr);
      if (!ret || closed || current.close) break;
    }
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ret;
}

bool client_gone() {
  return current.sock >= 0 && peer_closed(current.sock);
}

void close_after_response() {
  current.close = true;
}

bool stopping() {
  return current.server && current.server->stopping_;
}

ConnectionCounts connection_counts() {
  const HttpServer* s = current.server;
  if (!s) return {};
  return {s->open_, s->limits_.max_connections, s->streams_, s->limits_.max_event_streams};
}

std::shared_ptr<void> take_event_stream() {
  HttpServer* s = current.server;
  if (!s) return nullptr;
  if (++s->streams_ > s->limits_.max_event_streams) {
    --s->streams_;
    return nullptr;
  }
  return std::shared_ptr<void>(static_cast<void*>(s), [s](void*) { --s->streams_; });
}

} // namespace dtx::server
