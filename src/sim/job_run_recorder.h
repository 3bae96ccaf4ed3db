// JobRunRecorder: what a run of jobs did, built from the job lifecycle's events: each
// job's outcome (first start, finish and how it ended, attempts and restarts, service,
// preemptions, work lost), each tenant's GPUs over time, the event log and the
// invariant breaches a driver found. The
// simulator and the controller-driven scenario runs record through it alike, so their
// results compare field by field.
// Thread safety: none; one driver thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "model/queue_tree.h"
#include "sched/job_lifecycle.h"
#include "sim/job_sim.h"

namespace tessera {

class JobRunRecorder : public LifecycleListener {
 public:
  struct Options {
    bool record_events = false;
    bool record_usage = true;
  };
  // Tenants (and their nominal GPU quota) come from `tree`, in queue order.
  JobRunRecorder(const QueueTree& tree, Options options);

  // The job the lifecycle knows as `id`, queued on `queue`, is outcome `index` (the
  // job's place in the run's input, whatever order the jobs arrive in): its name, GPUs,
  // submit time and true runtime are in `outcome`.
  void Track(JobId id, QueueId queue, size_t index, JobOutcome outcome);
  void OnJobEvent(const JobRecord& job, const LifecycleEvent& event) override;
  // After a cycle at `now`: the invariant breaches the driver found (a cycle with any
  // counts once), then a usage sample when usage changed.
  void EndCycle(Micros now, std::vector<std::string> violations);

  // The result, with `events` events processed by the driver.
  JobSimResult Take(int64_t events);

 private:
  Options options_;
  JobRun run_;
  std::vector<size_t> tenant_of_queue_;
  std::vector<int64_t> tenant_milli_;
  bool usage_changed_ = false;
  std::unordered_map<uint64_t, size_t> index_of_;   // lifecycle id -> outcome index
  std::unordered_map<uint64_t, int64_t> milli_of_;  // running job -> its GPU milli
  std::vector<SimEvent> events_;
  std::vector<std::string> violations_;
};

}  // namespace tessera
