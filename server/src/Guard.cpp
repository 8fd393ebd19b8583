#include "Guard.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cctype>

namespace dtx::server {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool ip_literal(const std::string& host) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

bool wildcard(const std::string& bind) {
  return bind.empty() || bind == "0.0.0.0" || bind == "::" || bind == "*";
}

/// `host[:port]` or `[v6]:port` -> (host, port or -1); nullopt when malformed.
std::optional<std::pair<std::string, int>> split_host(const std::string& text) {
  std::string host = text, port;
  if (!host.empty() && host[0] == '[') {
    std::size_t close = host.find(']');
    if (close == std::string::npos) return std::nullopt;
    port = host.substr(close + 1);
    host = host.substr(1, close - 1);
    if (!port.empty() && port[0] != ':') return std::nullopt;
    if (!port.empty()) port.erase(0, 1);
  } else if (std::size_t colon = host.rfind(':'); colon != std::string::npos) {
    if (host.find(':') != colon) return std::nullopt; // a bare IPv6 address needs brackets
    port = host.substr(colon + 1);
    host.erase(colon);
  }
  if (host.empty() || port.size() > 5) return std::nullopt;
  int p = -1;
  if (!port.empty()) {
    if (!std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c); }))
      return std::nullopt;
    p = std::stoi(port);
  }
  return std::make_pair(lower(host), p);
}

/// A name this server answers to: loopback, the address it is bound to, a configured name, and,
/// bound to every interface, any IP address (a DNS-rebound request carries a name, not an IP).
bool our_name(const std::string& host, const Config& config) {
  if (host == "localhost" || host == "127.0.0.1" || host == "::1") return true;
  if (!wildcard(config.bind) && host == lower(config.bind)) return true;
  for (const std::string& h : config.hosts)
    if (host == lower(h)) return true;
  return wildcard(config.bind) && ip_literal(host);
}

} // namespace

std::optional<ApiError> refuse_origin(const httplib::Request& req, const Config& config, int port) {
  if (req.has_header("Host")) {
    std::string value = req.get_header_value("Host");
    auto host = split_host(value);
    if (!host || !our_name(host->first, config))
      return ApiError(403, "forbidden_host",
                      "`Host: " + value.substr(0, 200) +
                          "` is not a name of this server; add it to `hosts` in the "
                          "configuration to serve it");
  }
  if (req.has_header("Origin")) {
    std::string origin = req.get_header_value("Origin");
    std::string rest;
    int default_port = 0;
    if (origin.rfind("http://", 0) == 0) {
      rest = origin.substr(7);
      default_port = 80;
    } else if (origin.rfind("https://", 0) == 0) {
      rest = origin.substr(8);
      default_port = 443;
    }
    auto host =
        rest.empty() || rest.find('/') != std::string::npos ? std::nullopt : split_host(rest);
    if (!host || !our_name(host->first, config) ||
        (host->second < 0 ? default_port : host->second) != port)
      return ApiError(403, "forbidden_origin",
                      "requests from the page at `" + origin.substr(0, 200) +
                          "` are refused: only this server's own page may call it");
  }
  return std::nullopt;
}

std::optional<ApiError> refuse_framing(const httplib::Request& req) {
  std::size_t n = req.get_header_value_count("Content-Length");
  if (n == 0) {
    // httplib would read such a body until the client closes the connection, or for
    // `set_read_timeout`, and then answer 400 with nothing said.
    if ((req.method == "POST" || req.method == "PUT" || req.method == "PATCH") &&
        !req.has_header("Transfer-Encoding"))
      return ApiError(400, "length_required",
                      "a " + req.method +
                          " needs `Content-Length`, the body's length in bytes (0 for none: "
                          "`curl -X POST` without `-d` sends none), or "
                          "`Transfer-Encoding: chunked`");
    return std::nullopt;
  }
  std::string first = req.get_header_value("Content-Length");
  for (std::size_t i = 0; i < n; ++i) {
    std::string value = req.get_header_value("Content-Length", i);
    if (value.empty() || value.size() > 18 ||
        !std::all_of(value.begin(), value.end(), [](unsigned char c) { return std::isdigit(c); }))
      return ApiError(400, "bad_content_length",
                      "`Content-Length: " + value.substr(0, 40) +
                          "` is not a number of bytes: send the body's length in digits");
    if (value != first)
      return ApiError(400, "bad_content_length",
                      "the request has `Content-Length` " + first + " and " + value +
                          ": send one `Content-Length`, the body's length");
  }
  if (req.has_header("Transfer-Encoding"))
    return ApiError(400, "bad_content_length",
                    "the request has both `Content-Length` and `Transfer-Encoding`: send one");
  return std::nullopt;
}

std::string malformed_request(const httplib::Request& req) {
  if (!req.has_header("Transfer-Encoding"))
    return "the request is not HTTP/1.1 that this server reads: check its request line, its "
           "headers and the framing of its body";
  return "the request is not HTTP/1.1 that this server reads: check its request line, its "
         "headers and its chunks";
}

std::optional<ApiError> refuse_content(const httplib::Request& req) {
  if (req.method == "POST" || req.method == "PUT" || req.method == "PATCH" ||
      req.method == "DELETE") {
    std::string type = lower(req.get_header_value("Content-Type"));
    std::string media = type.substr(0, type.find(';'));
    media.erase(
        std::remove_if(media.begin(), media.end(), [](unsigned char c) { return std::isspace(c); }),
        media.end());
    if (media != "application/json")
      return ApiError(415, "unsupported_media_type",
                      "send the request body as JSON with `Content-Type: application/json`" +
                          (type.empty() ? std::string() : " (not `" + type.substr(0, 100) + "`)"));
  }
  return std::nullopt;
}

bool token_accepted(const std::string& authorization, const std::vector<std::string>& tokens) {
  // `Bearer` is case-insensitive (RFC 6750 follows RFC 7235's auth-scheme).
  if (authorization.size() < 7 || lower(authorization.substr(0, 7)) != "bearer ") return false;
  std::string given = authorization.substr(7);
  bool ok = false;
  for (const std::string& t : tokens) {
    // Every byte of the longer of the two is visited, whatever matches: the time says nothing
    // of how much of a token was right.
    std::size_t n = std::max(given.size(), t.size());
    unsigned char diff = given.size() == t.size() ? 0 : 1;
    for (std::size_t i = 0; i < n; ++i)
      diff |=
          static_cast<unsigned char>((i < given.size() ? given[i] : 0) ^ (i < t.size() ? t[i] : 0));
    ok |= diff == 0;
  }
  return ok;
}

} // namespace dtx::server
