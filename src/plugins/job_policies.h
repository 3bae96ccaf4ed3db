// Job ordering plugins and the named scheduling policies of the job simulator.
//
// Orders (plugins of sched/job_order.h):
//   job orders:   fifo (submission), priority (classes, then submission), las
//                 (Tiresias' discretised two-dimensional least attained service),
//                 srtf (true remaining time: an oracle), sjf (predicted remaining
//                 GPU-time: the learned runtime minus progress, times GPUs)
//   queue orders: fairshare (Slurm's classic 2^(-U/S), usage decayed with a half-life),
//                 drf (dominant resource share), slurm (multifactor: age plus fair share)
// A policy is a preset name or a '+'-joined combination of one job order, at most one
// queue order and features:
//   strict          a job blocked by capacity blocks its queue (strict FIFO)
//   no-borrow       queues are confined to their nominal quota
//   reclaim         preempt borrowers to give queues back their nominal quota
//   preempt         preempt lower priority jobs of the same queue
//   preempt-las     preempt jobs with more attained service (by LAS level)
//   preempt-srtf    preempt jobs with more remaining time (oracle)
//   backfill        EASY backfill trusting learned runtime predictions
//   backfill-limit  EASY backfill trusting the users' runtime limits
//   ckpt-grace      a victim whose next periodic checkpoint comes within 30 min is
//                   evicted right after it, losing nothing; others after the 30 s grace
//   victims-las     victims most-served first (by LAS level), then the most
//                   recently started, as Tiresias does (default: by what they lose)
//   las-protect     preempt-las spares jobs in the last LAS level (proven long)
//   resume-first    preempted jobs resume before jobs that never ran
//   fair-users      within a queue, the jobs of the user with the least decayed GPU usage
//                   first (Slurm's fair tree below the queues; equal shares), the job
//                   order among one user's jobs
//   amortize=N      LAS/SRTF preempt a job only after it ran N times its restart's cost
//                   (the overhead plus the work its eviction would lose)
//   max-preempt=N   a job preempted N times is not preempted again
//   sjf-width=E     sjf counts a job's GPUs as GPUs^E (default 1: GPU-time)
//   no-guess        sjf/las-sjf rank a job the runtime predictor knew nothing of (no
//                   history: its prediction would be the user's limit) by its size
//                   (GPUs^E), then arrival, ahead of the jobs ranked by predictions
//   starve=H        jobs waiting over H hours go first (no starvation)
// e.g. "fairshare+fifo+reclaim+backfill".
// Thread safety: functions; the plugins are immutable.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "sched/job_order.h"
#include "sched/job_scheduler.h"

namespace tessera {

struct SchedulerPolicy {
  std::string name;
  std::string job_order = "fifo";
  std::string queue_order;  // "": none
  SchedulerOptions options;
  Micros fairshare_half_life = 7LL * 24 * 3600 * 1'000'000;  // Slurm's default, 7 days
  bool uses_predictor = false;  // the simulator trains a RuntimePredictor for it
};

// The presets: fifo, fifo-strict, static-vc, priority, fairshare, drf, slurm,
// tiresias, srtf, tessera.
const std::vector<std::string>& SchedulerPresetNames();
StatusOr<SchedulerPolicy> ParseSchedulerPolicy(std::string_view spec);

// A named policy as the live controller runs it: a job runs at least
// `min_run_before_reclaim` before reclaim or LAS may preempt it (live jobs restart from
// their last checkpoint, so the simulator's "at once" would thrash), and an evicted job
// waits up to `victim_hold` for the job it was evicted for to start. The scenario suite
// and the what-if replay of a recorded history run under these bounds too.
SchedulerPolicy WithServerBounds(SchedulerPolicy policy, Micros min_run_before_reclaim,
                                 Micros victim_hold);

StatusOr<std::unique_ptr<JobOrderPlugin>> MakeJobOrder(std::string_view name,
                                                      const SchedulerOptions& options);
StatusOr<std::unique_ptr<QueueOrderPlugin>> MakeQueueOrder(std::string_view name);

}  // namespace tessera
