// What the controller tells Prometheus (/metrics, /metrics/gpus) and the dashboard's
// usage charts (UsageSeries).
#include <algorithm>
#include <limits>
#include <set>

#include "api/node_labels.h"
#include "base/time_format.h"
#include "server/controller.h"
#include "server/modules/usage_report.h"

namespace tessera {
namespace {

// A quota resource's value in the unit its metric uses: GPUs and CPUs whole,
// memory in bytes.
double QuotaValue(const ResourceName& r, int64_t value) {
  switch (r.kind) {
    case ResourceKind::kGpu:
    case ResourceKind::kCpu:
      return static_cast<double>(value) / 1000.0;
    case ResourceKind::kGpuMemory:
    case ResourceKind::kMemory:
      return static_cast<double>(value) * 1024.0 * 1024.0;
  }
  return static_cast<double>(value);
}

struct GpuHolder {
  JobNumber job;
  std::string tenant;
  int mig_start;  // -1: not a MIG grant
};

}  // namespace

// Queues' quota, the agents, and each GPU's allocation and drain (mu_ held).
void Controller::WriteQuotaAndGpus(MetricsWriter& w) const {
  w.Family("tessera_queue_quota", MetricType::kGauge,
           "Quota per queue or cohort and resource (GPUs, CPUs, bytes): nominal, borrowing "
           "limit, in use, and borrowed (in use above nominal).");
  const bool ledger = core_.quota() != nullptr && !core_.rebuild_pending();
  for (size_t i = 0; i < core_.tree().size(); ++i) {
    const QueueId q(i);
    for (size_t r = 0; r < core_.tree().resources().size(); ++r) {
      const ResourceName& res = core_.tree().resources()[r];
      const Quota& quota = core_.tree().quota(q, r);
      const int64_t used = ledger ? core_.quota()->Usage(q, r) : 0;
      MetricLabels labels = {{"queue", core_.tree().spec(q).name},
                             {"resource", ResourceNameString(res, *catalog_)},
                             {"kind", ""}};
      auto sample = [&](const char* kind, int64_t value) {
        labels[2].second = kind;
        w.Sample(labels, QuotaValue(res, value));
      };
      sample("nominal", quota.nominal);
      if (quota.borrowing_limit) {
        sample("borrowing_limit", *quota.borrowing_limit);
      }
      sample("used", used);
      sample("borrowed", std::max<int64_t>(0, used - quota.nominal));
    }
  }

  int64_t up = 0, down = 0;
  for (const auto& [name, node] : nodes_.all()) {
    (node.up ? up : down) += 1;
  }
  w.Family("tessera_agents", MetricType::kGauge, "Nodes whose agent is up or down.");
  w.Sample({{"state", "up"}}, static_cast<double>(up));
  w.Sample({{"state", "down"}}, static_cast<double>(down));
  // Join on node to group any per-node series by rack, block or NVLink domain.
  w.Family("tessera_node_info", MetricType::kGauge,
           "1 for each known node, with its labels ('-' and '.' in keys become '_').");
  for (const auto& [name, node] : nodes_.all()) {
    MetricLabels labels = {{"node", name}};
    std::set<std::string> seen = {"node"};
    for (const auto& [key, value] : node.inventory.spec.labels) {
      std::string metric_key = MetricLabelName(key);
      if (seen.insert(metric_key).second) {  // "a-b" and "a_b": the first one
        labels.emplace_back(std::move(metric_key), value);
      }
    }
    w.Sample(labels, 1);
  }

  // GPU allocation per GPU of the nodes that are up, from the scheduler's ledgers.
  double free = 0, allocated = 0, drained = 0;
  struct GpuRow {
    MetricLabels labels;
    double ratio;
    const DrainInfo* drain;
  };
  std::vector<GpuRow> rows;
  for (const auto& [name, node] : nodes_.all()) {
    if (!node.up || core_.state() == nullptr || core_.rebuild_pending()) {
      continue;
    }
    StatusOr<NodeId> id = core_.state()->FindNode(name);
    if (!id.ok()) {
      continue;
    }
    const NodeLedger& ledger_node = core_.state()->node(id.value());
    for (int g = 0; g < ledger_node.gpu_count(); ++g) {
      const double used = static_cast<double>(ledger_node.gpus()[static_cast<size_t>(g)].used_milli().value()) / 1000.0;
      auto d = node.gpu_drains.find(g);
      const DrainInfo* drain = d != node.gpu_drains.end() ? &d->second : node.drain ? &*node.drain : nullptr;
      allocated += used;
      (drain != nullptr ? drained : free) += 1.0 - used;
      const size_t gi = static_cast<size_t>(g);
      rows.push_back(GpuRow{{{"Hostname", name},
                             {"gpu", std::to_string(g)},
                             {"UUID", gi < node.inventory.gpu_uuids.size() ? node.inventory.gpu_uuids[gi] : ""}},
                            used, drain});
    }
  }
  w.Family("tessera_gpus", MetricType::kGauge,
           "GPUs of the nodes that are up, in GPUs: allocated, free, and unallocated but drained.");
  w.Sample({{"state", "allocated"}}, allocated);
  w.Sample({{"state", "free"}}, free);
  w.Sample({{"state", "drained"}}, drained);
  w.Family("tessera_gpu_allocated_ratio", MetricType::kGauge,
           "Fraction of each GPU allocated to jobs (shares and MIG slices by their compute).");
  for (const GpuRow& r : rows) {
    w.Sample(r.labels, r.ratio);
  }
  w.Family("tessera_gpu_drained", MetricType::kGauge,
           "1 for each GPU that takes no new work, with why (kind: admin, lost, xid, ecc, temperature).");
  for (const GpuRow& r : rows) {
    if (r.drain != nullptr) {
      MetricLabels labels = r.labels;
      labels.emplace_back("kind", r.drain->kind);
      labels.emplace_back("reason", r.drain->reason);
      w.Sample(labels, 1);
    }
  }
}

// The scheduling loop's and the placement model's counters. mu_ held.
void Controller::WriteSchedulerMetrics(MetricsWriter& w) const {
  w.Family("tessera_scheduler_cycles_total", MetricType::kCounter, "Scheduling cycles run.");
  w.Sample({}, static_cast<double>(counters_.cycles.load()));
  w.Family("tessera_scheduler_report_cycles_total", MetricType::kCounter,
           "Core cycles run on an agent's report of an exit, so that the report and the starts "
           "it allows share one commit.");
  w.Sample({}, static_cast<double>(counters_.report_cycles));
  w.Family("tessera_scheduler_rebuilds_total", MetricType::kCounter,
           "Times the scheduler's cluster was built afresh (first cycle, queue changes); node "
           "events change it in place.");
  w.Sample({}, static_cast<double>(core_.rebuilds()));
  w.Family("tessera_placement_tasks_observed_total", MetricType::kCounter,
           "Submitted tasks the placement's workload model has learned from (kept across "
           "restarts).");
  w.Sample({}, static_cast<double>(core_.learner().observed()));
  w.Family("tessera_placement_workload_models_total", MetricType::kCounter,
           "Times the placement's typical tasks were remade because the submitted shapes moved "
           "(since the controller started).");
  w.Sample({}, static_cast<double>(core_.learner().models_made()));
  w.Family("tessera_placement_typical_tasks", MetricType::kGauge,
           "Task shapes in the placement's workload model (0: bestfit until a task is seen).");
  w.Sample({}, static_cast<double>(
                   core_.learner().model() == nullptr
                       ? 0
                       : core_.learner().model()->workload().tasks.size()));
  w.Family("tessera_scheduler_invariant_breaches_total", MetricType::kCounter,
           "Cycles after which the core's ledger or quota invariants did not hold (a bug: "
           "alert on any).");
  w.Sample({}, static_cast<double>(counters_.invariant_breaches));
  w.Family("tessera_scheduler_cycle_duration_seconds", MetricType::kHistogram,
           "Wall time of a scheduling cycle, including making its decisions durable.");
  w.Sample({}, counters_.cycle_seconds.Read());
  w.Family("tessera_scheduler_decisions_total", MetricType::kCounter,
           "Scheduling decisions: jobs started, preempted and requeued.");
  for (const char* d : {"start", "preempt", "requeue"}) {
    auto it = counters_.decisions.find(d);
    w.Sample({{"decision", d}},
             static_cast<double>(it != counters_.decisions.end() ? it->second : 0));
  }
}

std::string Controller::Metrics() {
  MutexLock lock(mu_);
  const Micros now = clock_->NowMicros();
  MetricsWriter w;

  // Jobs per queue and state; every configured queue appears, with zeros.
  std::map<std::pair<std::string, std::string>, int64_t> jobs;  // (queue, state)
  for (const auto& [id, job] : jobs_.all()) {
    if (!job.durable) {
      continue;
    }
    const JobRecord& rec = jobs_.Rec(job);
    if (rec.phase == JobPhase::kPending) {
      ++jobs[{job.row.queue, "pending"}];
    } else if (rec.phase == JobPhase::kRunning || rec.phase == JobPhase::kStopping) {
      ++jobs[{job.row.queue, "running"}];
    }
  }
  w.Family("tessera_jobs", MetricType::kGauge, "Jobs by queue, tenant and state (running includes stopping).");
  for (QueueId q : core_.tree().queues()) {
    const std::string& name = core_.tree().spec(q).name;
    for (const char* state : {"pending", "running"}) {
      auto it = jobs.find({name, state});
      w.Sample({{"queue", name}, {"tenant", core_.tree().tenant(q)}, {"state", state}},
               static_cast<double>(it != jobs.end() ? it->second : 0));
    }
  }
  w.Family("tessera_jobs_submitted_total", MetricType::kCounter,
           "Jobs acknowledged since the controller started, by queue.");
  for (QueueId q : core_.tree().queues()) {
    auto it = counters_.submitted.find(core_.tree().spec(q).name);
    w.Sample({{"queue", core_.tree().spec(q).name}},
             static_cast<double>(it != counters_.submitted.end() ? it->second : 0));
  }
  w.Family("tessera_jobs_finished_total", MetricType::kCounter,
           "Jobs that ended since the controller started, by queue and final state.");
  for (QueueId q : core_.tree().queues()) {
    for (const char* state : {"succeeded", "failed", "cancelled"}) {
      auto it = counters_.finished.find({core_.tree().spec(q).name, state});
      w.Sample({{"queue", core_.tree().spec(q).name}, {"state", state}},
               static_cast<double>(it != counters_.finished.end() ? it->second : 0));
    }
  }
  w.Family("tessera_preemptions_total", MetricType::kCounter,
           "Jobs preempted since the controller started, by the victim's queue.");
  for (QueueId q : core_.tree().queues()) {
    auto it = counters_.preemptions.find(core_.tree().spec(q).name);
    w.Sample({{"queue", core_.tree().spec(q).name}},
             static_cast<double>(it != counters_.preemptions.end() ? it->second : 0));
  }
  WriteRestartMetrics(w);

  WriteSchedulerMetrics(w);
  WriteQuotaAndGpus(w);

  ModulesWriteMetrics(now, w);  // Accounting's per-tenant GPU families first
  return w.Take();
}

std::string Controller::GpuMetrics() {
  MutexLock lock(mu_);
  // Who holds each GPU, one entry per job.
  std::map<std::pair<std::string, int>, std::vector<GpuHolder>> holders;
  for (const auto& [gpu, grants] : GpuHolders()) {
    auto& list = holders[gpu];
    for (const GrantHolder& g : grants) {
      if (std::none_of(list.begin(), list.end(), [&](const GpuHolder& h) { return h.job == g.job; })) {
        list.push_back(GpuHolder{g.job, g.info->row.tenant, g.grant->is_mig() ? g.grant->mig_start : -1});
      }
    }
  }
  struct Row {
    MetricLabels labels;
    const GpuTelemetry* gpu;
    const MigTelemetry* mig;  // null: the whole GPU
  };
  std::vector<Row> rows;
  for (const auto& [name, node] : nodes_.all()) {
    if (!node.up) {
      continue;
    }
    for (size_t g = 0; g < node.telemetry.size() && g < node.inventory.spec.gpus.size(); ++g) {
      const GpuTelemetry& t = node.telemetry[g];
      if (t.lost) {
        continue;  // the driver has nothing to say about it
      }
      const std::string model = catalog_->Get(node.inventory.spec.gpus[g].model).name;
      auto labels = [&, &name = name](const std::string& profile, const std::string& gi,
                                      const std::string& tenant,
                                      const std::string& job) -> MetricLabels {
        return {{"gpu", std::to_string(g)}, {"UUID", t.uuid}, {"device", "nvidia" + std::to_string(g)},
                {"modelName", model},       {"Hostname", name}, {"GPU_I_PROFILE", profile},
                {"GPU_I_ID", gi},           {"tenant", tenant}, {"job_id", job}};
      };
      auto h = holders.find({name, static_cast<int>(g)});
      const std::vector<GpuHolder> none;
      const std::vector<GpuHolder>& here = h != holders.end() ? h->second : none;
      if (t.mig.empty()) {
        if (here.empty()) {
          rows.push_back(Row{labels("", "", "", ""), &t, nullptr});
        }
        for (const GpuHolder& x : here) {
          rows.push_back(Row{labels("", "", x.tenant, ToString(x.job)), &t, nullptr});
        }
        continue;
      }
      rows.push_back(Row{labels("", "", "", ""), &t, nullptr});
      for (const MigTelemetry& m : t.mig) {
        std::string tenant, job;
        for (const GpuHolder& x : here) {
          if (x.mig_start == m.start) {
            tenant = x.tenant;
            job = ToString(x.job);
          }
        }
        rows.push_back(Row{labels(m.profile, std::to_string(m.gi_id), tenant, job), &t, &m});
      }
    }
  }

  MetricsWriter w;
  // Whole-GPU fields, as the DCGM exporter's default counters name and describe them.
  auto gpu_family = [&](const char* name, const char* help, auto value) {
    w.Family(name, MetricType::kGauge, help);
    for (const Row& r : rows) {
      if (r.mig == nullptr) {
        w.Sample(r.labels, static_cast<double>(value(*r.gpu)));
      }
    }
  };
  gpu_family("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).",
             [](const GpuTelemetry& t) { return t.util_pct; });
  // Framebuffer: whole GPUs, and each MIG instance on its own row.
  w.Family("DCGM_FI_DEV_FB_USED", MetricType::kGauge, "Framebuffer memory used (in MiB).");
  for (const Row& r : rows) {
    w.Sample(r.labels, static_cast<double>(r.mig != nullptr ? r.mig->fb_used_mib : r.gpu->fb_used_mib));
  }
  w.Family("DCGM_FI_DEV_FB_FREE", MetricType::kGauge, "Framebuffer memory free (in MiB).");
  for (const Row& r : rows) {
    w.Sample(r.labels, static_cast<double>(r.mig != nullptr ? r.mig->fb_free_mib : r.gpu->fb_free_mib));
  }
  gpu_family("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).",
             [](const GpuTelemetry& t) { return t.temp_c; });
  gpu_family("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).",
             [](const GpuTelemetry& t) { return static_cast<double>(t.power_mw) / 1000.0; });
  gpu_family("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).",
             [](const GpuTelemetry& t) { return t.sm_clock_mhz; });
  gpu_family("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.",
             [](const GpuTelemetry& t) { return t.last_xid; });
  gpu_family("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors.",
             [](const GpuTelemetry& t) { return t.ecc_sbe_volatile; });
  gpu_family("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors.",
             [](const GpuTelemetry& t) { return t.ecc_dbe_volatile; });
  gpu_family("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "Total number of single-bit persistent ECC errors.",
             [](const GpuTelemetry& t) { return t.ecc_sbe_aggregate; });
  gpu_family("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "Total number of double-bit persistent ECC errors.",
             [](const GpuTelemetry& t) { return t.ecc_dbe_aggregate; });
  return w.Take();
}

StatusOr<nlohmann::json> Controller::UsageSeries(Micros since, Micros until, Micros step,
                                                 const std::string& tenant) {
  TESSERA_RETURN_IF_ERROR(CheckUsageSeriesQuery(since, until, step));
  TESSERA_ASSIGN_OR_RETURN(std::vector<UsageRow> rows, store_->LoadUsage(since, until));
  std::map<std::string, double> quota_gpus;
  {  // the store is read above, without mu_
    MutexLock lock(mu_);
    const std::unique_ptr<ModuleStep> s = LockedStep(clock_->NowMicros(), nullptr);
    Accounting::RunningIntervals(*s, since, until, rows);
    quota_gpus = s->TenantQuotaGpus();
  }
  return ::tessera::UsageSeries(rows, since, until, step, tenant, quota_gpus);
}

}  // namespace tessera
