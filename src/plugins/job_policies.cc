#include "plugins/job_policies.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "base/strings.h"

namespace tessera {
namespace {

double Seconds(Micros t) { return static_cast<double>(t) / 1e6; }

class FifoOrder final : public JobOrderPlugin {
 public:
  explicit FifoOrder(bool by_priority) : by_priority_(by_priority) {}
  std::string_view name() const override { return by_priority_ ? "priority" : "fifo"; }
  double Key(const JobRecord& job, Micros /*now*/) const override {
    return Seconds(job.spec.submit_time);
  }
  bool by_priority() const override { return by_priority_; }

 private:
  bool by_priority_;
};

// Tiresias' 2D-LAS: queue by attained GPU-seconds, FIFO within a queue.
class LasOrder : public JobOrderPlugin {
 public:
  explicit LasOrder(std::vector<double> thresholds) : thresholds_(std::move(thresholds)) {}
  std::string_view name() const override { return "las"; }
  double Key(const JobRecord& job, Micros /*now*/) const override {
    return Level(job) * 1e12 + Seconds(job.spec.submit_time);
  }

 protected:
  int Level(const JobRecord& job) const {
    int level = 0;
    for (double t : thresholds_) {
      level += job.attained_gpu_seconds >= t ? 1 : 0;
    }
    return level;
  }

 private:
  std::vector<double> thresholds_;
};

class SrtfOrder final : public JobOrderPlugin {
 public:
  std::string_view name() const override { return "srtf"; }
  double Key(const JobRecord& job, Micros now) const override {
    Micros total = job.oracle_runtime >= 0 ? job.oracle_runtime : job.predicted_runtime;
    return Seconds(job.RemainingBy(total, now));
  }
};

// Shortest predicted remaining GPU-time first. A job that outlived its prediction
// keeps a tenth of it as its remaining estimate. With `no_guess`, a job the predictor
// knew nothing of when it came (JobRecord::runtime_guessed: its prediction is only the
// user's limit) is ranked by what is known of it, its size (GPUs^exponent), then by
// arrival (the scheduler's tie-break), ahead of the jobs ranked by predictions (they
// came later, once jobs had finished: none of them can starve it).
class SjfOrder final : public JobOrderPlugin {
 public:
  SjfOrder(double gpu_exponent, bool no_guess) : gpu_exponent_(gpu_exponent), no_guess_(no_guess) {}
  std::string_view name() const override { return "sjf"; }
  double Key(const JobRecord& job, Micros now) const override {
    const double width = std::max<double>(1.0, static_cast<double>(job.gpu_milli) / 1000.0);
    const double size = std::pow(width, gpu_exponent_);
    if (no_guess_ && job.runtime_guessed) {
      return -1e11 + std::min(size, 1e10);  // below every predicted key (>= 0)
    }
    const Micros predicted = job.predicted_runtime > 0 ? job.predicted_runtime
                                                       : job.spec.runtime_limit;
    const Micros remaining = std::max(job.RemainingBy(predicted, now), predicted / 10);
    return Seconds(remaining) * size;
  }

 private:
  double gpu_exponent_;  // 1: GPU-time; 0: time only
  bool no_guess_;
};

// LAS levels first, as Tiresias (robust when predictions are wrong: a long job
// cannot stay ahead of new ones), then within a level shortest predicted remaining
// GPU-time first instead of submission order.
class LasSjfOrder final : public LasOrder {
 public:
  LasSjfOrder(std::vector<double> thresholds, double gpu_exponent, bool no_guess)
      : LasOrder(std::move(thresholds)), sjf_(gpu_exponent, no_guess) {}
  std::string_view name() const override { return "las-sjf"; }
  double Key(const JobRecord& job, Micros now) const override {
    // sjf keys are seconds (or, unguessed, in [-1e11, 0)): far below the 1e12 between levels.
    return Level(job) * 1e12 + std::min(sjf_.Key(job, now), 1e11);
  }

