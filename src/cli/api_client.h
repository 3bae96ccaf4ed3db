// ApiClient: the command line's HTTP/JSON client for the controller's API.
//
// Every request carries `Authorization: Bearer <token>` when a token is configured.
// Answers outside 2xx become a Status with the code the server's error body names
// (`{"error":{"code","message"}}`), or, for a body not its own (a proxy's page), the
// code the HTTP status stands for (api/http_errors.h: one mapping for both sides). The
// CLI's exit code follows from it (ExitCodeFor):
//   InvalidArgument, OutOfRange (400, most 4xx)                        exit 2
//   NotFound (404)                                                     exit 3
//   Unauthenticated (401), PermissionDenied (403)                      exit 4
//   Unavailable (503, 502, 504; and no answer: connect, TLS, read)     exit 5
//   Aborted, AlreadyExists, FailedPrecondition (409), ResourceExhausted (429)  exit 6
//   anything else (Internal, 500)                                      exit 1
// The message is the server's message (or "HTTP <status>: <start of the body>"), on one
// line; for statuses other than 400 it ends in " (<code>)". A transport failure reads
// "cannot reach the controller at <URL>: <why>".
// https:// URLs use TLS, verified against the system's CAs or `ca_cert`, unless
// `insecure`. A URL may carry a path prefix (https://host/tessera) that is put before
// every request path.
//
// Several controllers (`server` = "URL,URL,..."; high availability): a request goes to
// the address that answered last (at first, the first one). A follower's 307 with
// `X-Tessera-Leader` sends it to that leader (at most kMaxRedirects hops; a leader not
// in the list joins it). With several addresses (listed or learned), a connection
// failure, a timeout, a 503 or a redirect to a leader that does not answer (a dead
// leader, which its followers name until its lease ends) sends it to the next address.
// When every address has been tried (a round; a redirect is not followed to an address
// that failed in the same round) it goes round again after a pause (kFirstPauseMs,
// doubling up to kMaxPauseMs), round after round, until a controller answers or
// `failover_budget_ms` (60 s; TESSERA_FAILOVER_TIMEOUT) has passed since the request
// began; after that no further address is tried (the try under way, with the redirects
// it follows, may run past it by its own timeouts). Then the error names each address
// and what it said last ("no controller answered: URL: why; ...", Unavailable). Before
// its first pause a request reports once, on stderr (or `failover_progress`):
// "controller at URL not answering (why); retrying for up to N s". A request that may
// have reached a controller that then did not answer is sent elsewhere only when that
// cannot carry it out twice: GET, PUT, DELETE, and a POST with an Idempotency-Key; every
// request may be sent again after a refused connection, a redirect or a "no leader"
// 503, which carried nothing out. With several addresses each wait on a socket is
// bounded by `failover_read_timeout_ms` (a stopped controller accepts connections and
// answers nothing). With one address and no leader learned, failures are reported at
// once, as they were before.
// Thread safety: an ApiClient is used by one thread at a time; configs are values.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "cli/http_transport.h"

namespace tessera {

inline constexpr const char* kDefaultServer = "http://127.0.0.1:7450";
// The help of every command's --server flag.
inline constexpr const char* kServerFlagHelp =
    "controller URL, http:// or https://; several (the controllers of one cluster) joined "
    "by ',' are tried in turn and the leader is followed (env TESSERA_SERVER; default "
    "http://127.0.0.1:7450)";

// What the user gave on the command line; empty means "not given".
struct ConnectionFlags {
  std::string server;     // --server
  std::string token;      // --token
  std::string ca_cert;    // --ca-cert
  bool insecure = false;  // --insecure
};

struct ClientConfig {
  // scheme://host[:port][/prefix], or several of them joined by ',' (the controllers
  // of one cluster, in the order to try them).
  std::string server = kDefaultServer;
  std::string token;      // empty: no Authorization header
  std::string ca_cert;    // PEM file of CAs to trust; empty: the system's
  bool insecure = false;  // skip TLS certificate verification
  int connect_timeout_ms = 5000;
  int read_timeout_ms = 60000;
  // Several addresses: the time a request may spend going round them before it fails
  // (TESSERA_FAILOVER_TIMEOUT, in seconds), and the most each wait on a socket may take
  // (read_timeout_ms when that is less).
  int failover_budget_ms = 60000;
  int failover_read_timeout_ms = 10000;
  // What the failover waits with (tests: a ManualClock and a sleep that advances it).
  // Null or empty: the steady clock, std::this_thread::sleep_for, a line on stderr
  // ("tessera: <line>").
  const Clock* failover_clock = nullptr;
  std::function<void(Micros)> failover_sleep;
  std::function<void(const std::string& line)> failover_progress;
};

// Looks up an environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
// The process environment (getenv).
EnvLookup ProcessEnvironment();

// Flags first, then TESSERA_SERVER, TESSERA_TOKEN, TESSERA_TOKEN_FILE (a file holding
// the token; surrounding whitespace is dropped), TESSERA_CA_CERT, TESSERA_INSECURE=1,
// TESSERA_FAILOVER_TIMEOUT (whole seconds, 0..86400),
// then the login `tessera login` saved (cli/client_config_file.h: its server when none
// was given, its token when none was given and the server is the one it was saved for).
// InvalidArgument when the token file cannot be read or is empty, the saved login
// is not readable JSON, or TESSERA_FAILOVER_TIMEOUT is not a number of seconds.
StatusOr<ClientConfig> ResolveClientConfig(const ConnectionFlags& flags, const EnvLookup& env);

struct ApiResponse {
  int status = 0;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;

