#include "cli/api_client.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "api/http_errors.h"
#include "base/strings.h"
#include "cli/client_config_file.h"

namespace tessera {
namespace {

bool HasControlCharacter(std::string_view text) {
  return std::any_of(text.begin(), text.end(),
                     [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}

}  // namespace

EnvLookup ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) {
      return std::nullopt;
    }
    return std::string(value);
  };
}

StatusOr<ClientConfig> ResolveClientConfig(const ConnectionFlags& flags, const EnvLookup& env) {
  ClientConfig config;
  auto from_env = [&](const char* name) -> std::string {
    std::optional<std::string> v = env(name);
    return v.has_value() ? std::string(Trim(*v)) : std::string();
  };
  if (!flags.server.empty()) {
    config.server = flags.server;
  } else if (std::string s = from_env("TESSERA_SERVER"); !s.empty()) {
    config.server = s;
  }
  if (!flags.token.empty()) {
    config.token = flags.token;
  } else if (std::string t = from_env("TESSERA_TOKEN"); !t.empty()) {
    config.token = t;
  } else if (std::string file = from_env("TESSERA_TOKEN_FILE"); !file.empty()) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      return InvalidArgumentError("cannot read the token file '" + file +
                                  "' named by TESSERA_TOKEN_FILE");
    }
    std::ostringstream text;
    text << in.rdbuf();
    config.token = std::string(Trim(text.str()));
    if (config.token.empty()) {
      return InvalidArgumentError("the token file '" + file + "' is empty");
    }
  }
  // Then what `tessera login` saved; its token only for the server it was saved with.
  if (const std::string path = ClientConfigPath(env); !path.empty()) {
    TESSERA_ASSIGN_OR_RETURN(std::optional<SavedLogin> saved, ReadSavedLogin(path));
    if (saved.has_value()) {
      const bool server_given = config.server != kDefaultServer ||
                                !flags.server.empty() || !from_env("TESSERA_SERVER").empty();
      if (!server_given && !saved->server.empty()) {
        config.server = saved->server;
      }
      if (config.token.empty() && (saved->server.empty() || saved->server == config.server)) {
        config.token = saved->token;
      }
    }
  }
  if (HasControlCharacter(config.token)) {
    return InvalidArgumentError("the token holds control characters");
  }
  config.ca_cert = !flags.ca_cert.empty() ? flags.ca_cert : from_env("TESSERA_CA_CERT");
  if (!config.ca_cert.empty() && !std::ifstream(config.ca_cert)) {
    return InvalidArgumentError("cannot read the CA certificate file '" + config.ca_cert + "'");
  }
  const std::string insecure = AsciiLower(from_env("TESSERA_INSECURE"));
  config.insecure = flags.insecure || insecure == "1" || insecure == "true" || insecure == "yes";
  if (const std::string timeout = from_env("TESSERA_FAILOVER_TIMEOUT"); !timeout.empty()) {
    constexpr int64_t kMaxFailoverSeconds = 86400;
    StatusOr<int64_t> seconds = ParseInt64(timeout);
    if (!seconds.ok() || *seconds < 0 || *seconds > kMaxFailoverSeconds) {
      return InvalidArgumentError(
          "TESSERA_FAILOVER_TIMEOUT must be a whole number of seconds from 0 to 86400, got '" +
          timeout + "'");
    }
    config.failover_budget_ms = static_cast<int>(*seconds * 1000);
  }
  return config;
}

std::string ApiResponse::Header(std::string_view name) const {
  const std::string want = AsciiLower(name);
  for (const auto& [key, value] : headers) {
    if (AsciiLower(key) == want) {
      return value;
    }
  }
  return "";
}

// One controller address: its URL (for messages), path prefix and connection.
struct ApiClient::Endpoint {
  std::string url;
  std::string prefix;
  std::unique_ptr<HttpTransport> transport;
};

