#pragma once
// What a request must show, so that no web page can drive a
// dtxd: its Host is one of the server's names (a DNS-rebound name is not), its Origin, when a
// browser sends one, is the server itself, and a POST says it carries JSON (a cross-site form
// or `text/plain` fetch cannot, without a CORS preflight that dtxd never answers).
#include "Api.h"

#include <optional>

namespace dtx::server {

/// Why `req` is refused (403: its Host or Origin is not this server), or nothing. `port` is the
/// port the server listens on. Every request, before routing.
std::optional<ApiError> refuse_origin(const httplib::Request& req, const Config& config, int port);

/// Why a request whose body's length is ambiguous or unknown is refused (400: `Content-Length`
/// given twice with different values, a value that is not a number of bytes, or beside
/// `Transfer-Encoding`; a POST with neither), or nothing. A server and a proxy in front of it
/// could each read a different body from such a request, and take the rest for another
/// request. Every request, before routing (before its body is read).
std::optional<ApiError> refuse_framing(const httplib::Request& req);

/// What was wrong with a request httplib answered 400 before any handler saw it: a request
/// line, header or chunk that could not be read.
std::string malformed_request(const httplib::Request& req);

/// Why a POST to an API route is refused (415: not `Content-Type: application/json`), or
/// nothing.
std::optional<ApiError> refuse_content(const httplib::Request& req);

/// Whether `token` is `Bearer T` for one of `tokens`, compared in constant time.
bool token_accepted(const std::string& authorization, const std::vector<std::string>& tokens);

} // namespace dtx::server
