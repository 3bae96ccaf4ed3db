// Idle actions in the job simulator, judged as the live controller judges them
// (server/modules/idle_module.h) by the same IdleWatch and verdicts (sched/idle_watch.h).
//
// A job states how busy its GPUs are over an attempt (SimJob::utilisation, 100 % when
// unstated). What a card shows is what the live agents' telemetry would: the sum over
// the live tasks holding it of their job's utilisation times their share of the card,
// capped at 100 and rounded to a whole percentage; a job's sample is then the
// grant-weighted mean of what each grant uses of its card (GrantUtilisation). Jobs
// holding a MIG instance are not measured (NVML gives no utilisation in MIG mode), nor
// is a stopping job. Samples fall on the grid of IdleSampleAfter while a job runs, and
// only when some queue's policy acts (requeue or cancel): a notify changes no outcome.
// The simulator has no task output, so an idle job is also hung; the action is the same.
// Thread safety: one per simulation.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/idle_policy.h"
#include "model/queue_tree.h"
#include "sched/attempt_machine.h"
#include "sched/idle_watch.h"
#include "sched/job_record.h"
#include "sim/job_sim.h"

namespace tessera {

// The utilisation (0..100) `since` after an attempt's start, from the job's stated
// steps: the last step at or before it; 100 before the first and when none is stated.
int UtilisationAt(const std::vector<SimUtilisation>& steps, Micros since);

// What a live task adds to its card: its job's utilisation `pct` times its share of the
// card (`milli`, at most a whole card); and the whole percentage a card reports for the
// sum of its tasks' contributions (capped at 100), as an agent's telemetry does.
double CardContribution(int pct, int64_t milli);
int CardPercent(double contributions);

// What each card shows when `jobs` run with their stated utilisation: (node, gpu) ->
// the whole percentage the agent would report.
std::map<std::pair<NodeId, int>, int> CardUtilisation(const std::vector<JobRecord>& jobs,
                                                      const std::vector<SimJob>& specs,
                                                      Micros now);

class SimIdle {
 public:
  // `policies`: by queue name (those not named get the defaults, which only notify).
  SimIdle(std::map<std::string, IdlePolicy> policies, const std::vector<SimJob>& specs);
  bool enabled() const { return enabled_; }
  // Whether samples are taken under `policies`: some policy acts (requeue or cancel).
  static bool Enabled(const std::map<std::string, IdlePolicy>& policies);
  // A sample at `now`: the stops the queues' actions ask for, by job index. `attempts`:
  // each job's attempt number, which starts a new window when it changes.
  std::vector<std::pair<uint64_t, StopRequest>> Sample(const std::vector<JobRecord>& jobs,
                                                       const std::vector<int>& attempts,
                                                       const QueueTree& tree, Micros now,
                                                       Micros grace);

 private:
  const IdlePolicy& PolicyOf(const std::string& queue) const;
  std::map<std::string, IdlePolicy> policies_;
  const std::vector<SimJob>& specs_;
  bool enabled_ = false;
  IdleWatch watch_;
};

}  // namespace tessera
