// Helpers shared by the files of JobScheduler (job_scheduler.cc, the cycle and
// placement; job_scheduler_preemption.cc, victims). Not part of the scheduler's API.
// Thread safety: as JobScheduler's.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "base/status.h"
#include "state/cluster_state.h"
#include "state/quota_ledger.h"

namespace tessera::job_scheduler_internal {

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
