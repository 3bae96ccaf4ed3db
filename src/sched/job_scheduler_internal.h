// Helpers shared by the files of JobScheduler (job_scheduler.cc, placement;
// job_scheduler_cycle.cc, the cycle; job_scheduler_preemption.cc, victims). Not part of the
// scheduler's API. Thread safety: as JobScheduler's.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/job.h"
#include "state/cluster_state.h"
#include "state/quota_ledger.h"

namespace tessera::job_scheduler_internal {

inline constexpr size_t kNotRunning = static_cast<size_t>(-1);  // running_pos_ of others

// A hash of what a gang asks for, to remember capacity failures within a cycle.
inline uint64_t ShapeHash(const JobSpec& spec) {
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ULL; };
  mix(static_cast<uint64_t>(spec.topology.scope) * 2 + (spec.topology.hard ? 1 : 0));
  for (const TaskRequest& t : spec.tasks) {
    mix(static_cast<uint64_t>(t.cpu.value()));
    mix(static_cast<uint64_t>(t.memory.value()));
    mix(static_cast<uint64_t>(t.gpu_count));
    mix(static_cast<uint64_t>(t.gpu_milli.value()));
    mix(static_cast<uint64_t>(t.gpu_memory.value()));
    mix(std::hash<std::string>{}(t.mig_profile));
    mix(t.models.bits());
    mix(static_cast<uint64_t>(t.topology));
  }
  return h;
}

inline int64_t FreeMilli(const ClusterState& state) {
  return state.total_gpu_milli().value() - state.allocated_gpu_milli().value();
}

inline void MustSucceed(const Status& s) {
  // The scheduler re-applies allocations it has just released: failure is a bug.
  if (!s.ok()) {
    std::abort();
  }
}

// Temporary charges and refunds on a QuotaLedger, undone in reverse on destruction.
class LedgerOverlay {
 public:
  explicit LedgerOverlay(QuotaLedger& quota) : quota_(quota) {}
  LedgerOverlay(const LedgerOverlay&) = delete;
  LedgerOverlay& operator=(const LedgerOverlay&) = delete;
  ~LedgerOverlay() {
    for (auto it = ops_.rbegin(); it != ops_.rend(); ++it) {
      if (it->added) {
        quota_.Remove(it->queue, it->charge);
      } else {
        quota_.Add(it->queue, it->charge);
      }
    }
  }
  void Add(QueueId queue, const ResourceVector& charge) {
    quota_.Add(queue, charge);
    ops_.push_back({queue, charge, true});
  }
  void Remove(QueueId queue, const ResourceVector& charge) {
    quota_.Remove(queue, charge);
    ops_.push_back({queue, charge, false});
  }

 private:
  struct Op {
    QueueId queue;
    ResourceVector charge;
    bool added;
  };
  QuotaLedger& quota_;
  std::vector<Op> ops_;
};

}  // namespace tessera::job_scheduler_internal
