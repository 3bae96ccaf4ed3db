#include "cli/api_client.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace tessera {
namespace {

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) {
      return std::nullopt;
    }
    return it->second;
  };
}

// A scratch directory under /tmp, removed at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/tessera_cli_XXXXXX";
    const char* made = mkdtemp(tmpl);
    EXPECT_NE(made, nullptr);
    path_ = made != nullptr ? made : "/tmp";
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string Write(const std::string& name, const std::string& text) const {
    const std::string file = path_ + "/" + name;
    std::ofstream(file) << text;
    return file;
  }

 private:
  std::string path_;
};

TEST(ResolveClientConfigTest, DefaultsWithoutFlagsOrEnvironment) {
  StatusOr<ClientConfig> config = ResolveClientConfig({}, FakeEnv({}));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server, "http://127.0.0.1:7450");
  EXPECT_EQ(config->token, "");
  EXPECT_EQ(config->ca_cert, "");
  EXPECT_FALSE(config->insecure);
}

TEST(ResolveClientConfigTest, FlagsWinOverTheEnvironment) {
  ConnectionFlags flags;
  flags.server = "https://ctl:443";
  flags.token = "from-flag";
  StatusOr<ClientConfig> config = ResolveClientConfig(
      flags, FakeEnv({{"TESSERA_SERVER", "http://env:1"}, {"TESSERA_TOKEN", "from-env"}}));
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->server, "https://ctl:443");
  EXPECT_EQ(config->token, "from-flag");

  config = ResolveClientConfig({}, FakeEnv({{"TESSERA_SERVER", "http://env:1"},
                                            {"TESSERA_TOKEN", " from-env\n"},
                                            {"TESSERA_INSECURE", "1"}}));
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->server, "http://env:1");
  EXPECT_EQ(config->token, "from-env");
  EXPECT_TRUE(config->insecure);
}

TEST(ResolveClientConfigTest, ReadsTheTokenFileWhenNoTokenIsGiven) {
  ScratchDir dir;
  const std::string file = dir.Write("token", "  s3cret-token\n");
  StatusOr<ClientConfig> config = ResolveClientConfig({}, FakeEnv({{"TESSERA_TOKEN_FILE", file}}));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->token, "s3cret-token");

  // TESSERA_TOKEN beats the file.
  config = ResolveClientConfig({}, FakeEnv({{"TESSERA_TOKEN_FILE", file}, {"TESSERA_TOKEN", "t"}}));
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->token, "t");
}

TEST(ResolveClientConfigTest, BadTokenFileOrCaCertIsInvalidArgument) {
  ScratchDir dir;
  StatusOr<ClientConfig> missing =
      ResolveClientConfig({}, FakeEnv({{"TESSERA_TOKEN_FILE", "/nonexistent/token"}}));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("/nonexistent/token"), std::string::npos);

  const std::string empty = dir.Write("empty", "\n");
  EXPECT_FALSE(ResolveClientConfig({}, FakeEnv({{"TESSERA_TOKEN_FILE", empty}})).ok());

  ConnectionFlags flags;
  flags.token = "a\r\nX-Evil: 1";
  EXPECT_EQ(ResolveClientConfig(flags, FakeEnv({})).status().code(), StatusCode::kInvalidArgument);

  ConnectionFlags ca;
  ca.ca_cert = "/nonexistent/ca.pem";
  EXPECT_EQ(ResolveClientConfig(ca, FakeEnv({})).status().code(), StatusCode::kInvalidArgument);
}

TEST(ApiClientTest, RejectsUrlsThatAreNotHttp) {
  for (const char* url : {"ftp://host:21", "http://", "http://:80", "http://host:99999",
                          "http://host:0", "http://host/x?y=1", "http://user@host"}) {
    ClientConfig config;
    config.server = url;
    StatusOr<std::unique_ptr<ApiClient>> client = ApiClient::Create(config);
    ASSERT_FALSE(client.ok()) << url;
    EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument) << url;
    EXPECT_NE(client.status().message().find("bad server URL"), std::string::npos);
  }
  for (const char* url : {"http://127.0.0.1:7450", "https://ctl.example:8443/tessera/",
                          "127.0.0.1:7450", "http://[::1]:7450"}) {
    ClientConfig config;
    config.server = url;
    EXPECT_TRUE(ApiClient::Create(config).ok()) << url;
  }
}

TEST(ApiClientTest, BareHostPortMeansHttpAndTrailingSlashesAreDropped) {
  ClientConfig config;
  config.server = "127.0.0.1:7450";
  EXPECT_EQ((*ApiClient::Create(config))->server(), "http://127.0.0.1:7450");
  config.server = "https://ctl:8443/";
  EXPECT_EQ((*ApiClient::Create(config))->server(), "https://ctl:8443");
}