namespace {

StatusOr<std::unique_ptr<ApiClient::Endpoint>> ParseEndpoint(std::string_view given,
                                                             const ClientConfig& config,
                                                             int io_timeout_ms) {
  std::string url(Trim(given));
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError("bad server URL '" + url + "': " + std::string(why));
  };
  std::string scheme = "http";
  std::string rest = url;
  if (size_t colon = url.find("://"); colon != std::string::npos) {
    scheme = AsciiLower(url.substr(0, colon));
    rest = url.substr(colon + 3);
  } else {
    url = "http://" + url;
  }
  if (scheme != "http" && scheme != "https") {
    return bad("expected http:// or https://");
  }
  if (rest.find_first_of("?#@ ") != std::string::npos || HasControlCharacter(rest)) {
    return bad("expected scheme://host[:port][/prefix]");
  }
  std::string host_port = rest;
  std::string prefix;
  if (size_t slash = rest.find('/'); slash != std::string::npos) {
    host_port = rest.substr(0, slash);
    prefix = rest.substr(slash);
    while (!prefix.empty() && prefix.back() == '/') {
      prefix.pop_back();
    }
  }
  if (host_port.empty() || host_port.front() == ':') {
    return bad("no host");
  }
  if (size_t colon = host_port.rfind(':');
      colon != std::string::npos && host_port.find(']', colon) == std::string::npos) {
    StatusOr<int64_t> port = ParseInt64(host_port.substr(colon + 1));
    if (!port.ok() || *port < 1 || *port > 65535) {
      return bad("the port must be 1..65535");
    }
  }
  HttpTarget target;
  target.tls = scheme == "https";
  target.port = target.tls ? 443 : 80;
  target.host = host_port;
  if (size_t colon = host_port.rfind(':');
      colon != std::string::npos && host_port.find(']', colon) == std::string::npos) {
    target.host = host_port.substr(0, colon);
    target.port = static_cast<int>(*ParseInt64(host_port.substr(colon + 1)));
  }
  if (target.host.empty() || (target.host.front() == '[') != (target.host.back() == ']')) {
    return bad("no host");
  }
  target.ca_cert = config.ca_cert;
  target.insecure = config.insecure;
  target.connect_timeout_ms = config.connect_timeout_ms;
  target.io_timeout_ms = io_timeout_ms;
  while (!url.empty() && url.back() == '/') {
    url.pop_back();
  }
  auto endpoint = std::make_unique<ApiClient::Endpoint>();
  endpoint->url = std::move(url);
  endpoint->prefix = std::move(prefix);
  endpoint->transport = std::make_unique<HttpTransport>(std::move(target));
  return endpoint;
}

// What a follower's 503 or a leader's said, for the message naming every address.
std::string Unanswered(const HttpAnswer& answer) {
  return StatusFromHttpError(answer.status, answer.body).message();
}

// The leader a follower's 307 names; "" when it names none.
std::string LeaderOf(const HttpAnswer& answer) {
  if (answer.status != 307) {
    return "";
  }
  for (const auto& [key, value] : answer.headers) {
    if (AsciiLower(key) == "x-tessera-leader") {
      return std::string(Trim(value));
    }
  }
  return "";
}

// The addresses in "URL,URL,..." (empty items, as from a trailing comma, left out).
std::vector<std::string> ListedUrls(std::string_view servers) {
  std::vector<std::string> out;
  for (std::string_view item : Split(servers, ',')) {
    if (!Trim(item).empty()) {
      out.emplace_back(Trim(item));
    }
  }
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<ApiClient>> ApiClient::Create(const ClientConfig& config) {
  std::unique_ptr<ApiClient> client(new ApiClient(config, config.token));
  std::vector<std::string> urls = ListedUrls(config.server);
  if (urls.empty()) {
    return InvalidArgumentError("bad server URL '" + config.server + "': no host");
  }
  for (const std::string& url : urls) {
    TESSERA_RETURN_IF_ERROR(client->EndpointFor(url).status());
  }
  return client;
}

ApiClient::ApiClient(ClientConfig config, std::string token)
    : config_(std::move(config)), token_(std::move(token)) {}

ApiClient::~ApiClient() = default;

const std::string& ApiClient::server() const { return endpoints_[current_]->url; }

StatusOr<size_t> ApiClient::EndpointFor(const std::string& url) {
  // With several addresses a stopped controller must not hold a request for a minute.
  const bool several = !endpoints_.empty() || ListedUrls(config_.server).size() > 1;
  const int io_timeout = several
                             ? std::min(config_.read_timeout_ms, config_.failover_read_timeout_ms)
                             : config_.read_timeout_ms;
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<Endpoint> endpoint,
                           ParseEndpoint(url, config_, io_timeout));
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    if (endpoints_[i]->url == endpoint->url && endpoints_[i]->prefix == endpoint->prefix) {
      return i;
    }
  }
  endpoints_.push_back(std::move(endpoint));
  return endpoints_.size() - 1;
}

