// FakeElectionBackend: an in-memory lease store like etcd's, with real lease expiry on
// the clock it is given, for tests of leader election and of HaServer.
#pragma once

#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "base/clock.h"
#include "server/ha/election_backend.h"

namespace tessera {

// Keys bound to leases vanish when the leases expire.
class FakeElectionBackend final : public ElectionBackend {
 public:
  explicit FakeElectionBackend(const Clock& clock) : clock_(clock) {}

  StatusOr<int64_t> GrantLease(int64_t ttl_s) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (down_) return UnavailableError("etcd: no quorum");
    const int64_t id = ++next_lease_;
    leases_[id] = Lease{ttl_s, clock_.NowMicros() + ttl_s * 1'000'000};
    return id;
  }
  StatusOr<int64_t> KeepAlive(int64_t lease) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (down_) return UnavailableError("etcd: no quorum");
    ExpireLocked();
    auto it = leases_.find(lease);
    if (it == leases_.end()) return int64_t{0};
    it->second.expires = clock_.NowMicros() + it->second.ttl * 1'000'000;
    return it->second.ttl;
  }
  Status Revoke(int64_t lease) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (down_) return UnavailableError("etcd: no quorum");
    leases_.erase(lease);
    ExpireLocked();
    return Status::Ok();
  }
  StatusOr<std::optional<int64_t>> CreateIfAbsent(const std::string& key, const std::string& value,
                                                  int64_t lease) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (down_) return UnavailableError("etcd: no quorum");
    ExpireLocked();
    if (keys_.count(key) != 0) return std::optional<int64_t>();
    if (leases_.count(lease) == 0) return NotFoundError("lease not found");
    keys_[key] = LeaderRecord{value, ++revision_, lease};
    return std::optional<int64_t>(revision_);
  }
  StatusOr<std::optional<LeaderRecord>> Get(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (down_) return UnavailableError("etcd: no quorum");
    ExpireLocked();
    auto it = keys_.find(key);
    if (it == keys_.end()) return std::optional<LeaderRecord>();
    return std::optional<LeaderRecord>(it->second);
  }

  // While down, every call fails (a partition, or etcd without quorum); leases still
  // expire on the store's side.
  void SetDown(bool down) {
    std::lock_guard<std::mutex> lock(mu_);
    down_ = down;
  }
  // Another controller takes the key behind its holder's back (as after a lease the
  // holder could not see expire): a new record with a new create revision.
  void Steal(const std::string& key, const std::string& value) {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t id = ++next_lease_;
    leases_[id] = Lease{3600, clock_.NowMicros() + int64_t{3600} * 1'000'000};
    keys_[key] = LeaderRecord{value, ++revision_, id};
  }
  std::optional<LeaderRecord> Holder(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    ExpireLocked();
    auto it = keys_.find(key);
    if (it == keys_.end()) return std::nullopt;
    return it->second;
  }

 private:
  struct Lease {
    int64_t ttl = 0;
    Micros expires = 0;
  };
  void ExpireLocked() {
    const Micros now = clock_.NowMicros();
    for (auto it = leases_.begin(); it != leases_.end();) {
      it = it->second.expires <= now ? leases_.erase(it) : std::next(it);
    }
    for (auto it = keys_.begin(); it != keys_.end();) {
      it = leases_.count(it->second.lease) == 0 ? keys_.erase(it) : std::next(it);
    }
  }

  const Clock& clock_;
  std::mutex mu_;
  bool down_ = false;
  int64_t next_lease_ = 0, revision_ = 100;
  std::map<int64_t, Lease> leases_;
  std::map<std::string, LeaderRecord> keys_;
};

}  // namespace tessera