TEST(StatusFromHttpErrorTest, MapsStatusesAndKeepsTheServersMessage) {
  const std::string body = R"({"error":{"code":"InvalidArgument","message":"gpus must be >= 0"}})";
  Status bad = StatusFromHttpError(400, body);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "gpus must be >= 0");  // no code for 400s

  Status missing =
      StatusFromHttpError(404, R"({"error":{"code":"NotFound","message":"job 7 not found"}})");
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), "job 7 not found (NotFound)");

  EXPECT_EQ(StatusFromHttpError(401, "{}").code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(StatusFromHttpError(403, "{}").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(StatusFromHttpError(409, "{}").code(), StatusCode::kAborted);
  EXPECT_EQ(StatusFromHttpError(429, "{}").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(StatusFromHttpError(500, "{}").code(), StatusCode::kInternal);
  EXPECT_EQ(StatusFromHttpError(503, "{}").code(), StatusCode::kUnavailable);
  EXPECT_EQ(StatusFromHttpError(422, "{}").code(), StatusCode::kInvalidArgument);

  // The server's own code wins over what the HTTP status alone would say, so that the
  // exit code is the same the server meant.
  Status busy = StatusFromHttpError(
      409, R"({"error":{"code":"FailedPrecondition","message":"node a runs jobs"}})");
  EXPECT_EQ(busy.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(busy.message(), "node a runs jobs (FailedPrecondition)");
  Status down = StatusFromHttpError(
      503, R"({"error":{"code":"Unavailable","message":"the state store failed"}})");
  EXPECT_EQ(down.code(), StatusCode::kUnavailable);
  EXPECT_EQ(ExitCodeFor(down), 5);

  // Not our error shape: a short, one-line excerpt of the body and the HTTP status.
  EXPECT_EQ(StatusFromHttpError(502, "<html>Bad\ngateway</html>").message(),
            "HTTP 502: <html>Bad gateway</html> (Unavailable)");
  EXPECT_EQ(StatusFromHttpError(500, "").message(), "HTTP 500 (Internal)");
  // Not the controller's own message: the start of the raw body (api/http_errors.cc).
  EXPECT_EQ(StatusFromHttpError(500, std::string(1000, 'x')).message(),
            "HTTP 500: " + std::string(512, 'x') + "... (Internal)");
}

// A validation error that lists many problems, or a long pending reason, is printed
// whole; only a message past 64 KiB is cut, and says so.
TEST(StatusFromHttpErrorTest, ALongMessageOfTheControllerIsKeptWhole) {
  std::string problems;
  for (int i = 0; i < 40; ++i) {
    problems += (i > 0 ? "; " : "") + std::string("tasks[") + std::to_string(i) +
                "].resources.gpus: must be between 0 and 8, got 9";
  }
  ASSERT_GT(problems.size(), 1000u);
  const std::string body = nlohmann::json{{"error", {{"code", "InvalidArgument"},
                                                     {"message", problems}}}}.dump();
  Status bad = StatusFromHttpError(400, body);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), problems);
  std::ostringstream err;
  EXPECT_EQ(ReportError(bad, err), 2);
  EXPECT_EQ(err.str(), "tessera: " + problems + "\n");

  Status pending = StatusFromHttpError(
      409, nlohmann::json{{"error", {{"code", "FailedPrecondition"}, {"message", problems}}}}.dump());
  EXPECT_EQ(pending.message(), problems + " (FailedPrecondition)");

  // Past 64 KiB: cut there, on a character boundary, with how much there was.
  std::string accented = "x";
  while (accented.size() < 70'000) {
    accented += "\xc3\xa9";  // é, two bytes: a cut at 65,536 would split one
  }
  Status cut = StatusFromHttpError(
      400, nlohmann::json{{"error", {{"code", "InvalidArgument"}, {"message", accented}}}}.dump());
  EXPECT_EQ(cut.message(), accented.substr(0, 65'535) + "... (cut: " +
                               std::to_string(accented.size()) + " bytes in all)");
}

TEST(ExitCodeTest, FollowsTheStatusCode) {
  EXPECT_EQ(ExitCodeFor(Status::Ok()), 0);
  EXPECT_EQ(ExitCodeFor(InternalError("x")), 1);
  EXPECT_EQ(ExitCodeFor(InvalidArgumentError("x")), 2);
  EXPECT_EQ(ExitCodeFor(NotFoundError("x")), 3);
  EXPECT_EQ(ExitCodeFor(UnauthenticatedError("x")), 4);
  EXPECT_EQ(ExitCodeFor(PermissionDeniedError("x")), 4);
  EXPECT_EQ(ExitCodeFor(UnavailableError("x")), 5);
  EXPECT_EQ(ExitCodeFor(AbortedError("x")), 6);
  EXPECT_EQ(ExitCodeFor(ResourceExhaustedError("x")), 6);

  std::ostringstream err;
  EXPECT_EQ(ReportError(NotFoundError("job 7 not found (NotFound)"), err), 3);
  EXPECT_EQ(err.str(), "tessera: job 7 not found (NotFound)\n");
  std::ostringstream none;
  EXPECT_EQ(ReportError(Status::Ok(), none), 0);
  EXPECT_EQ(none.str(), "");
}

TEST(PercentEncodeTest, EncodesAllButUnreserved) {
  EXPECT_EQ(PercentEncode("pending,running"), "pending%2Crunning");
  EXPECT_EQ(PercentEncode("2026-11-01T00:00:00Z"), "2026-11-01T00%3A00%3A00Z");
  EXPECT_EQ(PercentEncode("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
  EXPECT_EQ(PercentEncode("AZaz09-_.~"), "AZaz09-_.~");
}

TEST(ApiResponseTest, HeadersAreCaseInsensitive) {
  ApiResponse r;
  r.headers = {{"X-Log-Offset", "12"}, {"content-type", "text/plain"}};
  EXPECT_EQ(r.Header("x-log-offset"), "12");
  EXPECT_EQ(r.Header("Content-Type"), "text/plain");
  EXPECT_EQ(r.Header("X-Job-State"), "");
}

}  // namespace
}  // namespace tessera
