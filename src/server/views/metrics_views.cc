// The controller's Prometheus families, from typed inputs (views/metrics_views.h).
#include "server/views/metrics_views.h"

#include <algorithm>
#include <initializer_list>
#include <set>

#include "api/node_labels.h"

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

// One sample per label value, 0 for a value not counted yet.
template <typename Key>
void WriteCountsBy(MetricsWriter& w, const MetricLabels& fixed, const char* label,
                   std::initializer_list<const char*> values,
                   const std::map<Key, uint64_t>& counts, const auto& key_of) {
  for (const char* value : values) {
    auto it = counts.find(key_of(value));
    MetricLabels labels = fixed;
    labels.emplace_back(label, value);
    w.Sample(labels, static_cast<double>(it != counts.end() ? it->second : 0));
  }
}

uint64_t CountOf(const std::map<std::string, uint64_t>& counts, const std::string& key) {
  auto it = counts.find(key);
  return it != counts.end() ? it->second : 0;
}

}  // namespace

void WriteJobMetrics(MetricsWriter& w, const QueueTree& tree,
                     const std::map<std::pair<std::string, std::string>, int64_t>& jobs,
                     const ControllerCounters& counters) {
  w.Family("tessera_jobs", MetricType::kGauge,
           "Jobs by queue, tenant and state (running includes stopping).");
  for (QueueId q : tree.queues()) {
    const std::string& name = tree.spec(q).name;
    for (const char* state : {"pending", "running"}) {
      auto it = jobs.find({name, state});
      w.Sample({{"queue", name}, {"tenant", tree.tenant(q)}, {"state", state}},
               static_cast<double>(it != jobs.end() ? it->second : 0));
    }
  }
  w.Family("tessera_jobs_submitted_total", MetricType::kCounter,
           "Jobs acknowledged since the controller started, by queue.");
  for (QueueId q : tree.queues()) {
    w.Sample({{"queue", tree.spec(q).name}},
             static_cast<double>(CountOf(counters.submitted, tree.spec(q).name)));
  }
  w.Family("tessera_jobs_finished_total", MetricType::kCounter,
           "Jobs that ended since the controller started, by queue and final state.");
  for (QueueId q : tree.queues()) {
    const std::string& name = tree.spec(q).name;
    WriteCountsBy(w, {{"queue", name}}, "state", {"succeeded", "failed", "cancelled"},
                  counters.finished,
                  [&](const char* state) { return std::make_pair(name, std::string(state)); });
  }
  w.Family("tessera_preemptions_total", MetricType::kCounter,
           "Jobs preempted since the controller started, by the victim's queue.");
  for (QueueId q : tree.queues()) {
    w.Sample({{"queue", tree.spec(q).name}},
             static_cast<double>(CountOf(counters.preemptions, tree.spec(q).name)));
  }
}

void WriteSchedulerMetrics(MetricsWriter& w, const ControllerCounters& counters,
                           const SchedulerFigures& figures) {
  w.Family("tessera_scheduler_cycles_total", MetricType::kCounter, "Scheduling cycles run.");
  w.Sample({}, static_cast<double>(counters.cycles.load()));
  w.Family("tessera_scheduler_report_cycles_total", MetricType::kCounter,
           "Core cycles run on an agent's report of an exit, so that the report and the starts "
           "it allows share one commit.");
  w.Sample({}, static_cast<double>(counters.report_cycles));
  w.Family("tessera_scheduler_rebuilds_total", MetricType::kCounter,
           "Times the scheduler's cluster was built afresh (first cycle, queue changes); node "
           "events change it in place.");
  w.Sample({}, static_cast<double>(figures.rebuilds));
  w.Family("tessera_placement_tasks_observed_total", MetricType::kCounter,
           "Submitted tasks the placement's workload model has learned from (kept across "
           "restarts).");
  w.Sample({}, static_cast<double>(figures.tasks_observed));
  w.Family("tessera_placement_workload_models_total", MetricType::kCounter,
           "Times the placement's typical tasks were remade because the submitted shapes moved "
           "(since the controller started).");
  w.Sample({}, static_cast<double>(figures.models_made));
  w.Family("tessera_placement_typical_tasks", MetricType::kGauge,
           "Task shapes in the placement's workload model (0: bestfit until a task is seen).");
  w.Sample({}, static_cast<double>(figures.typical_tasks));
  w.Family("tessera_scheduler_invariant_breaches_total", MetricType::kCounter,
           "Cycles after which the core's ledger or quota invariants did not hold (a bug: "
           "alert on any).");
  w.Sample({}, static_cast<double>(counters.invariant_breaches));
  w.Family("tessera_scheduler_cycle_duration_seconds", MetricType::kHistogram,
           "Wall time of a scheduling cycle, including making its decisions durable.");
  w.Sample({}, counters.cycle_seconds.Read());
  w.Family("tessera_scheduler_decisions_total", MetricType::kCounter,
           "Scheduling decisions: jobs started, preempted and requeued.");
  WriteCountsBy(w, {}, "decision", {"start", "preempt", "requeue"}, counters.decisions,
                [](const char* d) { return std::string(d); });
}

