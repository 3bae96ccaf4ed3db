// Scenario files: a small cluster, a queue tree, a handful of jobs and the outcome
// expected of the scheduler, run through the job simulator. The main regression
// suite of the scheduling cycle (tests/scenarios/*.yaml), in the spirit of DuckDB's
// sqllogictest: each file states a behaviour and the exact outcome it must have.
//
//   name: borrowing
//   description: a queue uses its sibling's idle quota
//   policy: fifo                       # ParseSchedulerPolicy; checks may override it
//   options:                           # all optional
//     grace_seconds: 30                # preemption grace period (default the policy's)
//     tick_seconds: 300                # cycle period while jobs wait
//     starvation_seconds: 3600         # overrides starve=H of the policy
//     min_run_seconds: 0               # minimum service before preemption
//     las_thresholds: [3200, 32000]    # GPU-seconds (Tiresias' queues)
//     fairshare_half_life_seconds: 604800
//     lossless_preemption: false
//     restart_overhead_seconds: 60     # a resumption's time before progress (default 0)
//     checkpoint_wait_seconds: 1800    # evict at a checkpoint that comes this soon
//     stop_grace_seconds: 30           # grace on a time limit or a GPU fault (default 30)
//     placement: bestfit               # task placement profile (plugins/registry.h)
//     seed: 42
//   cluster:                           # groups of identical nodes
//     - count: 2                       # default 1
//       prefix: n                      # names n-0, n-1, ... (numbered per prefix)
//       names: [a, b]                  # or explicit names (instead of count/prefix)
//       gpus: 8
//       model: H100-80GB               # GpuCatalog name; default H100-80GB
//       mode: exclusive                # exclusive | mig | shared
//       cpu: 64                        # cores (default 128); memory default 1Ti
//       memory: 512Gi
//       numa: 1
//       nvlink: true                   # the node's GPUs share an NVLink domain
//       labels: {rack: r0, nvlink-domain: d0}
//   queues:                            # api/queue_config.h; default one queue "default"
//     cohorts: [{name: org}]
//     queues: [{name: a, cohort: org, quota: {gpu: 4}}]
//   jobs:                              # each the API's job spec (api/job_codec.h), read
//     - name: j1                       #   by the same parser, plus submit, duration,
//       queue: a                       #   repeat, failures and depends; command may be
//                                      #   left out
//       submit: 0                      # seconds
//       duration: 100                  # seconds of work when never interrupted
//       priority: 10                   # a number or a priority class name
//       replicas: 2                    # the gang: that many copies of the task
//       resources:                     # per replica
//         gpus: 8                      # whole GPUs
//         gpu_fraction: 0.5            # or gpu_milli: 500: a share of one GPU
//         gpu_memory: 10Gi
//         mig: 3g.40gb                 # one MIG instance
//         cpu: 8                       # default 1
//         memory: 64Gi                 # default 1Gi
//         gpu_model: [A100-80GB, H100-80GB]
//       topology: {scope: node, hard: true}   # node | nvlink | rack | any
//       checkpoint: {interval: 100, on_signal: true}   # seconds
//       runtime_limit: 600             # seconds: what backfill-limit trusts, and each
//                                      #   attempt is stopped there (grace: stop_grace)
//                                      #   and fails
//       preemptible: true
//       user: alice
//       restart: {max: 2, on: [failure, node-lost, gpu-fault], backoff: 60s}
//                                      # the API's restart policy (model/restart_policy.h);
//                                      #   default: 3 restarts on node-lost and gpu-fault
//       repeat: {count: 10, every: 60}  # j1-0 .. j1-9, submitted 60 s apart
//       failures:                      # task `task` (0-based, default 0) of the job's
//         - {attempt: 1, after: 50, task: 0, exit_code: 1}   # attempt-th start (default
//         - {attempt: 2, after: 10, signal: 9}   # 1) exits `after` seconds after that
//                                      #   start (default 0) with exit_code (1..255,
//                                      #   default 1) or is killed by signal (1..64),
//                                      #   unless it exited before (work done wins a tie)
//       hold: true                     # the API's field: submitted held, it does not
//                                      #   start before a release event (never without)
//       depends: "afterok:j1:j2,afterany:j3"   # scenario-only: it does not start before
//                                      #   this holds, as the API's dependency
//                                      #   (api/job_relations.h) but naming the file's
//                                      #   jobs: after (started, or ended without
//                                      #   starting), afterany (ended), afterok
//                                      #   (succeeded), afternotok (failed or cancelled),
//                                      #   each :NAME[:NAME...]; items joined by ',' must
//                                      #   all hold, by '?' one ("afternotok:j1?afterok:j2");
//                                      #   no singleton. Each name is a job submitted
//                                      #   before this one (earlier, or at the same time
//                                      #   and listed before it). The API's `dependency:`
//                                      #   (by job id) is refused here. A dependency that
//                                      #   can never hold keeps the job waiting for good
//                                      #   (never_starts, ends: unfinished). Held and
//                                      #   dependent jobs are gated from their arrival,
//                                      #   and judged again before every cycle, as the
//                                      #   controller's gates (sim/sim_gates.h): a start
//                                      #   within a cycle lets an `after` dependent go at
//                                      #   the next cycle (the tick, if nothing sooner)
//       utilisation: [{after: 0, pct: 90}, {after: 600, pct: 2}]   # how busy its GPUs
//                                      #   are from `after` into each attempt (a number:
//                                      #   all along; default 100). With a queue's idle
//                                      #   policy (queues: ... idle: {below: 5%, for:
//                                      #   10m, action: requeue | cancel}) the job is
//                                      #   sampled every 10 s of the clock and the
//                                      #   action taken as the controller takes it
//                                      #   (sim/sim_idle.h); it writes no output, so an
//                                      #   idle job is hung as well
//   events:                            # the cluster, over time
//     - {at: 100, node_lost: n-1}      # its tasks are lost (their jobs requeue for
//                                      #   node-lost), then the node leaves for good
//     - {at: 200, gpu_fault: {node: n-0, gpu: 3, xid: 79}}   # the GPU is drained; jobs
//                                      #   on it stop (stop_grace) and requeue for
//                                      #   gpu-fault (xid default 79, gpu default 0)
//     - {at: 100, release: j1}         # lifts the hold of j1 (a job with hold: true,
//                                      #   submitted by then), as `tessera release`; it
//                                      #   may start in that instant's cycle
//   expect:                            # a list; each entry one or more checks
//     - start_order: [j1, j2]          # relative order of the jobs' first starts
//                                      # (in job lists, "j*": every job named j...)
//     - starts: {j1: 0}                # first start, seconds
//     - finishes: {j1: 100}
//     - on_nodes: {j1: [n-0, n-0]}     # nodes of the first start, in task order
//     - same_node: [j1]                # every start of the job on one node
//     - same_rack: [j1]                # ... on nodes of one "rack" label
//     - preempted: {victim: by}        # or a list: preempted at least once
//     - not_preempted: [j1]
//     - preemptions_of: {j1: 1}        # exact number of preemption signals
//     - max_preemptions: 0             # over all jobs
//     - backfilled: [j2]               # first start was a backfill (not_backfilled)
//     - borrowing: [j2]                # first start borrowed quota (not_borrowing)
//     - never_starts: [j3]
//     - running_at: {150: [j1, j2]}    # exactly these jobs hold resources at t
//     - lost_work: {j1: 0}             # GPU-seconds thrown away by preemptions
//     - ends: {j1: failed, j2: succeeded}   # how the job ended: succeeded | failed |
//                                      #   cancelled | unfinished
//     - attempts: {j1: 3}              # exact number of starts
//     - restarts: {j1: 2}              # exact restarts its restart policy counted
//                                      # (in job maps too, "j*" stands for every job j...)
//     - all_finish: true
//     - quota_violations: 0            # checked for every run even when not written
//     - policy: fifo-strict            # the checks of this entry run under this
//       starts: {j2: 100}              #   policy (a list, or all-presets: each preset)
//
// Errors in a file are InvalidArgument naming the file, the YAML path and the line.
// Unknown keys and unknown job names in checks are errors (a typo must not silently
// drop a check). Thread safety: functions, no shared state.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "model/gpu_catalog.h"
#include "model/node.h"
#include "model/queue_tree.h"
#include "sim/job_sim.h"

