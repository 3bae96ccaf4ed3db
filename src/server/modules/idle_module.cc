#include "server/modules/idle_module.h"

#include <cmath>
#include <iostream>
#include <limits>
#include <set>
#include <vector>

#include "api/units.h"
#include "base/time_format.h"
#include "server/job_rows.h"
#include "server/modules/usage_report.h"
#include "server/node_registry.h"

namespace tessera {
namespace {

nlohmann::json Pct(double v) {
  return v < 0 ? nlohmann::json(nullptr) : nlohmann::json(std::round(v * 10) / 10);
}

}  // namespace

void IdleModule::OnStoredUsage(const std::vector<UsageRow>& rows) {
  for (const UsageRow& u : rows) {
    if (u.used_gpu_milli >= 0) {
      tenant_used_seconds_[u.tenant] += GpuSeconds(u.used_gpu_milli, u.start_us, u.end_us);
    }
  }
}

const IdlePolicy& IdleModule::PolicyOf(const std::string& queue) const {
  static const IdlePolicy kDefault;
  auto it = policies_.find(queue);
  return it != policies_.end() ? it->second : kDefault;
}

void IdleModule::RefreshPolicies(const std::string& queues_yaml) {
  if (policies_yaml_ != queues_yaml) {
    // Checked when the configuration was accepted (queue_config.cc); unreadable: defaults.
    StatusOr<std::map<std::string, IdlePolicy>> policies = QueueIdlePolicies(queues_yaml);
    policies_ = policies.ok() ? std::move(policies).value() : std::map<std::string, IdlePolicy>{};
    policies_yaml_ = queues_yaml;
  }
}

std::optional<double> IdleModule::UtilisationNow(const ModuleStep& step, const JobFacts& job) {
  if (job.record == nullptr) {
    return std::nullopt;
  }
  const JobRecord& rec = *job.record;
  double used = 0;
  double held = 0;
  for (size_t t = 0; t < job.tasks && t < rec.allocations.size(); ++t) {
    const NodeInfo* node = step.Node(job.task_node(t));
    if (node == nullptr || !node->up || node->telemetry_at <= 0 ||
        step.now() - node->telemetry_at > step.node_timeout()) {
      return std::nullopt;  // no telemetry from one of its nodes: no sample
    }
    const std::vector<GpuTelemetry>& telemetry = node->telemetry;
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
      used += milli * GrantUtilisation(g.milli.value(), card);
      held += milli;
    }
  }
  if (held <= 0) {
    return std::nullopt;
  }
  return used / held;
}

void IdleModule::BeforeCycle(ModuleStep& step) {
  const Micros now = step.now();
  if (now < next_check_) {
    return;
  }
  next_check_ = IdleSampleAfter(now);  // on the grid the simulator samples on too
  RefreshPolicies(step.queues_yaml());
  std::set<uint64_t> running;
  step.ForEachRunningJob([&](const JobFacts& job) {
    if (job.state != JobState::kRunning) {
      return;
    }
    running.insert(job.id.value());
    const std::optional<double> util = UtilisationNow(step, job);
    if (!util) {
      return;
    }
    const IdlePolicy& policy = PolicyOf(job.queue);
    const IdleWatch::Verdict v = watch_.Sample(job.id.value(), job.attempt, job.record->run_start,
                                               now, *util, policy, step.stop_grace());
    if (v.change == IdleWatch::Change::kCleared) {
      std::cerr << "tessera server: job " << ToString(job.id) << " is no longer idle\n";
    } else if (!v.text.empty()) {
      std::cerr << "tessera server: job " << ToString(job.id) << " (queue " << job.queue
                << ") flagged " << v.text << "; action " << IdleActionName(policy.action) << "\n";
    }
    if (v.stop) {
      step.Stop(job.id, *v.stop, v.reason);
      return;  // the stop republishes its view
    }
    step.Republish(job.id);  // the window's figures change at every sample
  });
  // Jobs no longer running (and output of jobs never measured, e.g. without GPUs).
  watch_.Retain([&](uint64_t id) { return running.count(id) > 0; });
}

void IdleModule::DescribeJob(const JobFacts& job, nlohmann::json& out) const {
  const bool running = job.state == JobState::kRunning || job.state == JobState::kStopping;
  const JobWatch* w = running ? watch_.Find(job.id.value()) : nullptr;
  if (w == nullptr || w->attempt != job.attempt) {
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
      {"last_output_time", job_rows::TimeOrNull(w->last_output)}};
}

void IdleModule::DescribeQueue(const std::string& queue, const std::string& queues_yaml,
                               nlohmann::json& out) {
  RefreshPolicies(queues_yaml);
  out["idle"] = IdlePolicyJson(PolicyOf(queue));
}

int64_t IdleModule::UsedGpuMilli(uint64_t job, int attempt, int64_t gpu_milli) const {
  const JobWatch* w = watch_.Find(job);
  if (w == nullptr || w->attempt != attempt || w->util.observed() <= 0) {
    return -1;
  }
  const double mean = w->util.integral() / static_cast<double>(w->util.observed());
  return std::llround(static_cast<double>(gpu_milli) * mean / 100.0);
}

void IdleModule::OnUsage(UsageRow& row, int attempt, bool ended) {
  row.used_gpu_milli = UsedGpuMilli(row.job, attempt, row.gpu_milli);
  if (ended && row.used_gpu_milli >= 0) {
    tenant_used_seconds_[row.tenant] += GpuSeconds(row.used_gpu_milli, row.start_us, row.end_us);
  }
}

void IdleModule::WriteMetrics(const ModuleStep& step, MetricsWriter& w) const {
  struct PerQueue {
    int64_t idle = 0, hung = 0;
    double used = 0, held = 0;  // milli-GPU x %
  };
  std::map<std::string, PerQueue> queues;
  std::map<std::string, double> tenant_used = tenant_used_seconds_;
  struct Flagged {
    std::string id, tenant, queue;
    bool hung;
    double ratio;
  };
  std::vector<Flagged> flagged;
  double cluster_used = 0, cluster_held = 0;
  for (const auto& [name, policy] : policies_) {
    queues[name];
  }
  const Micros now = step.now();
  step.ForEachRunningJob([&](const JobFacts& job) {
    const JobRecord& rec = *job.record;
    const int64_t used = UsedGpuMilli(job.id.value(), job.attempt, rec.gpu_milli);
    if (used >= 0 && now > rec.run_start) {
      tenant_used[job.tenant] += GpuSeconds(used, rec.run_start, now);
    }
    const JobWatch* watch = watch_.Find(job.id.value());
    if (watch == nullptr || watch->attempt != job.attempt) {
      return;
    }
    PerQueue& q = queues[job.queue];
    const double mean = watch->util.Mean(watch->util.window());
    if (mean >= 0) {
      q.used += static_cast<double>(rec.gpu_milli) * mean;
      q.held += static_cast<double>(rec.gpu_milli);
    }
    if (watch->idle_since > 0) {
      ++q.idle;
      q.hung += watch->hung ? 1 : 0;
      flagged.push_back({ToString(job.id), job.tenant, job.queue, watch->hung,
                         std::max(0.0, mean) / 100.0});
    }
  });
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
