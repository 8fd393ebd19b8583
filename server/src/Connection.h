#pragma once
// dtxd's connections: each has a thread of its own while it is open, so that clients that hold
// one (an event stream, a slow or idle client) never keep another from being served. Bounds:
// connections open at once (more are answered 503 at once), event streams open at once, the
// time a whole request may take to arrive (a client that trickles its headers is dropped), the
// time a keep-alive connection may idle. A handler asks whether its client is still there and
// whether the daemon is stopping, to end long work early.
#include <httplib.h>

#include <atomic>
#include <cstddef>
#include <memory>

namespace dtx::server {

struct ConnectionLimits {
  std::size_t max_connections = 1024;
  std::size_t max_event_streams = 64;
  double request_timeout_s = 20; // the request line, headers and body, from the first byte
  double idle_timeout_s = 5;     // a kept-alive connection with no new request is closed
  double write_timeout_s = 30;   // a response the client does not read is abandoned
};

struct ConnectionCounts {
  std::size_t open = 0, max_connections = 0, event_streams = 0, max_event_streams = 0;
};

/// httplib's server with the connection handling above (its request parsing and routing).
class HttpServer : public httplib::Server {
public:
  explicit HttpServer(ConnectionLimits limits);
  ~HttpServer() override;
  /// Handlers on their way out: stopping() is true from now on. Then httplib's stop().
  void shut_down();
  std::size_t open_connections() const { return open_.load(); }
  std::size_t open_event_streams() const { return streams_.load(); }
  const ConnectionLimits& limits() const { return limits_; }

private:
  bool process_and_close_socket(socket_t sock) override;
  friend std::shared_ptr<void> take_event_stream();
  friend bool stopping();
  friend ConnectionCounts connection_counts();

  ConnectionLimits limits_;
  std::atomic<std::size_t> open_{0}, streams_{0};
  std::atomic<bool> stopping_{false};
};

/// Whether the client of the request this thread serves has closed its connection (false off
/// a connection's thread).
bool client_gone();
/// Closes this thread's connection once the response being made is written (httplib itself
/// keeps a connection open whatever its answer says, unless the request said to close it).
void close_after_response();
/// Whether the daemon serving this thread's request is stopping.
bool stopping();
/// The connections of the server serving this thread's request (zeros off a connection).
ConnectionCounts connection_counts();
/// A place for an event stream, held as long as the pointer lives; null when every place is
/// taken (the caller answers 503).
std::shared_ptr<void> take_event_stream();

} // namespace dtx::server
