#include "server/pty_sessions.h"

#include <iterator>

#include "server/http/auth.h"

namespace tessera {

PtySessions::PtySessions() : key_(GenerateToken("pty")) {}

PtySessions::PtySessions(std::string key) : key_(std::move(key)) {}

bool PtySessions::Wanted(const std::map<std::string, std::string>& env) {
  auto it = env.find(kPtyEnv);
  return it != env.end() && it->second == "1";
}

std::string PtySessions::Secret(const TaskKey& key) const {
  return HashToken(key_ + "|" + ToString(key));
}

void PtySessions::Reported(const TaskKey& key, const std::string& address, int port, Micros now) {
  endpoints_[{key.job, key.task}] = Endpoint{address, port, key.attempt, now};
  if (endpoints_.size() > kPtyEndpointsKept) {
    // A running task is reported with every heartbeat: what is old has ended.
    for (auto it = endpoints_.begin(); it != endpoints_.end();) {
      it = now - it->second.reported > kPtyForgetAfter ? endpoints_.erase(it) : std::next(it);
    }
  }
}

std::optional<PtySessions::Endpoint> PtySessions::Find(uint64_t job, int task, int attempt) const {
  auto it = endpoints_.find({job, task});
  if (it == endpoints_.end() || it->second.attempt != attempt) {
    return std::nullopt;
  }
  return it->second;
}

std::optional<PtyTerminal> PtySessions::TerminalOf(uint64_t job, int task, int attempt) const {
  std::optional<Endpoint> at = Find(job, task, attempt);
  if (!at) {
    return std::nullopt;
  }
  return PtyTerminal{at->address, at->port, Secret(TaskKey{job, task, attempt})};
}

}  // namespace tessera
