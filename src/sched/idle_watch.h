// IdleWatch: per running job, the utilisation of its GPUs over a rolling window, when
// its output last grew, and whether it is flagged idle or hung under its queue's policy
// (model/idle_policy.h). Pure: the controller (server/modules/idle_module.h, from the
// agents' last telemetry) and the simulator (sim/job_sim.h, from the jobs' stated
// utilisation) feed it samples at the same instants (IdleSampleAfter) and ask the
// attempt machine for the stop each Sample returns.
//
// A job's utilisation sample is the grant-weighted mean over its GPUs of what it uses
// of each: a whole card counts the card's utilisation; a share of milli m counts
// min(card, m/10 %) / (m/10 %), the card's busy time capped at the share, so an idle
// share on a busy card is not seen as idle (no false alarms; it may miss one). A job
// holding a MIG instance is not measured: NVML gives no utilisation in MIG mode. Each sample holds until the next one
// (time-weighted). The window keeps kBuckets + 1 buckets of window / kBuckets: bounded
// memory per job whatever the window or sampling rate.
//
// Flagging: a job is idle once it has been observed for at least the policy's window
// and its mean over the window is below `below`; the flag clears when the mean over the
// last bucket (a thirtieth of the window) is back at `below` or more, and the window
// then restarts, so it is flagged again only after another full window. An idle job
// whose output has not grown for the window either is hung.
// Thread safety: none; the controller holds its lock.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "base/clock.h"
#include "model/idle_policy.h"
#include "sched/attempt_machine.h"

namespace tessera {

inline constexpr Micros kIdleSampleInterval = 10'000'000;
// What a grant of `milli` (1000: a whole card) uses of its card when the card is
// `card_pct` busy (0..100): a whole card counts the card; a share, the card's busy time
// capped at the share, as a fraction of the share (see the top of this file).
double GrantUtilisation(int64_t milli, double card_pct);
// The first sample instant after `now`: samples fall on a grid of the clock, so that
// every driver samples at the same times whenever its steps run.
inline Micros IdleSampleAfter(Micros now) {
  return (now / kIdleSampleInterval + 1) * kIdleSampleInterval;
}

class UtilWindow {
 public:
  static constexpr int kBuckets = 30;
  UtilWindow() : UtilWindow(30LL * 60 * 1'000'000) {}
  explicit UtilWindow(Micros window);
  Micros window() const { return window_; }
  // The utilisation at `t` (0..100), held until the next sample. Earlier times are ignored.
  void Add(Micros t, double util_pct);
  // Time-weighted mean over the last `span` up to the last sample (bucket-grained: it
  // may reach one bucket further back); -1 when nothing was observed in it.
  double Mean(Micros span) const;
  // Since the first sample: the time observed and the integral of utilisation (%·µs).
  Micros observed() const { return observed_; }
  double integral() const { return integral_; }
  bool empty() const { return last_t_ < 0; }

 private:
  struct Bucket {
    int64_t index = -1;
    double integral = 0;  // %·µs
    Micros span = 0;
  };
  void Integrate(Micros from, Micros to, double util);
  Micros window_;
  Micros width_;
  std::array<Bucket, kBuckets + 1> buckets_{};
  Micros last_t_ = -1;
  double last_util_ = 0;
  Micros observed_ = 0;
  double integral_ = 0;
};

struct JobWatch {
  int attempt = -1;
  UtilWindow util;
  Micros observed_since = 0;  // first sample of the attempt, or the last recovery
  Micros last_output = 0;     // its output last grew (or the attempt's start)
  Micros idle_since = 0;      // 0: not idle
  bool hung = false;
  bool acted = false;         // the queue's action was taken for this flag
};

class IdleWatch {
 public:
  enum class Change { kNone, kIdle, kHung, kCleared };
  // A sample of job `job`'s attempt `attempt` (started at `run_start`) at `now`: its
  // utilisation 0..100. A new attempt (or a changed window) starts afresh.
  Change Observe(uint64_t job, int attempt, Micros run_start, Micros now, double util_pct,
                 const IdlePolicy& policy);
  // Observe, and what the change asks of the attempt machine: the queue's action
  // (requeue as cause idle, or cancel; `grace` for the tasks), once per flag. The
  // text says what was seen ("idle: GPU utilisation below 5% for 30m", "hung: ...").
  struct Verdict {
    Change change = Change::kNone;
    std::string text;                 // kIdle, kHung: the flag
    std::optional<StopRequest> stop;  // the action, when one is due now
    std::string reason;               // with a cancel: the job's reason
  };
  Verdict Sample(uint64_t job, int attempt, Micros run_start, Micros now, double util_pct,
                 const IdlePolicy& policy, Micros grace);
  // The job's output grew at `now`.
  void Output(uint64_t job, Micros now);
  void Forget(uint64_t job) {
    jobs_.erase(job);
    early_output_.erase(job);
  }
  // Forgets every job (watched, or with output only) for which keep(job) is false.
  void Retain(const std::function<bool(uint64_t)>& keep);
  JobWatch* Find(uint64_t job);
  const JobWatch* Find(uint64_t job) const;
  const std::map<uint64_t, JobWatch>& all() const { return jobs_; }

 private:
  std::map<uint64_t, JobWatch> jobs_;
  std::map<uint64_t, Micros> early_output_;  // output before the first sample
};

}  // namespace tessera
