// Ordering extension points of the scheduling cycle (the queue-sort step).
//
// A JobOrderPlugin gives each pending job a key (lower goes first) that does not
// change while the job waits, so pending jobs stay in sorted containers. A
// QueueOrderPlugin gives each queue a key from its usage, recomputed as jobs start;
// the cycle merges the queues' sorted jobs by (priority, queue key, job key) when
// the queue key is lexicographic, or by (priority, queue key + job key) when it is
// additive (Slurm's multifactor priority, where fair share trades against age).
// Implementations live in plugins/; they are pure functions of their inputs.
// Thread safety: const methods only; share freely.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "model/queue_tree.h"
#include "sched/job_record.h"

namespace tessera {

// Per-queue usage the queue orders read; maintained by the scheduler.
class QueueUsage {
 public:
  QueueUsage(const QueueTree& tree, int64_t capacity_gpu_milli, int64_t capacity_cpu_milli,
             int64_t capacity_memory_mib, Micros half_life);

  // Decays usage up to `now`, integrating the current allocations exactly.
  void Advance(Micros now);
  void Add(QueueId queue, const std::vector<Allocation>& allocations);
  void Remove(QueueId queue, const std::vector<Allocation>& allocations);

  int64_t gpu_milli(QueueId q) const { return alloc_[q.value()].gpu_milli; }
  int64_t capacity_gpu_milli() const { return cap_gpu_; }
  // The cluster's size changed (the dominant share's denominators); usage is kept.
  void SetCapacity(int64_t gpu_milli, int64_t cpu_milli, int64_t memory_mib);
  // Slurm's classic fair-share factor 2^(-U/S): U the queue's share of all decayed
  // usage, S its weight over all queues' weights. 1 for an idle queue, 0.5 at par.
  double FairShareFactor(QueueId q) const;
  // Dominant resource share over GPU, CPU and memory, divided by the weight.
  double DominantShare(QueueId q) const;
  double decayed_gpu_seconds(QueueId q) const { return decayed_[q.value()]; }

  // The user level (Slurm's fair tree below a leaf queue): one slot per (queue, user),
  // made on first use and kept; usage decays as the queues' does. Users of a queue have
  // equal shares, so their order is their decayed usage (lower goes first).
  size_t UserSlot(QueueId q, const std::string& user);
  void AddUser(size_t slot, const std::vector<Allocation>& allocations);
  void RemoveUser(size_t slot, const std::vector<Allocation>& allocations);
  double user_decayed(size_t slot) const { return users_[slot].decayed; }
  size_t user_slots() const { return users_.size(); }

  // The decayed usage as of the last Advance, by queue name, to carry over to a new
  // QueueUsage (another tree, a restart). Restore takes the queues it knows; usage of
  // a queue that is gone is dropped. Allocations are not part of it (Add restores them).
  struct SavedUser {
    std::string queue, user;
    double decayed = 0;  // milli-GPU-seconds
  };
  struct Saved {
    Micros at = 0;
    std::vector<std::pair<std::string, double>> decayed;  // milli-GPU-seconds
    std::vector<SavedUser> users;                         // the user level's, by slot
  };
  Saved Save() const;
  void Restore(const Saved& saved);

 private:
  struct Alloc {
    int64_t gpu_milli = 0;
    int64_t cpu_milli = 0;
    int64_t memory_mib = 0;
  };
  const QueueTree* tree_;
  int64_t cap_gpu_, cap_cpu_, cap_mem_;
  double half_life_s_;
  Micros now_ = 0;
  std::vector<Alloc> alloc_;
  std::vector<double> decayed_;  // milli-GPU-seconds, decayed
  struct User {
    QueueId queue;
    std::string name;
    int64_t gpu_milli = 0;  // held now
    double decayed = 0;     // milli-GPU-seconds
  };
  std::vector<User> users_;
  std::map<std::pair<uint32_t, std::string>, size_t, std::less<>> user_slot_;
  double decayed_total_ = 0;
  double weight_total_ = 0;
};

class JobOrderPlugin {
 public:
  virtual ~JobOrderPlugin() = default;
  virtual std::string_view name() const = 0;
  // Lower goes first. Called when a job becomes pending; must not depend on time
  // passing while it waits.
  virtual double Key(const JobRecord& job, Micros now) const = 0;
  // Whether priority classes order jobs before Key does (all but plain fifo).
  virtual bool by_priority() const { return true; }
};

class QueueOrderPlugin {
 public:
  virtual ~QueueOrderPlugin() = default;
  virtual std::string_view name() const = 0;
  virtual double Key(QueueId queue, const QueueUsage& usage) const = 0;
  virtual bool additive() const { return false; }
};

}  // namespace tessera
