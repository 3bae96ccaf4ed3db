#include "api/http_errors.h"

#include <exception>

#include "api/json_fields.h"
#include "base/strings.h"

namespace tessera {
namespace {

constexpr size_t kMaxRawBody = 512;

constexpr StatusCode kAllCodes[] = {StatusCode::kOk,
                                    StatusCode::kInvalidArgument,
                                    StatusCode::kNotFound,
                                    StatusCode::kAlreadyExists,
                                    StatusCode::kResourceExhausted,
                                    StatusCode::kFailedPrecondition,
                                    StatusCode::kAborted,
                                    StatusCode::kUnavailable,
                                    StatusCode::kOutOfRange,
                                    StatusCode::kUnimplemented,
                                    StatusCode::kInternal,
                                    StatusCode::kUnauthenticated,
                                    StatusCode::kPermissionDenied};

}  // namespace

int HttpStatusOf(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return 400;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kAborted:
      return 409;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnimplemented:
      return 501;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kInternal:
      return 500;
  }
  return 500;
}

StatusCode StatusCodeFromHttp(int http_status) {
  if (http_status >= 200 && http_status < 300) {
    return StatusCode::kOk;
  }
  switch (http_status) {
    case 400:
      return StatusCode::kInvalidArgument;
    case 401:
      return StatusCode::kUnauthenticated;
    case 403:
      return StatusCode::kPermissionDenied;
    case 404:
      return StatusCode::kNotFound;
    case 409:
      return StatusCode::kAborted;
    case 408:
      return StatusCode::kUnavailable;
    case 412:
      return StatusCode::kFailedPrecondition;
    case 416:
      return StatusCode::kOutOfRange;
    case 429:
      return StatusCode::kResourceExhausted;
    case 501:
      return StatusCode::kUnimplemented;
    case 502:
    case 503:
    case 504:
      return StatusCode::kUnavailable;
    default:
      break;
  }
  if (http_status >= 400 && http_status < 500) {
    return StatusCode::kInvalidArgument;  // 405, 413, 415, 422...: the request needs fixing
  }
  return StatusCode::kInternal;
}

StatusOr<StatusCode> ParseStatusCode(std::string_view name) {
  for (StatusCode code : kAllCodes) {
    if (StatusCodeName(code) == name) {
      return code;
    }
  }
  return InvalidArgumentError("unknown status code '" + ToValidUtf8(name.substr(0, 64)) + "'");
}

std::string ErrorBody(const Status& status) {
  Json body = {{"error",
                {{"code", std::string(StatusCodeName(status.code()))},
                 {"message", ToValidUtf8(status.message())}}}};
  return DumpJson(body);
}

Status StatusFromHttp(int http_status, std::string_view body) {
  const StatusCode fallback = StatusCodeFromHttp(http_status);
  if (fallback == StatusCode::kOk) {
    return Status::Ok();
  }
  StatusOr<Json> parsed = ParseJsonText(body, "error body", {1 << 20, 8});
  if (parsed.ok() && parsed->is_object()) {
    const Json* error = FindField(*parsed, "error");
    if (error != nullptr && error->is_object()) {
      const Json* code = FindField(*error, "code");
      const Json* message = FindField(*error, "message");
      std::string text =
          message != nullptr && message->is_string() ? message->get<std::string>() : "";
      if (code != nullptr && code->is_string()) {
        StatusOr<StatusCode> c = ParseStatusCode(code->get<std::string>());
        if (c.ok() && *c != StatusCode::kOk) {
          if (text.empty()) {
            text = "HTTP " + std::to_string(http_status);
          }
          return Status(*c, std::move(text));
        }
      }
      // Our shape with a code this side does not know: the HTTP status's code, and the
      // message as sent.
      if (!text.empty()) {
        return Status(fallback, std::move(text));
      }
    }
  }
  std::string message = "HTTP " + std::to_string(http_status);
  std::string_view raw = Trim(body);
  if (!raw.empty()) {
    message += ": " + ToValidUtf8(raw.substr(0, kMaxRawBody));
    if (raw.size() > kMaxRawBody) {
      message += "...";
    }
  }
  return Status(fallback, std::move(message));
}

}  // namespace tessera
