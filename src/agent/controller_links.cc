#include "agent/controller_links.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "api/http_errors.h"
#include "base/strings.h"

namespace tessera {

std::string LocalAddressToward(const std::string& url) {
  const std::string fallback = "127.0.0.1";
  std::string rest = url.substr(url.find("://") == std::string::npos ? 0 : url.find("://") + 3);
  std::string host;
  std::string port = "443";
  if (!rest.empty() && rest[0] == '[') {
    host = rest.substr(1, rest.find(']') - 1);
    rest = rest.substr(std::min(rest.size(), rest.find(']') + 1));
  } else {
    host = rest.substr(0, rest.find_first_of(":/"));
    rest = rest.substr(host.size());
  }
  if (!rest.empty() && rest[0] == ':') {
    port = rest.substr(1, rest.find('/') == std::string::npos ? std::string::npos : rest.find('/') - 1);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (host.empty() || ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) {
    return fallback;
  }
  std::string out = fallback;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      continue;
    }
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    char text[INET6_ADDRSTRLEN] = {};
    const bool ok = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
                    ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
    ::close(fd);
    const void* where = local.ss_family == AF_INET6
                            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
                            : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
    if (ok && ::inet_ntop(local.ss_family, where, text, sizeof(text)) != nullptr) {
      out = text;
      break;
    }
  }
  ::freeaddrinfo(found);
  return out;
}
namespace {

std::string Normalized(std::string_view url) {
  std::string out(Trim(url));
  while (!out.empty() && out.back() == '/') {
    out.pop_back();
  }
  return out;
}

// A follower that knows no leader says so in its 503 ("no leader: ...").
bool FromALeaderlessFollower(const std::string& body) {
  const Status s = StatusFromHttp(503, body);
  return StartsWith(s.message(), "no leader");
}

void SetTimeouts(httplib::Client& c, const ControllerLinksOptions& o) {
  c.set_connection_timeout(o.connect_timeout / 1'000'000, o.connect_timeout % 1'000'000);
  c.set_read_timeout(o.answer_timeout / 1'000'000, o.answer_timeout % 1'000'000);
  c.set_write_timeout(o.answer_timeout / 1'000'000, o.answer_timeout % 1'000'000);
}

}  // namespace

StatusOr<std::unique_ptr<ControllerLinks>> ControllerLinks::Create(const std::string& urls,
                                                                   ControllerLinksOptions options) {
  std::vector<std::string> listed;
  for (std::string_view item : Split(urls, ',')) {
    std::string url = Normalized(item);
    if (!url.empty() && std::find(listed.begin(), listed.end(), url) == listed.end()) {
      listed.push_back(std::move(url));
    }
  }
  if (listed.empty()) {
    return InvalidArgumentError("no controller URL given");
  }
  std::unique_ptr<ControllerLinks> links(new ControllerLinks(listed, std::move(options)));
  for (const std::string& url : listed) {
    if (links->ClientFor(url) == nullptr) {
      return InvalidArgumentError("cannot use controller URL '" + url + "'");
    }
  }
  return links;
}

ControllerLinks::ControllerLinks(std::vector<std::string> listed, ControllerLinksOptions options)
    : listed_(std::move(listed)), options_(std::move(options)), current_(listed_.front()) {}

ControllerLinks::~ControllerLinks() = default;

httplib::Client* ControllerLinks::ClientFor(const std::string& url) {
  auto it = clients_.find(url);
  if (it != clients_.end()) {
    return it->second.get();
  }
  auto client = std::make_unique<httplib::Client>(url);
  if (!client->is_valid()) {
    return nullptr;
  }
  SetTimeouts(*client, options_);
  client->set_keep_alive(true);
  client->set_tcp_nodelay(true);
  if (!options_.ca_cert.empty()) {
    client->set_ca_cert_path(options_.ca_cert.c_str());
  }
  if (options_.insecure) {
    client->enable_server_certificate_verification(false);
  }
  if (!bearer_.empty()) {
    client->set_bearer_token_auth(bearer_);
  }
  return clients_.emplace(url, std::move(client)).first->second.get();
}

void ControllerLinks::SetBearer(const std::string& bearer) {
  bearer_ = bearer;
  for (auto& [url, client] : clients_) {
    client->set_bearer_token_auth(bearer_);
  }
}

void ControllerLinks::SetAnswerTimeout(Micros timeout) {
  if (timeout == options_.answer_timeout) {
    return;
  }
  options_.answer_timeout = timeout;
  for (auto& [url, client] : clients_) {
    SetTimeouts(*client, options_);
  }
}

void ControllerLinks::Advance() {
  listed_at_ = (listed_at_ + 1) % listed_.size();
  current_ = listed_[listed_at_];
}

StatusOr<ControllerLinks::Answer> ControllerLinks::Post(const std::string& path,
                                                        const std::string& body) {
  // The current controller, then every listed one after the last listed one used.
  std::vector<std::string> order{current_};
  for (size_t step = 0; step < listed_.size(); ++step) {
    const std::string& url = listed_[(listed_at_ + step) % listed_.size()];
    if (url != current_) {
      order.push_back(url);
    }
  }
  std::vector<std::string> problems;
  std::optional<Answer> store_failed;  // a leader's 503
  bool unreachable = true;             // no controller answered at all
  std::set<std::string> failed;        // no answer from these
  int hops = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    std::string url = order[i];
    if (failed.count(url) > 0) {
      continue;  // already asked as a follower's leader
    }
    while (true) {
      httplib::Client* client = ClientFor(url);
      if (client == nullptr) {
        problems.push_back(url + ": not a usable URL");
        break;
      }
      httplib::Result r = client->Post(path, body, "application/json");
      if (!r) {
        problems.push_back(url + ": " + httplib::to_string(r.error()));
        failed.insert(url);
        break;
      }
      const std::string leader = Normalized(r->get_header_value("X-Tessera-Leader"));
      if (r->status == 307 && !leader.empty()) {
        // A follower, which took nothing: the leader it names, unless that failed already.
        if (hops < kMaxRedirects && failed.count(leader) == 0) {
          ++hops;
          url = leader;
          continue;
        }
        problems.push_back(url + ": redirects to " + leader);
        break;
      }
      if (r->status == 503) {
        unreachable = false;
        failed.insert(url);
        problems.push_back(url + ": " + StatusFromHttp(503, r->body).message());
        if (!FromALeaderlessFollower(r->body)) {
          store_failed = Answer{r->status, r->body};
        }
        break;
      }
      current_ = url;
      if (auto at = std::find(listed_.begin(), listed_.end(), url); at != listed_.end()) {
        listed_at_ = static_cast<size_t>(at - listed_.begin());
      }
      return Answer{r->status, std::move(r->body)};
    }
  }
  if (store_failed.has_value()) {
    return *store_failed;
  }
  if (listed_.size() == 1 && problems.size() == 1 && unreachable) {
    return UnavailableError("cannot reach the controller at " + problems.front());
  }
  return UnavailableError("no controller answered: " + Join(problems, "; "));
}

}  // namespace tessera
