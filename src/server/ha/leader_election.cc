#include "base/mutex.h"
#include "server/ha/leader_election.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace tessera {

LeaderElection::LeaderElection(ElectionBackend& backend, const Clock& clock,
                               LeaderElectionOptions options, Listener listener)
    : backend_(backend), clock_(clock), options_(std::move(options)),
      listener_(std::move(listener)) {}

LeaderElection::~LeaderElection() { Stop(); }

void LeaderElection::Start() { thread_ = std::thread([this] { Loop(); }); }

void LeaderElection::Stop(bool resign) {
  {
    MutexLock lock(mu_);
    stopping_ = true;
    resign_ = resign;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void LeaderElection::StepDown(const std::string& why) {
  {
    MutexLock lock(mu_);
    if (!leading_) {
      return;
    }
    step_down_ = why.empty() ? "stepped down" : why;
  }
  cv_.NotifyAll();
}

void LeaderElection::ReleaseEndedTerm() {
  int64_t lease = 0;
  {
    MutexLock lock(mu_);
    std::swap(lease, ended_lease_);
  }
  if (lease != 0) {
    (void)backend_.Revoke(lease);
  }
}

bool LeaderElection::leading() const {
  MutexLock lock(mu_);
  return leading_;
}

std::string LeaderElection::leader() const {
  MutexLock lock(mu_);
  return leader_;
}

std::string LeaderElection::last_error() const {
  MutexLock lock(mu_);
  return last_error_;
}

uint64_t LeaderElection::terms() const {
  MutexLock lock(mu_);
  return terms_;
}

bool LeaderElection::Wait(int64_t ms) {
  MutexLock lock(mu_);
  cv_.WaitFor(mu_, std::chrono::milliseconds(std::max<int64_t>(ms, 0)),
              [this]() REQUIRES(mu_) { return stopping_ || !step_down_.empty(); });
  return !stopping_;
}

void LeaderElection::Loop() {
  for (;;) {
    bool leading = false;
    {
      MutexLock lock(mu_);
      if (stopping_) {
        break;
      }
      leading = leading_;
    }
    if (leading) {
      LeadOnce();
    } else {
      FollowOnce();
    }
  }
  bool leading = false;
  bool resign = false;
  {
    MutexLock lock(mu_);
    leading = leading_;
    resign = resign_;
  }
  if (leading) {
    EndTerm("shutting down", resign);
  }
  lease_ = 0;
}

void LeaderElection::FollowOnce() {
  StatusOr<std::optional<LeaderRecord>> record = backend_.Get(options_.key);
  if (!record.ok()) {
    {
      MutexLock lock(mu_);
      leader_.clear();
      last_error_ = record.status().message();
    }
    Wait(options_.poll_ms);
    return;
  }
  if (record.value().has_value()) {
    {
      MutexLock lock(mu_);
      leader_ = record.value()->value;
      last_error_.clear();
    }
    Wait(options_.poll_ms);
    return;
  }
  {
    MutexLock lock(mu_);
    leader_.clear();
    last_error_.clear();
  }
  if (clock_.NowMicros() < no_campaign_until_) {
    Wait(options_.poll_ms);  // just stepped down: the others go first
    return;
  }
  // The key is free: campaign with a fresh lease.
  // The lease's time counts from before the grant was sent: never later than etcd's.
  const Micros sent = clock_.NowMicros();
  StatusOr<int64_t> lease = backend_.GrantLease(options_.lease_ttl_s);
  if (!lease.ok()) {
    MutexLock lock(mu_);
    last_error_ = lease.status().message();
  } else {
    StatusOr<std::optional<int64_t>> created =
        backend_.CreateIfAbsent(options_.key, options_.identity, lease.value());
    if (created.ok() && created.value().has_value()) {
      lease_ = lease.value();
      valid_until_ = sent + options_.lease_ttl_s * 1'000'000;
      ElectionEvent event{ElectionEvent::Kind::kElected, *created.value(), ""};
      {
        MutexLock lock(mu_);
        leading_ = true;
        leader_ = options_.identity;
        step_down_.clear();
        ++terms_;
      }
      listener_(event);
      return;
    }
    (void)backend_.Revoke(lease.value());  // lost the race, or the store failed
    if (!created.ok()) {
      MutexLock lock(mu_);
      last_error_ = created.status().message();
    }
  }
  Wait(options_.poll_ms);
}

void LeaderElection::LeadOnce() {
  const int64_t period_ms = std::max<int64_t>(options_.lease_ttl_s * 1000 / 3, 100);
  Wait(period_ms);
  std::string why;
  {
    MutexLock lock(mu_);
    if (stopping_) {
      return;  // Loop ends the term
    }
    why = step_down_;
  }
  if (why.empty()) {
    // Renew; after a failed renewal retry soon, until the term's local deadline.
    for (;;) {
      const Micros sent = clock_.NowMicros();
      if (sent >= valid_until_) {
        why = "the lease expired before it could be renewed";
        break;
      }
      StatusOr<int64_t> left = backend_.KeepAlive(lease_);
      if (left.ok() && left.value() > 0) {
        valid_until_ = sent + left.value() * 1'000'000;
        break;
      }
      if (left.ok()) {
        why = "the lease expired";
        break;
      }
      if (clock_.NowMicros() >= valid_until_) {
        why = "the lease could not be renewed: " + left.status().message();
        break;
      }
      if (!Wait(100)) {
        return;
      }
    }
  }
  if (!why.empty()) {
    EndTerm(why, /*revoke=*/true);
  }
}

void LeaderElection::EndTerm(const std::string& why, bool revoke) {
  {
    MutexLock lock(mu_);
    leading_ = false;
    leader_.clear();
    step_down_.clear();
  }
  listener_(ElectionEvent{ElectionEvent::Kind::kLost, 0, why});
  // Free the key for the others (harmless when the lease is already gone): at once, or,
  // with defer_release, once the owner has stopped acting on the term.
  if (lease_ != 0 && revoke) {
    if (options_.defer_release) {
      MutexLock lock(mu_);
      ended_lease_ = lease_;
    } else {
      (void)backend_.Revoke(lease_);
    }
  }
  lease_ = 0;
  no_campaign_until_ = clock_.NowMicros() + options_.lease_ttl_s * 1'000'000;
}

}  // namespace tessera
