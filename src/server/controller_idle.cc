// Idle and hung jobs (server/idle_watch.h) and efficiency: every kIdleSampleInterval
// the running jobs' utilisation is sampled from the agents' last telemetry, flags are
// raised and cleared, and the queue's action (api/queue_idle.h) is taken once per flag.
#include <cmath>
#include <iostream>

#include "api/units.h"
#include "base/time_format.h"
#include "server/controller.h"
#include "server/controller_rows.h"

namespace tessera {
namespace {

nlohmann::json Pct(double v) {
  return v < 0 ? nlohmann::json(nullptr) : nlohmann::json(std::round(v * 10) / 10);
}

std::string FlagText(const IdlePolicy& p, bool hung) {
  const std::string window = FormatDuration(p.window);
  return hung ? "hung: GPU utilisation below " + std::to_string(p.below_pct) + "% and no output for " +
                    window
              : "idle: GPU utilisation below " + std::to_string(p.below_pct) + "% for " + window;
}

}  // namespace

const IdlePolicy& Controller::IdlePolicyOf(const std::string& queue) const {
  static const IdlePolicy kDefault;
  auto it = idle_.policies.find(queue);
  return it != idle_.policies.end() ? it->second : kDefault;
}

void Controller::RefreshIdlePolicies() {
  if (idle_.policies_yaml != core_.queues_yaml()) {
    // Checked when the configuration was accepted (queue_config.cc); unreadable: defaults.
    StatusOr<std::map<std::string, IdlePolicy>> policies = QueueIdlePolicies(core_.queues_yaml());
    idle_.policies = policies.ok() ? std::move(policies).value() : std::map<std::string, IdlePolicy>{};
    idle_.policies_yaml = core_.queues_yaml();
  }
}

std::optional<double> Controller::JobUtilisationNow(const LiveJob& job, Micros now) const {
  const JobRecord& rec = jobs_.Rec(job);
  double used = 0;
  double held = 0;
  for (size_t t = 0; t < job.tasks.size() && t < rec.allocations.size(); ++t) {
    auto n = nodes_.all().find(job.tasks[t].node);
    if (n == nodes_.all().end() || !n->second.up || n->second.telemetry_at <= 0 ||
        now - n->second.telemetry_at > options_.node_timeout) {
      return std::nullopt;  // no telemetry from one of its nodes: no sample
    }
    const std::vector<GpuTelemetry>& telemetry = n->second.telemetry;
    for (const GpuGrant& g : rec.allocations[t].gpus) {
      if (g.gpu < 0 || static_cast<size_t>(g.gpu) >= telemetry.size()) {
        return std::nullopt;
      }
      if (g.is_mig()) {
        // NVML has no utilisation for a GPU in MIG mode (nor per instance): what the
        // agent sends there is not a measurement, and must not make a job look idle.
        return std::nullopt;
      }
      const GpuTelemetry& s = telemetry[static_cast<size_t>(g.gpu)];
      const double milli = static_cast<double>(g.milli.value());
      const double card = s.lost ? 0.0 : static_cast<double>(s.util_pct);
      // A share: the card's busy time capped at the share, as a fraction of the share.
      const double share_pct = milli / 10.0;
      const double util = milli >= 1000 || share_pct <= 0
                              ? card
                              : std::min(card, share_pct) / share_pct * 100.0;
      used += milli * util;
      held += milli;
    }
  }
  if (held <= 0) {
    return std::nullopt;
  }
  return used / held;
}

void Controller::WatchIdle(Micros now, Pending& out) {
  if (now < idle_.next_check) {
    return;
  }
  idle_.next_check = now + kIdleSampleInterval;
  RefreshIdlePolicies();
  // Jobs no longer running (and output of jobs never measured, e.g. without GPUs).
  idle_.watch.Retain([&](uint64_t id) REQUIRES(mu_) {
    const LiveJob* job = jobs_.Find(JobNumber(id));
    return job != nullptr && jobs_.StateOf(*job) == JobState::kRunning;
  });
  for (auto& [id, job] : jobs_.all()) {
    if (!job.durable || jobs_.StateOf(job) != JobState::kRunning) {
      continue;
    }
    const std::optional<double> util = JobUtilisationNow(job, now);
    if (!util) {
      continue;
    }
    const IdlePolicy& policy = IdlePolicyOf(job.row.queue);
    const IdleWatch::Change change = idle_.watch.Observe(
        id.value(), job.row.attempts, jobs_.Rec(job).run_start, now, *util, policy);
    JobWatch& w = *idle_.watch.Find(id.value());
    if (change == IdleWatch::Change::kCleared) {
      std::cerr << "tessera server: job " << ToString(id) << " is no longer idle\n";
    } else if (change == IdleWatch::Change::kIdle || change == IdleWatch::Change::kHung) {
      const std::string text = FlagText(policy, w.hung);
      std::cerr << "tessera server: job " << ToString(id) << " (queue " << job.row.queue
                << ") flagged " << text << "; action " << IdleActionName(policy.action) << "\n";
      if (policy.action != IdleAction::kNotify && !w.acted) {
        w.acted = true;
        if (policy.action == IdleAction::kRequeue) {
          // As a preemption: the tasks get the signal and may checkpoint, then it waits again.
          StopJob(job,
                  StopRequest{AttemptEnd::kRequeue, RequeueCause::kIdle, options_.stop_grace,
                              "requeued: " + text},
                  now, out);
        } else {
          job.row.reason = text;
          StopJob(job, StopRequest{AttemptEnd::kCancel, RequeueCause::kPreempted, options_.stop_grace, ""}, now, out);
        }
        continue;  // StopJob marked it dirty: Seal publishes its view
      }
    }
    PublishView(job);  // the window's figures change at every sample
  }
}

void Controller::IdleJson(const LiveJob& job, nlohmann::json& out) const {
  const bool running = jobs_.StateOf(job) == JobState::kRunning || jobs_.StateOf(job) == JobState::kStopping;
  const JobWatch* w = running ? idle_.watch.Find(job.row.id) : nullptr;
  if (w == nullptr || w->attempt != job.row.attempts) {
    out["idle_since"] = nullptr;
    out["hung"] = false;
    out["utilisation_window"] = nullptr;
    return;
  }
  out["idle_since"] = w->idle_since > 0 ? nlohmann::json(FormatRfc3339(w->idle_since)) : nullptr;
  out["hung"] = w->hung;
  const double observed = static_cast<double>(w->util.observed());
  out["utilisation_window"] = {
      {"mean_pct", Pct(w->util.Mean(w->util.window()))},
      {"window", FormatDuration(w->util.window())},
      {"attempt_mean_pct", Pct(observed > 0 ? w->util.integral() / observed : -1)},
      {"observed_seconds", observed / 1e6},
      {"last_output_time", controller_rows::TimeOrNull(w->last_output)}};
}

int64_t Controller::UsedGpuMilli(const LiveJob& job, int64_t gpu_milli) const {
  const JobWatch* w = idle_.watch.Find(job.row.id);
  if (w == nullptr || w->attempt != job.row.attempts || w->util.observed() <= 0) {
    return -1;
  }
  const double mean = w->util.integral() / static_cast<double>(w->util.observed());
  return std::llround(static_cast<double>(gpu_milli) * mean / 100.0);
}

void Controller::MeasureUsage(const LiveJob& job, UsageRow& row) {
  row.used_gpu_milli = UsedGpuMilli(job, row.gpu_milli);
  if (row.used_gpu_milli >= 0) {
    idle_.tenant_used_seconds[row.tenant] += static_cast<double>(row.used_gpu_milli) / 1000.0 *
                                             static_cast<double>(row.end_us - row.start_us) / 1e6;
  }
}

void Controller::WriteIdleMetrics(MetricsWriter& w, Micros now) const {
  struct PerQueue {
    int64_t idle = 0, hung = 0;
    double used = 0, held = 0;  // milli-GPU x %
  };
  std::map<std::string, PerQueue> queues;
  std::map<std::string, double> tenant_used = idle_.tenant_used_seconds;
  struct Flagged {
    std::string id, tenant, queue;
    bool hung;
    double ratio;
  };
  std::vector<Flagged> flagged;
  double cluster_used = 0, cluster_held = 0;
  for (const auto& [name, policy] : idle_.policies) {
    queues[name];
  }
  for (const auto& [id, job] : jobs_.all()) {
    if (!job.durable || (jobs_.StateOf(job) != JobState::kRunning && jobs_.StateOf(job) != JobState::kStopping)) {
      continue;
    }
    const JobRecord& rec = jobs_.Rec(job);
    const int64_t used = UsedGpuMilli(job, rec.gpu_milli);
    if (used >= 0 && now > rec.run_start) {
      tenant_used[job.row.tenant] +=
          static_cast<double>(used) / 1000.0 * static_cast<double>(now - rec.run_start) / 1e6;
    }
    const JobWatch* watch = idle_.watch.Find(id.value());
    if (watch == nullptr || watch->attempt != job.row.attempts) {
      continue;
    }
    PerQueue& q = queues[job.row.queue];
    const double mean = watch->util.Mean(watch->util.window());
    if (mean >= 0) {
      q.used += static_cast<double>(rec.gpu_milli) * mean;
      q.held += static_cast<double>(rec.gpu_milli);
    }
    if (watch->idle_since > 0) {
      ++q.idle;
      q.hung += watch->hung ? 1 : 0;
      flagged.push_back({ToString(id), job.row.tenant, job.row.queue, watch->hung,
                         std::max(0.0, mean) / 100.0});
    }
  }
  w.Family("tessera_jobs_idle", MetricType::kGauge,
           "Running jobs flagged idle (GPU utilisation below the queue's idle policy), hung ones "
           "included.");
  for (const auto& [name, q] : queues) {
    w.Sample({{"queue", name}}, static_cast<double>(q.idle));
  }
  w.Family("tessera_jobs_hung", MetricType::kGauge,
           "Running jobs flagged hung: idle GPUs and no output for the idle window.");
  for (const auto& [name, q] : queues) {
    w.Sample({{"queue", name}}, static_cast<double>(q.hung));
  }
  w.Family("tessera_queue_gpu_utilisation_ratio", MetricType::kGauge,
           "GPU utilisation of each queue's running jobs over their idle window, weighted by the "
           "GPUs they hold (0..1); queues with no measured job are left out.");
  for (const auto& [name, q] : queues) {
    if (q.held > 0) {
      w.Sample({{"queue", name}}, q.used / q.held / 100.0);
      cluster_used += q.used;
      cluster_held += q.held;
    }
  }
  w.Family("tessera_cluster_gpu_utilisation_ratio", MetricType::kGauge,
           "GPU utilisation of all running jobs over their idle window, weighted by the GPUs "
           "they hold (0..1); absent while no job is measured.");
  if (cluster_held > 0) {
    w.Sample({}, cluster_used / cluster_held / 100.0);
  }
  w.Family("tessera_flagged_job_gpu_utilisation_ratio", MetricType::kGauge,
           "One series per job flagged idle or hung (only those, to bound cardinality): its GPU "
           "utilisation over the idle window (0..1).");
  for (const Flagged& f : flagged) {
    w.Sample({{"job_id", f.id}, {"tenant", f.tenant}, {"queue", f.queue},
              {"state", f.hung ? "hung" : "idle"}},
             f.ratio);
  }
  w.Family("tessera_tenant_gpu_seconds_used_total", MetricType::kCounter,
           "GPU-seconds each tenant's jobs used (held GPU-seconds x measured utilisation), all "
           "time; intervals without telemetry count nothing.");
  for (const auto& [tenant, seconds] : tenant_used) {
    w.Sample({{"tenant", tenant}}, seconds);
  }
}

}  // namespace tessera
