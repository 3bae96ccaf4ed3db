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
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    resign_ = resign;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void LeaderElection::StepDown(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!leading_) {
      return;
    }
    step_down_ = why.empty() ? "stepped down" : why;
  }
  cv_.notify_all();
}

void LeaderElection::ReleaseEndedTerm() {
  int64_t lease = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::swap(lease, ended_lease_);
  }
  if (lease != 0) {
    (void)backend_.Revoke(lease);
  }
}

bool LeaderElection::leading() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leading_;
}

std::string LeaderElection::leader() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leader_;
}

std::string LeaderElection::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

uint64_t LeaderElection::terms() const {
  std::lock_guard<std::mutex> lock(mu_);
  return terms_;
}

bool LeaderElection::Wait(int64_t ms) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(ms, 0)),
               [this] { return stopping_ || !step_down_.empty(); });
  return !stopping_;
}

void LeaderElection::Loop() {
  for (;;) {
    bool leading = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
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
    std::lock_guard<std::mutex> lock(mu_);
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
      std::lock_guard<std::mutex> lock(mu_);
      leader_.clear();
      last_error_ = record.status().message();
    }
    Wait(options_.poll_ms);
    return;
  }
  if (record.value().has_value()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      leader_ = record.value()->value;
      last_error_.clear();
    }
    Wait(options_.poll_ms);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
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
    std::lock_guard<std::mutex> lock(mu_);
    last_error_ = lease.status().message();
  } else {
    StatusOr<std::optional<int64_t>> created =
        backend_.CreateIfAbsent(options_.key, options_.identity, lease.value());
    if (created.ok() && created.value().has_value()) {
      lease_ = lease.value();
      valid_until_ = sent + options_.lease_ttl_s * 1'000'000;
      ElectionEvent event{ElectionEvent::Kind::kElected, *created.value(), ""};
      {
        std::lock_guard<std::mutex> lock(mu_);
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
      std::lock_guard<std::mutex> lock(mu_);
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
    std::lock_guard<std::mutex> lock(mu_);
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
    std::lock_guard<std::mutex> lock(mu_);
    leading_ = false;
    leader_.clear();
    step_down_.clear();
  }
  listener_(ElectionEvent{ElectionEvent::Kind::kLost, 0, why});
  // Free the key for the others (harmless when the lease is already gone): at once, or,
  // with defer_release, once the owner has stopped acting on the term.
  if (lease_ != 0 && revoke) {
    if (options_.defer_release) {
      std::lock_guard<std::mutex> lock(mu_);
      ended_lease_ = lease_;
    } else {
      (void)backend_.Revoke(lease_);
    }
  }
  lease_ = 0;
  no_campaign_until_ = clock_.NowMicros() + options_.lease_ttl_s * 1'000'000;
}

}  // namespace tessera
