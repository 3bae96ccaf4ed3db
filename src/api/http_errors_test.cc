#include "api/http_errors.h"

#include <gtest/gtest.h>

#include <string>

namespace tessera {
namespace {

TEST(HttpErrorsTest, StatusCodesMapToHttp) {
  EXPECT_EQ(HttpStatusOf(StatusCode::kOk), 200);
  EXPECT_EQ(HttpStatusOf(StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusOf(StatusCode::kOutOfRange), 400);
  EXPECT_EQ(HttpStatusOf(StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatusOf(StatusCode::kPermissionDenied), 403);
  EXPECT_EQ(HttpStatusOf(StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusOf(StatusCode::kAlreadyExists), 409);
  EXPECT_EQ(HttpStatusOf(StatusCode::kFailedPrecondition), 409);
  EXPECT_EQ(HttpStatusOf(StatusCode::kAborted), 409);
  EXPECT_EQ(HttpStatusOf(StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusOf(StatusCode::kUnimplemented), 501);
  EXPECT_EQ(HttpStatusOf(StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusOf(StatusCode::kInternal), 500);
}

TEST(HttpErrorsTest, ErrorBodyRoundTripsEveryCode) {
  EXPECT_EQ(ErrorBody(InvalidArgumentError("resources.gpus: must be between 0 and 64, got -1")),
            R"({"error":{"code":"InvalidArgument","message":"resources.gpus: must be between 0 )"
            R"(and 64, got -1"}})");
  for (StatusCode code :
       {StatusCode::kInvalidArgument, StatusCode::kNotFound, StatusCode::kAlreadyExists,
        StatusCode::kResourceExhausted, StatusCode::kFailedPrecondition, StatusCode::kAborted,
        StatusCode::kUnavailable, StatusCode::kOutOfRange, StatusCode::kUnimplemented,
        StatusCode::kInternal, StatusCode::kUnauthenticated, StatusCode::kPermissionDenied}) {
    Status s(code, "why \"quoted\" \n and more");
    EXPECT_EQ(StatusFromHttp(HttpStatusOf(code), ErrorBody(s)), s) << StatusCodeName(code);
    EXPECT_EQ(*ParseStatusCode(StatusCodeName(code)), code);
  }
  EXPECT_FALSE(ParseStatusCode("Nope").ok());
}

TEST(HttpErrorsTest, ErrorBodyNeverThrowsOnBadBytes) {
  std::string body = ErrorBody(InternalError("bad \xff bytes"));
  EXPECT_NE(body.find("bad \xEF\xBF\xBD bytes"), std::string::npos) << body;
}

TEST(HttpErrorsTest, FallsBackToTheHttpStatusAndRawBody) {
  EXPECT_TRUE(StatusFromHttp(200, "").ok());
  EXPECT_TRUE(StatusFromHttp(201, R"({"error":{"code":"NotFound","message":"x"}})").ok());
  EXPECT_EQ(StatusFromHttp(404, ""), Status(StatusCode::kNotFound, "HTTP 404"));
  EXPECT_EQ(StatusFromHttp(502, "<html>Bad Gateway</html>\n"),
            Status(StatusCode::kUnavailable, "HTTP 502: <html>Bad Gateway</html>"));
  EXPECT_EQ(StatusFromHttp(401, "{}").code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(StatusFromHttp(403, "nope").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(StatusFromHttp(409, "").code(), StatusCode::kAborted);
  EXPECT_EQ(StatusFromHttp(429, "").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(StatusFromHttp(413, "").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(StatusFromHttp(500, "").code(), StatusCode::kInternal);
  EXPECT_EQ(StatusFromHttp(503, "").code(), StatusCode::kUnavailable);
  EXPECT_EQ(StatusFromHttp(302, "").code(), StatusCode::kInternal);
  // A body in our shape but with a code we do not know, or "OK", falls back.
  EXPECT_EQ(StatusFromHttp(400, R"({"error":{"code":"Weird","message":"m"}})").code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(StatusFromHttp(404, R"({"error":{"code":"OK","message":"m"}})"),
            Status(StatusCode::kNotFound, "m"));  // the message is kept
  // The body's code wins over the HTTP status; a missing message gets one.
  EXPECT_EQ(StatusFromHttp(409, R"({"error":{"code":"AlreadyExists"}})"),
            Status(StatusCode::kAlreadyExists, "HTTP 409"));
  // Long raw bodies are cut.
  Status long_body = StatusFromHttp(500, std::string(10000, 'x'));
  EXPECT_LT(long_body.message().size(), 600U);
  EXPECT_EQ(long_body.message().substr(long_body.message().size() - 3), "...");
}

}  // namespace
}  // namespace tessera