// One request on its way round the controllers: what to send, and what each address
// said last (for the message when none answers).
struct ApiClient::Attempt {
  std::string_view method;
  const std::string& path;
  const HttpHeaders& headers;
  const std::string& body;
  bool resendable = false;            // may go elsewhere after it may have been taken
  std::vector<std::string> problems;  // by endpoint
  std::vector<bool> tried;            // by endpoint, in this round
  std::optional<size_t> silent;       // the first endpoint in the round that gave no answer

  // Keeps the vectors as long as the endpoints (a redirect may add one).
  void Fit(size_t endpoints) {
    problems.resize(endpoints);
    tried.resize(endpoints, false);
  }
};

Micros ApiClient::NowMicros() const {
  if (config_.failover_clock != nullptr) {
    return config_.failover_clock->NowMicros();
  }
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void ApiClient::Pause(Micros duration) const {
  if (config_.failover_sleep) {
    config_.failover_sleep(duration);
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(duration));
  }
}

void ApiClient::Progress(const std::string& line) const {
  if (config_.failover_progress) {
    config_.failover_progress(line);
  } else {
    std::cerr << "tessera: " << line << std::endl;
  }
}

StatusOr<ApiResponse> ApiClient::Send(std::string_view method, const std::string& path,
                                      HttpHeaders headers, const std::string& body) {
  headers.emplace_back("Accept", "application/json");
  if (!token_.empty()) {
    headers.emplace_back("Authorization", "Bearer " + token_);
  }
  // Sent again after no answer only where that cannot do it twice.
  const bool resendable =
      method != "POST" || std::any_of(headers.begin(), headers.end(), [](const auto& h) {
        return AsciiLower(h.first) == "idempotency-key";
      });
  Attempt attempt{method, path, headers, body, resendable, {}, {}, std::nullopt};
  const Micros deadline = NowMicros() + Micros{config_.failover_budget_ms} * 1000;
  auto no_answer = [&] {
    std::string message = "no controller answered:";
    for (size_t i = 0; i < endpoints_.size(); ++i) {
      message += (i == 0 ? " " : "; ") + endpoints_[i]->url + ": " +
                 (attempt.problems[i].empty() ? "not tried" : attempt.problems[i]);
    }
    return UnavailableError(message);
  };
  Micros pause = Micros{kFirstPauseMs} * 1000;
  bool told = false;
  for (bool later_round = false;; later_round = true) {
    // A round: every address once, from the one that answered last, in order.
    attempt.tried.assign(endpoints_.size(), false);
    attempt.Fit(endpoints_.size());
    attempt.silent.reset();
    size_t at = current_;
    while (true) {
      if (std::optional<StatusOr<ApiResponse>> done = TryFrom(at, attempt); done.has_value()) {
        return std::move(done).value();
      }
      std::optional<size_t> next = NextUntried(at, attempt);
      if (!next.has_value()) {
        break;
      }
      // The first round tries every address; later ones stop at the bound.
      if (later_round && NowMicros() >= deadline) {
        return no_answer();
      }
      at = *next;
    }
    const Micros now = NowMicros();
    if (now >= deadline) {
      return no_answer();
    }
    if (!told) {
      const size_t silent = attempt.silent.value_or(at);
      const std::string& why = attempt.problems[silent];
      Progress("controller at " + endpoints_[silent]->url + " not answering (" +
               (why.empty() ? "no answer" : why) + "); retrying for up to " +
               std::to_string((deadline - now + 999'999) / 1'000'000) + " s");
      told = true;
    }
    Pause(std::min(pause, deadline - now));
    pause = std::min(pause * 2, Micros{kMaxPauseMs} * 1000);
  }
}

std::optional<size_t> ApiClient::NextUntried(size_t base, const Attempt& attempt) const {
  for (size_t step = 1; step <= endpoints_.size(); ++step) {
    const size_t i = (base + step) % endpoints_.size();
    if (!attempt.tried[i]) {
      return i;
    }
  }
  return std::nullopt;
}

std::optional<StatusOr<ApiResponse>> ApiClient::TryFrom(size_t at, Attempt& attempt) {
  int hops = 0;  // redirects in a row: a loop of followers ends
  while (true) {
    Endpoint& e = *endpoints_[at];
    attempt.tried[at] = true;
    bool maybe_taken = false;
    StatusOr<HttpAnswer> answer = e.transport->Send(attempt.method, e.prefix + attempt.path,
                                                    attempt.headers, attempt.body, &maybe_taken);
    if (const std::string leader = answer.ok() ? LeaderOf(*answer) : ""; !leader.empty()) {
      // A follower, which did not carry it out: the same request to the leader it names,
      // unless that failed in this round (it is asked again in the next).
      StatusOr<size_t> next = EndpointFor(leader);
      attempt.Fit(endpoints_.size());
      attempt.problems[at] = "redirects to " + leader;
      if (next.ok() && hops < kMaxRedirects && !attempt.tried[*next]) {
        ++hops;
        at = *next;
        continue;
      }
      if (endpoints_.size() == 1) {
        return Answered(at, std::move(answer).value());
      }
      return std::nullopt;
    }
    if (endpoints_.size() == 1) {
      // One address: what it said, as it said it.
      if (!answer.ok()) {
        return UnavailableError("cannot reach the controller at " + e.url + ": " +
                                answer.status().message());
      }
      return Answered(at, std::move(answer).value());
    }
    if (answer.ok() && answer->status != 503) {
      return Answered(at, std::move(answer).value());
    }
    // A leader's own 503 (a write its store could not settle) may have been carried out;
    // a follower's "no leader" and a fenced leader's refusal say that nothing was.
    if (answer.ok() && !attempt.resendable &&
        answer->body.find("no leader:") == std::string::npos &&
        answer->body.find("fenced:") == std::string::npos) {
      return Answered(at, std::move(answer).value());
    }
    if (!answer.ok() && maybe_taken && !attempt.resendable) {
      return UnavailableError("cannot reach the controller at " + e.url + ": " +
                              answer.status().message() +
                              "; not sent to another controller: it may have been carried out");
    }
    attempt.problems[at] = answer.ok() ? Unanswered(*answer) : answer.status().message();
    if (!attempt.silent.has_value()) {
      attempt.silent = at;
    }
    return std::nullopt;
  }
}

StatusOr<ApiResponse> ApiClient::Answered(size_t at, HttpAnswer answer) {
  current_ = at;
  ApiResponse response;
  response.status = answer.status;
  response.body = std::move(answer.body);
  response.headers = std::move(answer.headers);
  if (response.status < 200 || response.status > 299) {
    Status status = StatusFromHttpError(response.status, response.body);
    if (response.status == 401 && token_.empty()) {
      return Status(status.code(), status.message() +
                                       "; no token was given (--token, TESSERA_TOKEN, "
                                       "TESSERA_TOKEN_FILE or tessera login)");
    }
    return status;
  }
  return response;
}

StatusOr<ApiResponse> ApiClient::Get(std::string_view path, const QueryParams& query) {
  std::string full(path);
  char sep = '?';
  for (const auto& [key, value] : query) {
    full += sep;
    full += PercentEncode(key) + "=" + PercentEncode(value);
    sep = '&';
  }
  return Send("GET", full, {}, "");
}

StatusOr<ApiResponse> ApiClient::Post(std::string_view path, const std::string& body,
                                      const std::string& content_type,
                                      const ExtraHeaders& headers) {
  HttpHeaders h{{"Content-Type", content_type}};
  for (const auto& [key, value] : headers) {
    if (key.empty() || HasControlCharacter(key) || HasControlCharacter(value) ||
        key.find(':') != std::string::npos) {
      return InvalidArgumentError("header '" + key + "' holds control characters");
    }
    h.emplace_back(key, value);
  }
  return Send("POST", std::string(path), std::move(h), body);
}

StatusOr<ApiResponse> ApiClient::Put(std::string_view path, const std::string& body,
                                     const std::string& content_type) {
  return Send("PUT", std::string(path), {{"Content-Type", content_type}}, body);
}

StatusOr<ApiResponse> ApiClient::Delete(std::string_view path) {
  return Send("DELETE", std::string(path), {}, "");
}

StatusOr<nlohmann::json> ApiClient::GetJson(std::string_view path, const QueryParams& query) {
  TESSERA_ASSIGN_OR_RETURN(ApiResponse response, Get(path, query));
  return ParseJsonBody(response.body, "GET " + std::string(path));
}

StatusOr<SubmittedBatch> SubmitJobBatch(ApiClient& client, const std::string& body,
                                        const std::string& content_type,
                                        const std::string& idempotency_key) {
  ExtraHeaders headers;
  if (!idempotency_key.empty()) {
    headers.emplace_back("Idempotency-Key", idempotency_key);
  }
  TESSERA_ASSIGN_OR_RETURN(ApiResponse response,
                           client.Post("/v1/jobs/batch", body, content_type, headers));
  TESSERA_ASSIGN_OR_RETURN(nlohmann::json answer,
                           ParseJsonBody(response.body, "POST /v1/jobs/batch"));
  SubmittedBatch out;
  out.created = response.status != 200;
  const nlohmann::json* ids =
      answer.is_object() && answer.contains("ids") ? &answer["ids"] : nullptr;
  if (ids == nullptr || !ids->is_array()) {
    return InternalError("the controller's answer to POST /v1/jobs/batch has no job ids");
  }
  for (const nlohmann::json& id : *ids) {
    if (!id.is_number_integer()) {
      return InternalError("the controller's answer to POST /v1/jobs/batch has a bad job id");
    }
    out.ids.push_back(id.get<int64_t>());
  }
  return out;
}

StatusOr<nlohmann::json> ParseJsonBody(const std::string& body, std::string_view what) {
  nlohmann::json parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return InternalError("the controller's answer to " + std::string(what) + " is not JSON");
  }
  return parsed;
}

Status StatusFromHttpError(int http_status, const std::string& body) {
  // One mapping for the server and the CLI (api/http_errors.h): the controller's own
  // code and message, or what the HTTP status stands for when the body is not its own.
  const Status status = StatusFromHttp(http_status, body);
  if (status.ok()) {
    return InternalError("the controller answered HTTP " + std::to_string(http_status) +
                         " where an error was expected");
  }
  // One line. Kept whole: a validation error may list many problems and a pending
  // reason may be long (a proxy's page is already cut short by StatusFromHttp); only a
  // runaway message is cut, on a UTF-8 character boundary, and says so.
  constexpr size_t kMaxMessage = 64 << 10;
  std::string message = status.message();
  std::replace_if(
      message.begin(), message.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  if (message.size() > kMaxMessage) {
    size_t cut = kMaxMessage;
    while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) {
      --cut;
    }
    const size_t whole = message.size();
    message.resize(cut);
    message += "... (cut: " + std::to_string(whole) + " bytes in all)";
  }
  if (http_status != 400) {
    message += " (" + std::string(StatusCodeName(status.code())) + ")";
  }
  return Status(status.code(), std::move(message));
}

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return 0;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return 2;
    case StatusCode::kNotFound:
      return 3;
    case StatusCode::kUnauthenticated:
    case StatusCode::kPermissionDenied:
      return 4;
    case StatusCode::kUnavailable:
      return 5;
    case StatusCode::kAborted:
    case StatusCode::kAlreadyExists:
    case StatusCode::kResourceExhausted:
    case StatusCode::kFailedPrecondition:
      return 6;
    default:
      return 1;
  }
}

int ReportError(const Status& status, std::ostream& err) {
  if (status.ok()) {
    return 0;
  }
  err << "tessera: " << status.message() << "\n";
  return ExitCodeFor(status);
}

std::string PercentEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

std::string NewIdempotencyKey() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device rd;
  std::string key = "cli-";
  for (int i = 0; i < 4; ++i) {
    uint32_t word = rd();
    for (int j = 0; j < 8; ++j, word >>= 4) {
      key += kHex[word & 0xF];
    }
  }
  return key;
}

}  // namespace tessera