namespace tessera {

// Overrides of the policy's scheduler options and of the simulator's options.
struct ScenarioOptions {
  std::optional<Micros> grace;
  std::optional<Micros> tick;
  std::optional<Micros> starvation_limit;
  std::optional<Micros> min_run_before_preemption;
  std::optional<std::vector<double>> las_thresholds;
  std::optional<Micros> fairshare_half_life;
  std::optional<bool> lossless_preemption;
  std::optional<Micros> restart_overhead;
  std::optional<Micros> checkpoint_wait;
  std::optional<Micros> stop_grace;
  std::string placement = "bestfit";
  uint64_t seed = 42;
};

struct ScenarioCheck {
  std::string kind;    // the key in the file, e.g. "starts"
  int line = 0;        // 1-based line of the key
  std::string policy;  // the run it applies to (a policy string)
  // The payload; which fields a kind uses follows its shape in the file.
  std::vector<std::string> names;  // lists of jobs (patterns expanded)
  // job -> a time in microseconds (starts, finishes), a count (preemptions_of,
  // attempts, restarts) or GPU-seconds (lost_work)
  std::vector<std::pair<std::string, int64_t>> values;
  // victim -> preemptor ("": any) (preempted); job -> its end, "" unfinished (ends)
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<std::pair<Micros, std::vector<std::string>>> at;  // running_at
  std::vector<std::pair<std::string, std::vector<std::string>>> nodes;  // on_nodes
  int64_t number = 0;  // max_preemptions, quota_violations
  bool flag = false;   // all_finish
};

struct Scenario {
  std::string file;  // as given to the loader, for messages
  std::string name;
  std::string description;
  std::string policy;
  ScenarioOptions options;
  std::vector<NodeSpec> nodes;
  QueueTreeSpec queues;
  std::vector<SimJob> jobs;
  std::vector<SimClusterEvent> events;
  std::map<std::string, IdlePolicy> idle;  // the queues' idle policies (api/queue_idle.h)
  std::vector<ScenarioCheck> checks;

