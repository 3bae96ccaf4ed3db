// Status <-> HTTP: the status code a Status travels as, and the JSON error body.
//
//   InvalidArgument, OutOfRange 400; Unauthenticated 401; PermissionDenied 403;
//   NotFound 404; AlreadyExists, FailedPrecondition, Aborted 409; ResourceExhausted 429;
//   Internal 500; Unimplemented 501; Unavailable 503; OK 200.
//
// Error body: {"error": {"code": "InvalidArgument", "message": "..."}}. StatusFromHttp
// reads that body back to the same code and message; for any other body (a proxy's
// HTML page, an empty body) it derives the code from the HTTP status and keeps the
// start of the raw body as the message; a body in that shape whose code is unknown here
// gets the HTTP status's code and keeps its message. A 2xx status is OK whatever the body.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace tessera {

int HttpStatusOf(StatusCode code);
// The code an HTTP status stands for when the body does not say.
StatusCode StatusCodeFromHttp(int http_status);
// Inverse of StatusCodeName ("InvalidArgument" -> kInvalidArgument); InvalidArgument
// error for an unknown name.
StatusOr<StatusCode> ParseStatusCode(std::string_view name);

// {"error":{"code":"InvalidArgument","message":"..."}}; never throws (bytes that are
// not UTF-8 are replaced).
std::string ErrorBody(const Status& status);
Status StatusFromHttp(int http_status, std::string_view body);

}  // namespace tessera
