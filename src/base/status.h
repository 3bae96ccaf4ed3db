// Status and StatusOr<T>: the error currency of Tessera.
//
// Contract: functions that can fail return Status or StatusOr<T>, never throw across
// module boundaries. Codes follow the canonical set, chosen by what a caller should do:
// InvalidArgument (fix the input), NotFound, AlreadyExists, ResourceExhausted (over
// quota or capacity; retry later), FailedPrecondition (state is wrong for the call),
// Aborted (lost a race; retry now), Unavailable (peer down; retry with backoff),
// OutOfRange, Unimplemented, Internal (a bug), Unauthenticated (no or bad credentials),
// PermissionDenied (known caller, not allowed). A job that does not fit is a scheduling
// outcome, not an error. Thread safety: values; safe to copy between threads.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace tessera {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kResourceExhausted,
  kFailedPrecondition,
  kAborted,
  kUnavailable,
  kOutOfRange,
  kUnimplemented,
  kInternal,
  kUnauthenticated,   // no or bad credentials
  kPermissionDenied,  // known caller, not allowed
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "InvalidArgument: gpu_milli must be in 0..1000, got 1500"
  std::string ToString() const;

  bool operator==(const Status& other) const = default;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgumentError(std::string msg) {
  return {StatusCode::kInvalidArgument, std::move(msg)};
}
inline Status NotFoundError(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
inline Status AlreadyExistsError(std::string msg) {
  return {StatusCode::kAlreadyExists, std::move(msg)};
}
inline Status ResourceExhaustedError(std::string msg) {
  return {StatusCode::kResourceExhausted, std::move(msg)};
}
inline Status FailedPreconditionError(std::string msg) {
  return {StatusCode::kFailedPrecondition, std::move(msg)};
}
inline Status AbortedError(std::string msg) { return {StatusCode::kAborted, std::move(msg)}; }
inline Status UnavailableError(std::string msg) {
  return {StatusCode::kUnavailable, std::move(msg)};
}
inline Status OutOfRangeError(std::string msg) { return {StatusCode::kOutOfRange, std::move(msg)}; }
inline Status UnimplementedError(std::string msg) {
  return {StatusCode::kUnimplemented, std::move(msg)};
}
inline Status InternalError(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }
inline Status UnauthenticatedError(std::string msg) {
  return {StatusCode::kUnauthenticated, std::move(msg)};
}
inline Status PermissionDeniedError(std::string msg) {
  return {StatusCode::kPermissionDenied, std::move(msg)};
}

// The system's text for errno value `err` ("No such file or directory"), thread-safe
// where strerror is not.
std::string ErrnoText(int err);

// StatusOr<T> holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  // Implicit from a value or an error, so `return value;` and `return NotFoundError(..);`
  // both read naturally.
  StatusOr(T value) : rep_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  StatusOr(Status status) : rep_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(rep_).ok() && "StatusOr built from an OK Status");
    if (std::get<Status>(rep_).ok()) {
      rep_ = Status(StatusCode::kInternal, "StatusOr built from an OK Status");
    }
  }

  bool ok() const { return std::holds_alternative<T>(rep_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(rep_); }

  const T& value() const& {
    assert(ok());
    return std::get<T>(rep_);
  }
  T& value() & {
    assert(ok());
    return std::get<T>(rep_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(rep_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<Status, T> rep_;
};

}  // namespace tessera

#define TESSERA_STATUS_CONCAT_INNER(a, b) a##b
#define TESSERA_STATUS_CONCAT(a, b) TESSERA_STATUS_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function when `expr` is not OK.
#define TESSERA_RETURN_IF_ERROR(expr)           \
  do {                                          \
    ::tessera::Status tessera_status_ = (expr); \
    if (!tessera_status_.ok()) {                \
      return tessera_status_;                   \
    }                                           \
  } while (false)

// `TESSERA_ASSIGN_OR_RETURN(auto x, MakeX());` binds the value or returns the error.
#define TESSERA_ASSIGN_OR_RETURN(lhs, expr) \
  TESSERA_ASSIGN_OR_RETURN_IMPL(TESSERA_STATUS_CONCAT(tessera_statusor_, __LINE__), lhs, expr)
// NOLINTBEGIN(bugprone-macro-parentheses): `lhs` is a declaration, not an expression.
#define TESSERA_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) {                                    \
    return tmp.status();                              \
  }                                                   \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)