  // The first value of header `name` (case-insensitive); "" when absent.
  std::string Header(std::string_view name) const;
};

using QueryParams = std::vector<std::pair<std::string, std::string>>;
using ExtraHeaders = std::vector<std::pair<std::string, std::string>>;

class ApiClient {
 public:
  static constexpr int kMaxRedirects = 3;
  static constexpr int kFirstPauseMs = 250;
  static constexpr int kMaxPauseMs = 2000;

  // InvalidArgument when `config.server` is not an http(s) URL (or a list of them).
  static StatusOr<std::unique_ptr<ApiClient>> Create(const ClientConfig& config);
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  // `path` starts with '/'; `query` values are percent-encoded here.
  StatusOr<ApiResponse> Get(std::string_view path, const QueryParams& query = {});
  StatusOr<ApiResponse> Post(std::string_view path, const std::string& body,
                             const std::string& content_type, const ExtraHeaders& headers = {});
  StatusOr<ApiResponse> Put(std::string_view path, const std::string& body,
                            const std::string& content_type);
  StatusOr<ApiResponse> Delete(std::string_view path);

  // A 2xx answer's body as JSON; Internal when it is not JSON.
  StatusOr<nlohmann::json> GetJson(std::string_view path, const QueryParams& query = {});

  // The URL of the controller that answered last (at first, the first one given), for
  // messages.
  const std::string& server() const;

  struct Endpoint;

 private:
  ApiClient(ClientConfig config, std::string token);
  // The endpoint for `url`, added when it is new (a leader named by a redirect).
  StatusOr<size_t> EndpointFor(const std::string& url);
  StatusOr<ApiResponse> Send(std::string_view method, const std::string& path, HttpHeaders headers,
                             const std::string& body);
  struct Attempt;
  // Sends `attempt` to endpoint `at`, following redirects: the final result, or nullopt
  // when it should go on to the next address (what went wrong is in `attempt`).
  std::optional<StatusOr<ApiResponse>> TryFrom(size_t at, Attempt& attempt);
  // The next endpoint after `base`, in order, not yet tried in this round.
  std::optional<size_t> NextUntried(size_t base, const Attempt& attempt) const;
  Micros NowMicros() const;
  void Pause(Micros duration) const;
  void Progress(const std::string& line) const;
  StatusOr<ApiResponse> Answered(size_t at, HttpAnswer answer);

  ClientConfig config_;
  std::string token_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  size_t current_ = 0;  // the endpoint that answered last
};

// A fresh random Idempotency-Key (32 hex digits after "cli-"), for a submission that
// must not make a second job when it is sent again after an unanswered attempt.
std::string NewIdempotencyKey();

// What POST /v1/jobs/batch answered: the ids of the batch's jobs in order; `created`
// false when the controller already had the batch (a retry under its Idempotency-Key).
struct SubmittedBatch {
  std::vector<int64_t> ids;
  bool created = true;
};
// Posts a batch document (api/job_batch.h: {"jobs": [...]} or YAML `jobs:`), with
// `idempotency_key` unless it is empty.
StatusOr<SubmittedBatch> SubmitJobBatch(ApiClient& client, const std::string& body,
                                        const std::string& content_type,
                                        const std::string& idempotency_key);

// A 2xx body as JSON; Internal naming `what` when it is not JSON.
StatusOr<nlohmann::json> ParseJsonBody(const std::string& body, std::string_view what);

// The Status for a non-2xx answer (see the table at the top).
Status StatusFromHttpError(int http_status, const std::string& body);

// The CLI's exit code for `status`: 0 ok, 1 internal/server, 2 bad input, 3 not found,
// 4 not authenticated/allowed, 5 unreachable, 6 conflict or rate limited.
int ExitCodeFor(const Status& status);

// Writes "tessera: <message>\n" to `err` and returns ExitCodeFor(status).
int ReportError(const Status& status, std::ostream& err);

// "a b" -> "a%20b": everything but unreserved characters (RFC 3986) is encoded.
std::string PercentEncode(std::string_view text);

}  // namespace tessera
