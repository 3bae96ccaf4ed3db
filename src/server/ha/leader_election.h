// LeaderElection: one controller of several leads, on a lease in the store (etcd).
//
// Campaign: a controller that finds the leader key absent grants itself a lease of
// lease_ttl_s and creates the key bound to it (value: its advertised URL). The key's
// create revision is the fence of its term: the store refuses every write of the term
// once the key is anyone else's (store/etcd/etcd_store.h, SetFence). Followers read the
// key every poll_ms, so they know whom to redirect to and see it go.
//
// Keeping it: the leader renews the lease every lease_ttl_s / 3. It counts its term as
// valid until the send time of its last successful renewal plus the TTL etcd answered,
// which is never later than etcd's own expiry; past that it has lost, even when the store
// cannot be reached (etcd without quorum, a partition, a SIGSTOP), and says so.
// Step-down (a fenced write, a failed start, shutdown) revokes the lease so that the
// others need not wait for it to expire; a controller whose term ended waits one TTL
// before it campaigns again.
//
// Events go to one callback, called on the election's thread: it must not block (hand the
// work to another thread; HaServer does). Every kElected is followed by one kLost before
// the next kElected.
// Thread safety: every public method is thread-safe; Start and Stop from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "base/mutex.h"
#include "base/clock.h"
#include "server/ha/election_backend.h"

namespace tessera {

struct LeaderElectionOptions {
  std::string key = "/tessera/leader";
  std::string identity;     // this controller's advertised URL; required
  int64_t lease_ttl_s = 2;  // failover takes about this long after a leader dies
  int poll_ms = 200;        // followers read the leader key this often
  // A term that ends keeps its lease until ReleaseEndedTerm(), so that the owner can stop
  // serving first (no other controller leads while the old one may still answer).
  bool defer_release = false;
};

struct ElectionEvent {
  enum class Kind { kElected, kLost };
  Kind kind = Kind::kElected;
  int64_t fence_revision = 0;  // kElected: the leader key's create revision
  std::string why;             // kLost: why the term ended
};

class LeaderElection {
 public:
  using Listener = std::function<void(const ElectionEvent&)>;

  // `backend` and `clock` must outlive this.
  LeaderElection(ElectionBackend& backend, const Clock& clock, LeaderElectionOptions options,
                 Listener listener);
  ~LeaderElection();
  LeaderElection(const LeaderElection&) = delete;
  LeaderElection& operator=(const LeaderElection&) = delete;

  void Start();
  // Ends the loop; a leader ends its term (kLost) and, with resign, revokes its lease so
  // that another takes over at once.
  void Stop(bool resign = true);
  // Ends the current term now (kLost with `why`) and revokes the lease; the controller
  // campaigns again later. No effect when not leading.
  void StepDown(const std::string& why);

  // With defer_release: revokes the lease of the term that ended (no-op otherwise).
  void ReleaseEndedTerm();

  bool leading() const;
  // The leader's URL as last read ("" unknown); this controller's own while it leads.
  std::string leader() const;
  // Why there is no known leader (the last error reading the key), "" otherwise.
  std::string last_error() const;
  uint64_t terms() const;  // terms this controller has led

 private:
  void Loop();
  void FollowOnce();  // reads the key, campaigns when it is free
  void LeadOnce();    // renews the lease, or ends the term
  void EndTerm(const std::string& why, bool revoke);
  // Sleeps up to ms or until Stop/StepDown; false when stopping.
  bool Wait(int64_t ms);

  ElectionBackend& backend_;
  const Clock& clock_;
  const LeaderElectionOptions options_;
  Listener listener_;

  mutable Mutex mu_;
  CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  bool resign_ GUARDED_BY(mu_) = true;
  std::string step_down_ GUARDED_BY(mu_);  // a pending StepDown's reason
  bool leading_ GUARDED_BY(mu_) = false;
  std::string leader_ GUARDED_BY(mu_);
  std::string last_error_ GUARDED_BY(mu_);
  uint64_t terms_ GUARDED_BY(mu_) = 0;
  int64_t lease_ = 0;         // the election thread's
  int64_t ended_lease_ GUARDED_BY(mu_) = 0;  // a deferred release
  Micros valid_until_ = 0;    // the election thread's
  // After a term ends this controller waits a lease's length before campaigning again,
  // so that a leader that stepped down (fenced, failed to start) leaves the lead to others.
  Micros no_campaign_until_ = 0;  // the election thread's
  std::thread thread_;
};

}  // namespace tessera
