// ControllerLinks: the agent's HTTP requests (register, heartbeat) to its controllers,
// given as one URL or several joined by ',' (the controllers of a highly available
// cluster, in the order to try them).
//
// A request goes first to the current controller: the one that answered last (at first,
// the first listed). A follower's 307 with X-Tessera-Leader sends it on to that leader
// (at most kMaxRedirects hops, and not to one that failed already), which becomes
// current. A connection failure, no answer within the answer timeout (a stopped
// controller keeps connections open and answers nothing) or a 503 sends it to the next
// listed address; each address is tried at most once per request, so one request's
// failures cost at most (addresses + redirects) x answer timeout, and the agent's loop,
// with its backoff, makes the next attempt. Register and heartbeat may be sent again:
// the controller takes an agent's reports once.
//
// When no controller answers: the 503 of a controller that leads but could not take the
// request (its store failed; Answer.status 503), else Unavailable naming each address
// and what went wrong. A follower's 503 ("no leader: ...") is not a controller's answer:
// no one took the reports.
// Thread safety: one thread at a time (the agent's loop).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"

namespace httplib {
class Client;
}

namespace tessera {

struct ControllerLinksOptions {
  std::string ca_cert;    // for https:// controllers; "": the system's CAs
  bool insecure = false;  // skip certificate verification
  Micros connect_timeout = 2'000'000;
  Micros answer_timeout = 10'000'000;  // each wait for a socket: a stopped controller's bound
};

// The address this machine reaches `url`'s host from (a UDP socket's connect picks the
// route; nothing is sent), as the controller sees the agent's registration come from:
// where tasks' terminals listen. "127.0.0.1" when it cannot be told.
std::string LocalAddressToward(const std::string& url);

class ControllerLinks {
 public:
  static constexpr int kMaxRedirects = 3;

  // InvalidArgument when the list is empty or a URL is not one the HTTP client can use.
  static StatusOr<std::unique_ptr<ControllerLinks>> Create(const std::string& urls,
                                                           ControllerLinksOptions options);
  ~ControllerLinks();
  ControllerLinks(const ControllerLinks&) = delete;
  ControllerLinks& operator=(const ControllerLinks&) = delete;

  struct Answer {
    int status = 0;
    std::string body;
  };
  // POSTs a JSON `body` (see the top for where it goes and what comes back).
  StatusOr<Answer> Post(const std::string& path, const std::string& body);

  void SetBearer(const std::string& bearer);
  void SetAnswerTimeout(Micros timeout);

  // The controller that answered last, or the one to try first: the agent channel's host.
  const std::string& current() const { return current_; }
  // The next listed address becomes current (the current one stopped answering).
  void Advance();
  size_t listed() const { return listed_.size(); }

 private:
  ControllerLinks(std::vector<std::string> listed, ControllerLinksOptions options);
  // The client for `url`, made on first use; nullptr when the URL is not usable.
  httplib::Client* ClientFor(const std::string& url);

  const std::vector<std::string> listed_;
  ControllerLinksOptions options_;
  std::string bearer_;
  std::string current_;
  size_t listed_at_ = 0;  // the listed address last used (a leader learned may be current)
  std::map<std::string, std::unique_ptr<httplib::Client>> clients_;
};

}  // namespace tessera