void WriteQuotaMetrics(MetricsWriter& w, const QueueTree& tree, const QuotaLedger* ledger,
                       const GpuCatalog& catalog) {
  w.Family("tessera_queue_quota", MetricType::kGauge,
           "Quota per queue or cohort and resource (GPUs, CPUs, bytes): nominal, borrowing "
           "limit, in use, and borrowed (in use above nominal).");
  for (size_t i = 0; i < tree.size(); ++i) {
    const QueueId q(i);
    for (size_t r = 0; r < tree.resources().size(); ++r) {
      const ResourceName& res = tree.resources()[r];
      const Quota& quota = tree.quota(q, r);
      const int64_t used = ledger != nullptr ? ledger->Usage(q, r) : 0;
      MetricLabels labels = {{"queue", tree.spec(q).name},
                             {"resource", ResourceNameString(res, catalog)},
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
}

namespace {

void WriteAgentMetrics(MetricsWriter& w, const std::map<std::string, NodeInfo>& nodes) {
  int64_t up = 0, down = 0;
  for (const auto& [name, node] : nodes) {
    (node.up ? up : down) += 1;
  }
  w.Family("tessera_agents", MetricType::kGauge, "Nodes whose agent is up or down.");
  w.Sample({{"state", "up"}}, static_cast<double>(up));
  w.Sample({{"state", "down"}}, static_cast<double>(down));
  // Join on node to group any per-node series by rack, block or NVLink domain.
  w.Family("tessera_node_info", MetricType::kGauge,
           "1 for each known node, with its labels ('-' and '.' in keys become '_').");
  for (const auto& [name, node] : nodes) {
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
}

}  // namespace

void WriteNodeMetrics(MetricsWriter& w, const std::map<std::string, NodeInfo>& nodes,
                      const ClusterState* state) {
  WriteAgentMetrics(w, nodes);
  // GPU allocation per GPU of the nodes that are up, from the scheduler's ledgers.
  double free = 0, allocated = 0, drained = 0;
  struct GpuRow {
    MetricLabels labels;
    double ratio;
    const DrainInfo* drain;
  };
  std::vector<GpuRow> rows;
  for (const auto& [name, node] : nodes) {
    if (state == nullptr || !node.up) {
      continue;
    }
    StatusOr<NodeId> id = state->FindNode(name);
    if (!id.ok()) {
      continue;
    }
    const NodeLedger& ledger_node = state->node(id.value());
    for (int g = 0; g < ledger_node.gpu_count(); ++g) {
      const size_t gi = static_cast<size_t>(g);
      const double used = static_cast<double>(ledger_node.gpus()[gi].used_milli().value()) / 1000.0;
      auto d = node.gpu_drains.find(g);
      const DrainInfo* drain =
          d != node.gpu_drains.end() ? &d->second : node.drain ? &*node.drain : nullptr;
      allocated += used;
      (drain != nullptr ? drained : free) += 1.0 - used;
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

namespace {

// One job on a GPU, as /metrics/gpus labels it.
struct GpuJob {
  JobNumber job;
  std::string tenant;
  int mig_start;  // -1: not a MIG grant
};

// One row of /metrics/gpus: a whole GPU, or one MIG instance of it.
struct GpuMetricRow {
  MetricLabels labels;
  const GpuTelemetry* gpu;
  const MigTelemetry* mig;  // null: the whole GPU
};

std::vector<GpuMetricRow> GpuMetricRows(const std::map<std::string, NodeInfo>& nodes,
                                        const GpuHolds& holds, const GpuCatalog& catalog) {
  // Who holds each GPU, one entry per job.
  std::map<std::pair<std::string, int>, std::vector<GpuJob>> holders;
  for (const auto& [gpu, grants] : holds) {
    auto& list = holders[gpu];
    for (const GpuHold& g : grants) {
      if (std::none_of(list.begin(), list.end(), [&](const GpuJob& h) { return h.job == g.job; })) {
        list.push_back(GpuJob{g.job, g.row->tenant, g.grant->is_mig() ? g.grant->mig_start : -1});
      }
    }
  }
  std::vector<GpuMetricRow> rows;
  for (const auto& [name, node] : nodes) {
    if (!node.up) {
      continue;
    }
    for (size_t g = 0; g < node.telemetry.size() && g < node.inventory.spec.gpus.size(); ++g) {
      const GpuTelemetry& t = node.telemetry[g];
      if (t.lost) {
        continue;  // the driver has nothing to say about it
      }
      const std::string model = catalog.Get(node.inventory.spec.gpus[g].model).name;
      auto labels = [&, &name = name](const std::string& profile, const std::string& gi,
                                      const std::string& tenant,
                                      const std::string& job) -> MetricLabels {
        return {{"gpu", std::to_string(g)}, {"UUID", t.uuid}, {"device", "nvidia" + std::to_string(g)},
                {"modelName", model},       {"Hostname", name}, {"GPU_I_PROFILE", profile},
                {"GPU_I_ID", gi},           {"tenant", tenant}, {"job_id", job}};
      };
      auto h = holders.find({name, static_cast<int>(g)});
      const std::vector<GpuJob> none;
      const std::vector<GpuJob>& here = h != holders.end() ? h->second : none;
      if (t.mig.empty()) {
        if (here.empty()) {
          rows.push_back(GpuMetricRow{labels("", "", "", ""), &t, nullptr});
        }
        for (const GpuJob& x : here) {
          rows.push_back(GpuMetricRow{labels("", "", x.tenant, ToString(x.job)), &t, nullptr});
        }
        continue;
      }
      rows.push_back(GpuMetricRow{labels("", "", "", ""), &t, nullptr});
      for (const MigTelemetry& m : t.mig) {
        std::string tenant, job;
        for (const GpuJob& x : here) {
          if (x.mig_start == m.start) {
            tenant = x.tenant;
            job = ToString(x.job);
          }
        }
        rows.push_back(GpuMetricRow{labels(m.profile, std::to_string(m.gi_id), tenant, job), &t, &m});
      }
    }
  }
  return rows;
}

}  // namespace

std::string GpuMetricsText(const std::map<std::string, NodeInfo>& nodes, const GpuHolds& holds,
                           const GpuCatalog& catalog) {
  const std::vector<GpuMetricRow> rows = GpuMetricRows(nodes, holds, catalog);
  MetricsWriter w;
  // Whole-GPU fields, as the DCGM exporter's default counters name and describe them.
  auto gpu_family = [&](const char* name, const char* help, auto value) {
    w.Family(name, MetricType::kGauge, help);
    for (const GpuMetricRow& r : rows) {
      if (r.mig == nullptr) {
        w.Sample(r.labels, static_cast<double>(value(*r.gpu)));
      }
    }
  };
  gpu_family("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).",
             [](const GpuTelemetry& t) { return t.util_pct; });
  // Framebuffer: whole GPUs, and each MIG instance on its own row.
  w.Family("DCGM_FI_DEV_FB_USED", MetricType::kGauge, "Framebuffer memory used (in MiB).");
  for (const GpuMetricRow& r : rows) {
    w.Sample(r.labels, static_cast<double>(r.mig != nullptr ? r.mig->fb_used_mib : r.gpu->fb_used_mib));
  }
  w.Family("DCGM_FI_DEV_FB_FREE", MetricType::kGauge, "Framebuffer memory free (in MiB).");
  for (const GpuMetricRow& r : rows) {
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

}  // namespace tessera
