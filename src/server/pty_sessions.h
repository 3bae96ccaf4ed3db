// PtySessions: the controller's side of tasks on a pseudo-terminal (`tessera run --pty`;
// the terminal itself is the task shim's, agent/launch/pty_relay.h): the secret each launch
// carries, and where each task's terminal listens, as its agent reported.
//
// A job asks for a terminal with TESSERA_PTY=1 in its environment (the job file needs no
// field of its own; the task sees it too). Its tasks' launches carry a secret derived
// from a random key made when the controller starts: SHA-256 of the key and the task
// attempt, so a resent launch carries the same one and none is stored. A controller that
// starts afresh (a restart, a failover) has another key: tasks launched before it keep
// running, but it cannot give their secret, so they cannot be attached to again (a
// connection already made is unaffected).
// An endpoint is what the task's last report said; entries not reported for
// kPtyForgetAfter are dropped once there are many.
//
// Thread safety: none; the controller's lock guards it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "api/agent_protocol.h"
#include "base/clock.h"

namespace tessera {

inline constexpr const char* kPtyEnv = "TESSERA_PTY";

// Where a task attempt's terminal listens, as its agent reported, and its secret.
struct PtyTerminal {
  std::string address;
  int port = 0;
  std::string secret;
};

class PtySessions {
 public:
  PtySessions();                          // a fresh random key
  explicit PtySessions(std::string key);  // tests

  // Whether a job with this environment runs on a terminal.
  static bool Wanted(const std::map<std::string, std::string>& env);

  // The secret of a task attempt's terminal (64 hex digits).
  std::string Secret(const TaskKey& key) const;

  struct Endpoint {
    std::string address;  // the node's, as the controller sees it
    int port = 0;
    int attempt = 0;
    Micros reported = 0;
  };
  void Reported(const TaskKey& key, const std::string& address, int port, Micros now);
  // The endpoint of `task` of `job` in `attempt`; none when it was not reported.
  std::optional<Endpoint> Find(uint64_t job, int task, int attempt) const;
  // That endpoint with the attempt's Secret; none when it was not reported.
  std::optional<PtyTerminal> TerminalOf(uint64_t job, int task, int attempt) const;
  size_t size() const { return endpoints_.size(); }

 private:
  std::string key_;
  std::map<std::pair<uint64_t, int>, Endpoint> endpoints_;
};

inline constexpr Micros kPtyForgetAfter = 600'000'000;
inline constexpr size_t kPtyEndpointsKept = 4096;

}  // namespace tessera
