// Internal to the server's HTTP handlers (server.cc, server_jobs.cc, server_nodes.cc):
// JSON answers, error answers, JSON request bodies and query parameters. Not part of the server's interface.
// Thread safety: stateless functions.
#pragma once

#include <httplib.h>

#include <charconv>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "api/http_errors.h"
#include "base/status.h"
#include "base/time_format.h"
#include "server/http/auth.h"
#include "server/job_number.h"

namespace tessera::server_internal {

inline void SendJson(httplib::Response& res, const nlohmann::json& j, int status = 200) {
  res.status = status;
  // Logs and user strings may hold invalid UTF-8: replace rather than throw.
  res.set_content(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

inline void SendError(httplib::Response& res, const Status& s) {
  res.status = HttpStatusOf(s.code());
  res.set_content(ErrorBody(s), "application/json");
}

inline StatusOr<nlohmann::json> ParseBody(const httplib::Request& req) {
  nlohmann::json j = nlohmann::json::parse(req.body, nullptr, false);
  if (j.is_discarded()) {
    return InvalidArgumentError("request body is not valid JSON");
  }
  return j;
}

// A job id in a request path: the HTTP boundary's integer, as a JobNumber.
inline StatusOr<JobNumber> ParseId(const std::string& text) {
  uint64_t id = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || p != text.data() + text.size() || id == 0) {
    return NotFoundError("no job '" + text + "'");
  }
  return JobNumber(id);
}

inline StatusOr<int64_t> ParseIntParam(const httplib::Request& req, const char* name, int64_t def) {
  if (!req.has_param(name)) {
    return def;
  }
  const std::string v = req.get_param_value(name);
  int64_t out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || p != v.data() + v.size() || out < 0) {
    return InvalidArgumentError(std::string(name) + ": expected a non-negative integer, got '" + v +
                                "'");
  }
  return out;
}

// The optional `since` and `until` parameters (RFC 3339) over the defaults in *since, *until.
inline Status ParseWindow(const httplib::Request& req, Micros* since, Micros* until) {
  for (auto [name, target] : {std::pair{"since", since}, std::pair{"until", until}}) {
    if (req.has_param(name)) {
      StatusOr<Micros> t = ParseRfc3339(req.get_param_value(name));
      if (!t.ok()) {
        return InvalidArgumentError(std::string(name) + ": " + t.status().message());
      }
      *target = t.value();
    }
  }
  return Status::Ok();
}

inline bool IsYaml(const httplib::Request& req) {
  const std::string type = req.get_header_value("Content-Type");
  return type.find("yaml") != std::string::npos;
}

// OK for the admin; PermissionDenied for everyone else.
inline Status AdminOnly(const Principal& who) {
  return who.role == Role::kAdmin ? Status::Ok()
                                  : PermissionDeniedError("only an admin may do this");
}

}  // namespace tessera::server_internal
