// What-if on the cluster's own history: the controller's recorded jobs and nodes
// (GET /v1/admin/history) replayed through the job simulator under the policy that
// actually ran and under another one, beside what actually happened.
//
// The replay:
//   - jobs: those submitted in the window that ran and ended (succeeded, failed, or
//     cancelled while running), each with its actual work as its duration: the
//     progress its last attempt resumed from plus that attempt's run time less its
//     start-up (the restart overhead the controller charged a resumed attempt). Work
//     lost to preemptions is not part of it: another policy may not lose it. Jobs that
//     never ran (cancelled while pending) and jobs that had not ended when the history
//     was read are left out and counted.
//   - nodes: every node present at some time in the window, with its last recorded spec
//     (the simulator's cluster is static).
//   - policy: the controller's, with the bounds it ran under (reclaim bound, restart
//     overhead, checkpoint wait, grace, placement, seed); the other policy gets the same
//     restart overhead, reclaim bound and placement, as the live controller would give it.
// What it cannot replay: fair-share usage and runtime predictions learned before the
// window (the simulator starts without them), node losses within the window.
// Thread safety: functions of values.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "model/gpu_catalog.h"
#include "model/job.h"
#include "model/node.h"
#include "model/queue_tree.h"
#include "plugins/job_policies.h"
#include "sim/job_report.h"
#include "sim/job_sim.h"

namespace tessera {

struct RecordedAttempt {
  Micros start = 0, end = 0;
  int64_t gpu_milli = 0;
};

struct RecordedJob {
  uint64_t id = 0;
  std::string name, tenant, queue, state;
  JobSpec spec;                        // the submission's (submit_time unset)
  Micros submit = 0, start = 0, end = 0;  // start: first start; 0: never
  int attempts = 0, preemptions = 0;
  Micros progress = 0;                 // work saved by the last requeue
  std::vector<RecordedAttempt> runs;   // ended attempts, by start
};

struct RecordedPolicy {
  std::string name;                    // plugins/job_policies.h preset or combination
  std::string placement = "bestfit";
  uint64_t seed = 1;
  Micros restart_overhead = 0, checkpoint_wait = 0, min_run_before_reclaim = 0;
  Micros victim_hold = 0;  // absent from histories written before it existed
  Micros grace = 30'000'000;
};

struct RecordedNode {
  Micros at = 0;
  bool left = false;  // the admin removed it; else it joined or its spec changed
  NodeSpec spec;      // empty when left
};

struct RecordedHistory {
  Micros since = 0, until = 0;
  RecordedPolicy policy;
  std::string queues_yaml;           // the cluster's queue configuration now
  std::vector<RecordedNode> nodes;   // by node, then time
  std::vector<RecordedJob> jobs;     // by id
};

// Adds one page of GET /v1/admin/history to `into` (the first page sets the window,
// policy, queues and nodes). InvalidArgument naming the field when malformed. Returns
// the next page's cursor ("after"), or 0 when this was the last page.
StatusOr<uint64_t> AddHistoryPage(const nlohmann::json& page, const GpuCatalog& catalog,
                                  RecordedHistory* into);

// The job's actual work (see the header); -1 when it never ran or has not ended.
Micros ActualWork(const RecordedJob& job, Micros restart_overhead);

// The recorded policy as the controller ran it; InvalidArgument for an unknown name.
StatusOr<SchedulerPolicy> RecordedSchedulerPolicy(const RecordedPolicy& recorded);
// `spec` as the live controller would run it under the recorded bounds.
StatusOr<SchedulerPolicy> PolicyUnderRecordedBounds(const std::string& spec,
                                                    const RecordedPolicy& recorded);

struct Replay {
  Micros origin = 0;               // controller time of the replay's t = 0 (first submit)
  std::vector<NodeSpec> nodes;
  std::vector<SimJob> jobs;
  JobRun actual;                   // what happened, on the replay's clock
  int64_t never_ran = 0;           // left out: never started
  int64_t not_ended = 0;           // left out: still pending or running
};

// FailedPrecondition when the window holds no job to replay or no node.
StatusOr<Replay> BuildReplay(const RecordedHistory& history, const QueueTree& tree);

// One group's figures on one side.
struct WhatIfFigures {
  int64_t jobs = 0;  // finished
  double avg_jct_s = 0, avg_wait_s = 0;
  double utilization = 0;  // the group's GPU-seconds / (cluster GPUs x the side's makespan)
  // Finish-time fairness where the side's queues have quotas: the group's summed JCT over
  // its summed JCT under static-vc (each tenant alone on its quota, no borrowing), over
  // the jobs that finished there; -1 without quotas or such jobs. Above 1: the group
  // fared worse than on its own quota.
  double rho = -1;
};

struct WhatIfGroup {
  std::string kind;  // "all", "tenant" or "queue"
  std::string name;
  std::vector<WhatIfFigures> sides;  // parallel to WhatIfReport::sides
};

struct WhatIfReport {
  Micros since = 0, until = 0;
  std::vector<std::string> sides;   // "actual", "<policy> (replayed)", "<other>"
  std::vector<JobSummary> summaries;  // per side (jain, makespan, preemptions...)
  std::vector<WhatIfGroup> groups;  // all, then tenants, then queues
  int64_t replayed = 0, never_ran = 0, not_ended = 0;
  int64_t nodes = 0, gpus = 0;
  bool quotas = false;  // some side's queues have nominal GPU quotas (rho is reported)
};

struct WhatIfOptions {
  std::string policy;                       // the other policy; "" = the recorded one
  std::optional<QueueTreeSpec> queues;      // the other side's queues; none: the cluster's
};

// Replays `history` under the recorded policy and under options' policy and queues.
StatusOr<WhatIfReport> RunWhatIf(const RecordedHistory& history, const WhatIfOptions& options,
                                 const GpuCatalog& catalog);

std::string WhatIfText(const WhatIfReport& report);
nlohmann::json WhatIfJson(const WhatIfReport& report);

}  // namespace tessera
