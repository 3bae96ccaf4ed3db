// ClusterViews: each view's figures gathered in one read of the core (Controller::Read),
// then written by the pure views; the store is never read with the core lock held.
#include "server/services/cluster_views.h"

#include <algorithm>
#include <map>
#include <utility>

#include "server/cluster_history.h"
#include "server/modules/accounting.h"
#include "server/modules/usage_report.h"
#include "server/views/metrics_views.h"
#include "server/views/node_views.h"
#include "server/views/queue_views.h"

namespace tessera {

void ClusterViews::Look(const std::function<void(const ServiceStep&)>& look) {
  const Status status = controller_->Read([&](ServiceStep& step) {
    look(step);
    return Status::Ok();
  });
  (void)status;  // `look` cannot fail
}

nlohmann::json ClusterViews::NodesAs(const Principal* viewer) {
  nlohmann::json nodes;
  Look([&](const ServiceStep& step) {
    step.VisitNodeInputs("", [&](const NodeViewInputs& in) { nodes = NodesJson(in, "", viewer); });
  });
  return {{"nodes", std::move(nodes)}};
}

nlohmann::json ClusterViews::Nodes() { return NodesAs(nullptr); }

nlohmann::json ClusterViews::Nodes(const Principal& who) { return NodesAs(&who); }

nlohmann::json ClusterViews::Queues() {
  nlohmann::json out;
  Look([&](const ServiceStep& step) {
    std::map<std::string, std::pair<int64_t, int64_t>> jobs;  // pending, running
    step.ForEachJob([&jobs](const JobFacts& job) {
      if (!Terminal(job.state)) {
        auto& c = jobs[job.queue];
        ++(job.state == JobState::kPending ? c.first : c.second);
      }
    });
    const ServiceStep::CoreFigures core = step.Figures();
    const QueueTree& tree = core.tree;
    std::map<std::string, int64_t> max_pending;
    std::vector<nlohmann::json> fair_share;
    for (size_t i = 0; i < tree.size(); ++i) {
      const QueueId q(i);
      if (tree.is_queue(q)) {
        max_pending[tree.spec(q).name] =
            controller_->intake().MaxPending(tree.spec(q).name, step.queues_yaml());
      }
      fair_share.push_back(step.FairShare(q));
    }
    out = QueuesJson(
        QueueViewInputs{tree, core.quota, controller_->catalog(), jobs, max_pending, fair_share});
    for (size_t i = 0; i < tree.size(); ++i) {
      if (!tree.is_queue(QueueId(i))) {
        out[i]["idle"] = nullptr;
        continue;
      }
      step.DescribeQueue(tree.spec(QueueId(i)).name, out[i]);
    }
  });
  return {{"queues", std::move(out)}};
}

std::vector<std::string> ClusterViews::Tenants() {
  std::vector<std::string> out;
  Look([&](const ServiceStep& step) {
    const QueueTree& tree = step.Figures().tree;
    for (QueueId q : tree.queues()) {
      const std::string& t = tree.tenant(q);
      if (std::find(out.begin(), out.end(), t) == out.end()) {
        out.push_back(t);
      }
    }
  });
  return out;
}

std::string ClusterViews::Metrics() {
  MetricsWriter w;
  Look([&](const ServiceStep& step) {
    std::map<std::pair<std::string, std::string>, int64_t> jobs;  // (queue, state)
    step.ForEachJob([&jobs](const JobFacts& job) {
      if (!Terminal(job.state)) {
        ++jobs[{job.queue, job.state == JobState::kPending ? "pending" : "running"}];
      }
    });
    const ServiceStep::CoreFigures core = step.Figures();
    WriteJobMetrics(w, core.tree, jobs, core.counters);
    WriteSchedulerMetrics(w, core.counters, core.scheduler);
    WriteQuotaMetrics(w, core.tree, core.quota, controller_->catalog());
    WriteNodeMetrics(w, core.nodes, core.state);
    step.WriteModuleMetrics(w);  // Accounting's per-tenant GPU families first
  });
  return w.Take();
}

std::string ClusterViews::GpuMetrics() {
  std::string text;
  Look([&](const ServiceStep& step) {
    step.VisitNodeInputs("", [&](const NodeViewInputs& in) {
      text = GpuMetricsText(in.nodes, in.holds, in.catalog);
    });
  });
  return text;
}

void ClusterViews::AddRunning(Micros since, Micros until, std::vector<UsageRow>& rows,
                              std::map<std::string, double>* quota_gpus) {
  Look([&](const ServiceStep& step) {
    Accounting::RunningIntervals(step, since, until, rows);
    if (quota_gpus != nullptr) {
      *quota_gpus = step.TenantQuotaGpus();
    }
  });
}

StatusOr<nlohmann::json> ClusterViews::Usage(Micros since, Micros until, const std::string& by,
                                             const std::string& tenant) {
  TESSERA_RETURN_IF_ERROR(CheckUsageQuery(since, until, by));
  TESSERA_ASSIGN_OR_RETURN(std::vector<UsageRow> rows, store_->LoadUsage(since, until));
  AddRunning(since, until, rows);
  return SumUsage(rows, since, until, by, tenant);
}

StatusOr<nlohmann::json> ClusterViews::UsageSeries(Micros since, Micros until, Micros step,
                                                   const std::string& tenant) {
  TESSERA_RETURN_IF_ERROR(CheckUsageSeriesQuery(since, until, step));
  TESSERA_ASSIGN_OR_RETURN(std::vector<UsageRow> rows, store_->LoadUsage(since, until));
  std::map<std::string, double> quota_gpus;
  AddRunning(since, until, rows, &quota_gpus);
  return ::tessera::UsageSeries(rows, since, until, step, tenant, quota_gpus);
}

StatusOr<nlohmann::json> ClusterViews::History(Micros since, Micros until, uint64_t after,
                                               int64_t limit) {
  HistoryPolicy policy;
  Look([&](const ServiceStep& step) {
    const ServiceStep::CoreFigures core = step.Figures();
    const SchedulerOptions& o = core.policy.options;
    policy.policy = {{"name", core.policy.name},
                     {"placement", core.placement},
                     {"seed", core.seed},
                     {"restart_overhead_us", o.restart_overhead},
                     {"checkpoint_wait_us", o.checkpoint_wait},
                     {"min_run_before_reclaim_us", o.min_run_before_reclaim},
                     {"victim_hold_us", o.victim_hold},
                     {"grace_us", o.grace}};
    policy.queues_yaml = step.queues_yaml();
  });
  return ClusterHistoryPage(*store_, policy, since, until, after, limit);
}

}  // namespace tessera
