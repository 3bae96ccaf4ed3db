#include "sched/idle_watch.h"

#include "base/time_format.h"

#include <algorithm>

namespace tessera {

UtilWindow::UtilWindow(Micros window)
    : window_(window), width_(std::max<Micros>(1, window / kBuckets)) {}

void UtilWindow::Integrate(Micros from, Micros to, double util) {
  // Only the last window and a bucket matter: a long gap is clipped.
  from = std::max(from, to - window_ - width_);
  while (from < to) {
    const int64_t index = from / width_;
    const Micros end = std::min(to, (index + 1) * width_);
    Bucket& b = buckets_[static_cast<size_t>(index % (kBuckets + 1))];
    if (b.index != index) {
      b = Bucket{index, 0, 0};
    }
    b.integral += util * static_cast<double>(end - from);
    b.span += end - from;
    from = end;
  }
}

void UtilWindow::Add(Micros t, double util_pct) {
  util_pct = std::clamp(util_pct, 0.0, 100.0);
  if (last_t_ >= 0) {
    if (t <= last_t_) {
      return;
    }
    Integrate(last_t_, t, last_util_);
    observed_ += t - last_t_;
    integral_ += last_util_ * static_cast<double>(t - last_t_);
  }
  last_t_ = t;
  last_util_ = util_pct;
}

double UtilWindow::Mean(Micros span) const {
  if (last_t_ < 0) {
    return -1;
  }
  // Buckets holding time in (last - span, last]; a sample exactly on a boundary has not
  // integrated anything into the bucket it opens.
  const int64_t last = (last_t_ - 1) / width_;
  const int64_t first = std::max<int64_t>(0, (last_t_ - span) / width_);
  double integral = 0;
  Micros covered = 0;
  for (const Bucket& b : buckets_) {
    if (b.index >= first && b.index <= last) {
      integral += b.integral;
      covered += b.span;
    }
  }
  return covered > 0 ? integral / static_cast<double>(covered) : -1;
}

IdleWatch::Change IdleWatch::Observe(uint64_t job, int attempt, Micros run_start, Micros now,
                                     double util_pct, const IdlePolicy& policy) {
  JobWatch& w = jobs_[job];
  if (w.attempt != attempt || w.util.window() != policy.window) {
    const bool was_flagged = w.idle_since > 0;
    w = JobWatch{};
    w.attempt = attempt;
    w.util = UtilWindow(policy.window);
    w.observed_since = now;
    w.last_output = run_start;
    auto early = early_output_.find(job);
    if (early != early_output_.end()) {
      w.last_output = std::max(w.last_output, early->second);
      early_output_.erase(early);
    }
    w.util.Add(now, util_pct);
    return was_flagged ? Change::kCleared : Change::kNone;
  }
  w.util.Add(now, util_pct);
  const double below = policy.below_pct;
  if (w.idle_since > 0) {
    const double recent = w.util.Mean(policy.window / UtilWindow::kBuckets);
    if (policy.below_pct == 0 || recent >= below) {
      w.idle_since = 0;
      w.hung = false;
      w.acted = false;
      w.observed_since = now;
      return Change::kCleared;
    }
  } else {
    if (policy.below_pct == 0 || now - w.observed_since < policy.window) {
      return Change::kNone;
    }
    const double mean = w.util.Mean(policy.window);
    if (mean < 0 || mean >= below) {
      return Change::kNone;
    }
    w.idle_since = now;
  }
  const bool silent = now - w.last_output >= policy.window;
  if (silent && !w.hung) {
    w.hung = true;
    return Change::kHung;
  }
  return w.idle_since == now ? Change::kIdle : Change::kNone;
}

void IdleWatch::Output(uint64_t job, Micros now) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) {
    Micros& t = early_output_[job];
    t = std::max(t, now);
    return;
  }
  it->second.last_output = std::max(it->second.last_output, now);
}

void IdleWatch::Retain(const std::function<bool(uint64_t)>& keep) {
  std::erase_if(jobs_, [&](const auto& entry) { return !keep(entry.first); });
  std::erase_if(early_output_, [&](const auto& entry) { return !keep(entry.first); });
}

JobWatch* IdleWatch::Find(uint64_t job) {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : &it->second;
}

const JobWatch* IdleWatch::Find(uint64_t job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : &it->second;
}

double GrantUtilisation(int64_t milli, double card_pct) {
  const double share_pct = static_cast<double>(milli) / 10.0;
  return milli >= 1000 || share_pct <= 0 ? card_pct
                                         : std::min(card_pct, share_pct) / share_pct * 100.0;
}

IdleWatch::Verdict IdleWatch::Sample(uint64_t job, int attempt, Micros run_start, Micros now,
                                     double util_pct, const IdlePolicy& policy, Micros grace) {
  Verdict v;
  v.change = Observe(job, attempt, run_start, now, util_pct, policy);
  if (v.change != Change::kIdle && v.change != Change::kHung) {
    return v;
  }
  JobWatch& w = jobs_[job];
  const std::string window = FormatDuration(policy.window);
  const std::string below = std::to_string(policy.below_pct);
  v.text = w.hung ? "hung: GPU utilisation below " + below + "% and no output for " + window
                  : "idle: GPU utilisation below " + below + "% for " + window;
  if (policy.action == IdleAction::kNotify || w.acted) {
    return v;
  }
  w.acted = true;
  if (policy.action == IdleAction::kRequeue) {
    // As a preemption: the tasks get the signal and may checkpoint, then it waits again.
    v.stop = StopRequest{AttemptEnd::kRequeue, RequeueCause::kIdle, grace, "requeued: " + v.text};
  } else {
    v.stop = StopRequest{AttemptEnd::kCancel, RequeueCause::kPreempted, grace, ""};
    v.reason = v.text;
  }
  return v;
}

}  // namespace tessera
