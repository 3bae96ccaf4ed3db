// Internal to the server's HTTP handlers (server.cc, server_nodes.cc): JSON answers,
// error answers and JSON request bodies. Not part of the server's interface.
// Thread safety: stateless functions.
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "api/http_errors.h"
#include "base/status.h"

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

}  // namespace tessera::server_internal