  // The distinct policies the checks run under, the scenario's own first.
  std::vector<std::string> Policies() const;
};

// `file` only names the text in messages.
StatusOr<Scenario> ParseScenario(const std::string& yaml, const std::string& file,
                                 const GpuCatalog& catalog);
StatusOr<Scenario> LoadScenarioFile(const std::string& path, const GpuCatalog& catalog);

struct ScenarioFailure {
  std::string kind;
  int line = 0;
  std::string policy;
  std::string diff;  // "expected ..., actual ..." lines
};

struct ScenarioResult {
  std::string scenario;
  std::string file;
  int checks = 0;  // evaluated, the implicit quota checks included
  std::vector<ScenarioFailure> failures;
  // Per policy that had a failure: the event log and a per-job table.
  std::map<std::string, std::string> logs;

  bool ok() const { return failures.empty(); }
  // Every failure with its diff, then the logs; "" when all checks passed.
  std::string Report() const;
};

// What runs a scenario's jobs: the job simulator (RunJobSimulation), or another driver
// of the same core that reports through a JobRunRecorder (the controller in process).
using JobRunner = std::function<StatusOr<JobSimResult>(
    const std::vector<NodeSpec>& nodes, const QueueTreeSpec& queues,
    const std::vector<SimJob>& jobs, const JobSimOptions& options, const GpuCatalog& catalog)>;

// Runs the scenario once per policy its checks name and evaluates every check.
// An error only when a run cannot be set up (the parser catches the rest).
StatusOr<ScenarioResult> RunScenario(const Scenario& scenario, const GpuCatalog& catalog);
StatusOr<ScenarioResult> RunScenario(const Scenario& scenario, const GpuCatalog& catalog,
                                     const JobRunner& runner);

// The event log of one run, one line per event, and a table of the jobs' outcomes.
std::string FormatSimEvents(const std::vector<SimEvent>& events);
std::string FormatJobOutcomes(const JobRun& run);

}  // namespace tessera