 private:
  SjfOrder sjf_;
};

class FairShareOrder final : public QueueOrderPlugin {
 public:
  std::string_view name() const override { return "fairshare"; }
  double Key(QueueId q, const QueueUsage& usage) const override {
    return -usage.FairShareFactor(q);
  }
};

class DrfOrder final : public QueueOrderPlugin {
 public:
  std::string_view name() const override { return "drf"; }
  double Key(QueueId q, const QueueUsage& usage) const override { return usage.DominantShare(q); }
};

// Slurm's multifactor priority with weights for age and fair share only:
// P = w_age * min(age / max_age, 1) + w_fs * F. Ordering by P is ordering by
// submit - (w_fs / w_age) * max_age * F (ignoring the age cap), an additive key.
class SlurmOrder final : public QueueOrderPlugin {
 public:
  std::string_view name() const override { return "slurm"; }
  double Key(QueueId q, const QueueUsage& usage) const override {
    constexpr double kMaxAgeSeconds = 7 * 24 * 3600.0;  // PriorityMaxAge=7-0
    constexpr double kWeightRatio = 10.0;               // PriorityWeightFairshare / Age
    return -kWeightRatio * kMaxAgeSeconds * usage.FairShareFactor(q);
  }
  bool additive() const override { return true; }
};

// N of a "key=N" token, N a count in 1..1000.
StatusOr<int> CountAfter(std::string_view token, std::string_view key) {
  StatusOr<int64_t> n = ParseInt64(token.substr(key.size()));
  if (!n.ok() || n.value() <= 0 || n.value() > 1000) {
    return InvalidArgumentError(std::string(key) + "N needs N in 1..1000, got '" +
                                std::string(token) + "'");
  }
  return static_cast<int>(n.value());
}

Status ApplyToken(std::string_view token, SchedulerPolicy* p, bool* have_order) {
  auto set_order = [&](std::string_view order) -> Status {
    if (*have_order) {
      return InvalidArgumentError("policy '" + p->name + "' names two job orders");
    }
    *have_order = true;
    p->job_order = std::string(order);
    return Status::Ok();
  };
  SchedulerOptions& o = p->options;
  if (token == "fifo" || token == "priority" || token == "las" || token == "srtf" ||
      token == "sjf" || token == "las-sjf") {
    TESSERA_RETURN_IF_ERROR(set_order(token));
    if (token == "sjf" || token == "las-sjf") {
      p->uses_predictor = true;
    }
    if (token == "srtf") {
      o.runtime_source = RuntimeSource::kOracle;
    }
    return Status::Ok();
  }
  if (token == "fairshare" || token == "drf" || token == "slurm") {
    if (!p->queue_order.empty()) {
      return InvalidArgumentError("policy '" + p->name + "' names two queue orders");
    }
    p->queue_order = std::string(token);
    return Status::Ok();
  }
  if (token == "strict") {
    o.strict_fifo = true;
  } else if (token == "no-borrow") {
    o.borrowing = false;
  } else if (token == "reclaim") {
    o.preempt_reclaim = true;
  } else if (token == "preempt") {
    o.preempt_priority = true;
  } else if (token == "preempt-las") {
    o.preempt_las = true;
  } else if (token == "preempt-srtf") {
    o.preempt_srtf = true;
  } else if (token == "backfill") {
    o.backfill = Backfill::kEasy;
    o.runtime_source = RuntimeSource::kPredicted;
    p->uses_predictor = true;
  } else if (token == "backfill-limit") {
    o.backfill = Backfill::kEasy;
    o.runtime_source = RuntimeSource::kUserLimit;
  } else if (token == "ckpt-grace") {
    o.checkpoint_wait = 30LL * 60 * 1'000'000;
  } else if (StartsWith(token, "sjf-width=")) {
    char* end = nullptr;
    const std::string value(token.substr(10));
    const double e = std::strtod(value.c_str(), &end);
    if (end == value.c_str() || *end != '\0' || e < 0 || e > 2) {
      return InvalidArgumentError("sjf-width=E needs E in 0..2, got '" + std::string(token) + "'");
    }
    o.sjf_gpu_exponent = e;
  } else if (StartsWith(token, "amortize=")) {
    TESSERA_ASSIGN_OR_RETURN(o.restart_amortization, CountAfter(token, "amortize="));
  } else if (token == "victims-las") {
    o.victims_by_cost = false;
  } else if (token == "las-protect") {
    o.las_protected_level = static_cast<int>(o.las_thresholds.size());
  } else if (token == "no-guess") {
    o.sjf_no_guess = true;
  } else if (token == "resume-first") {
    o.resume_first = true;
  } else if (token == "fair-users") {
    o.user_fair_share = true;
  } else if (StartsWith(token, "max-preempt=")) {
    TESSERA_ASSIGN_OR_RETURN(o.max_preemptions_per_job, CountAfter(token, "max-preempt="));
  } else if (StartsWith(token, "starve=")) {
    StatusOr<int64_t> hours = ParseInt64(token.substr(7));
    if (!hours.ok() || hours.value() <= 0) {
      return InvalidArgumentError("starve=H needs a positive number of hours, got '" +
                                  std::string(token) + "'");
    }
    o.starvation_limit = hours.value() * 3600 * 1'000'000;
  } else {
    return InvalidArgumentError(
        "unknown policy component '" + std::string(token) +
        "'; orders: fifo, priority, las, las-sjf, srtf, sjf, fairshare, drf, slurm; features: "
        "strict, no-borrow, reclaim, preempt, preempt-las, preempt-srtf, backfill, "
        "backfill-limit, ckpt-grace, victims-las, las-protect, resume-first, fair-users, "
        "no-guess, amortize=N, max-preempt=N, sjf-width=E, starve=H; presets: " +
        Join(SchedulerPresetNames(), ", "));
  }
  return Status::Ok();
}

StatusOr<SchedulerPolicy> Combine(std::string_view name, std::string_view spec) {
  SchedulerPolicy p;
  p.name = std::string(name);
  bool have_order = false;
  for (std::string_view token : Split(spec, '+')) {
    TESSERA_RETURN_IF_ERROR(ApplyToken(Trim(token), &p, &have_order));
  }
  return p;
}

}  // namespace

const std::vector<std::string>& SchedulerPresetNames() {
  static const std::vector<std::string> kNames = {
      "fifo", "fifo-strict", "static-vc", "priority", "fairshare",
      "drf",  "slurm",       "tiresias",  "srtf",     "tessera"};
  return kNames;
}

StatusOr<SchedulerPolicy> ParseSchedulerPolicy(std::string_view spec) {
  spec = Trim(spec);
  if (spec.empty()) {
    return InvalidArgumentError("empty policy name");
  }
  StatusOr<SchedulerPolicy> p = InvalidArgumentError("");
  if (spec == "fifo") {
    p = Combine(spec, "fifo");
  } else if (spec == "fifo-strict") {
    p = Combine(spec, "fifo+strict");
  } else if (spec == "static-vc") {
    p = Combine(spec, "fifo+no-borrow");
  } else if (spec == "priority") {
    p = Combine(spec, "priority+preempt");
  } else if (spec == "fairshare") {
    p = Combine(spec, "fairshare+priority");
  } else if (spec == "drf") {
    p = Combine(spec, "drf+priority");
  } else if (spec == "slurm") {
    p = Combine(spec, "slurm+priority+backfill-limit");
  } else if (spec == "tiresias") {
    p = Combine(spec, "las+preempt-las+victims-las");
  } else if (spec == "srtf") {
    p = Combine(spec, "srtf+preempt-srtf");
    if (p.ok()) {
      p.value().options.lossless_preemption = true;
    }
  } else if (spec == "tessera") {
    // Tiresias' least-attained-service levels first (robust when predictions are
    // wrong), shortest predicted remaining GPU-time (GPUs counted by their square root)
    // within a level, preemption of more-served jobs (most served first, as Tiresias)
    // only once a victim has run ten times its restart's cost (the overhead and the
    // work its eviction would lose: never a job that would lose all of it), quota
    // reclaim, priority preemption inside a queue, and victims evicted at a checkpoint
    // that comes within 30 min. Why each, and what was dropped: docs/job-simulator.md, "The default".
    p = Combine(spec,
                "las-sjf+sjf-width=0.5+preempt-las+victims-las+reclaim+preempt+ckpt-grace+"
                "amortize=10");
  } else {
    p = Combine(spec, spec);
  }
  return p;
}

StatusOr<std::unique_ptr<JobOrderPlugin>> MakeJobOrder(std::string_view name,
                                                      const SchedulerOptions& options) {
  if (name == "fifo") return std::unique_ptr<JobOrderPlugin>(new FifoOrder(false));
  if (name == "priority") return std::unique_ptr<JobOrderPlugin>(new FifoOrder(true));
  if (name == "las") return std::unique_ptr<JobOrderPlugin>(new LasOrder(options.las_thresholds));
  if (name == "srtf") return std::unique_ptr<JobOrderPlugin>(new SrtfOrder());
  if (name == "sjf") {
    return std::unique_ptr<JobOrderPlugin>(
        new SjfOrder(options.sjf_gpu_exponent, options.sjf_no_guess));
  }
  if (name == "las-sjf") {
    return std::unique_ptr<JobOrderPlugin>(
        new LasSjfOrder(options.las_thresholds, options.sjf_gpu_exponent, options.sjf_no_guess));
  }
  return InvalidArgumentError("unknown job order '" + std::string(name) +
                              "'; known: fifo, priority, las, las-sjf, srtf, sjf");
}

StatusOr<std::unique_ptr<QueueOrderPlugin>> MakeQueueOrder(std::string_view name) {
  if (name == "fairshare") return std::unique_ptr<QueueOrderPlugin>(new FairShareOrder());
  if (name == "drf") return std::unique_ptr<QueueOrderPlugin>(new DrfOrder());
  if (name == "slurm") return std::unique_ptr<QueueOrderPlugin>(new SlurmOrder());
  return InvalidArgumentError("unknown queue order '" + std::string(name) +
                              "'; known: fairshare, drf, slurm");
}

SchedulerPolicy WithServerBounds(SchedulerPolicy policy, Micros min_run_before_reclaim,
                                 Micros victim_hold) {
  policy.options.min_run_before_reclaim =
      std::max(policy.options.min_run_before_reclaim, min_run_before_reclaim);
  policy.options.victim_hold = std::max(policy.options.victim_hold, victim_hold);
  return policy;
}

}  // namespace tessera
