// Test support for the scheduling cycle (sched tests do not link plugins/): placement
// plugins, builders of nodes, queues and gangs, and a Harness that drives a
// JobScheduler through the JobLifecycle on a small cluster.
// Thread safety: one test thread.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/rng.h"
#include "base/testing/time_units.h"
#include "model/node.h"
#include "model/queue_tree.h"
#include "sched/gpu_selection.h"
#include "sched/job_lifecycle.h"
#include "sched/job_scheduler.h"
#include "state/testing/test_cluster.h"

namespace tessera::testing {

inline constexpr ResourceName kGpu{ResourceKind::kGpu, GpuModelId()};
inline constexpr ResourceName kCpu{ResourceKind::kCpu, GpuModelId()};
inline constexpr ResourceName kMemory{ResourceKind::kMemory, GpuModelId()};
inline constexpr ResourceName kGpuMemory{ResourceKind::kGpuMemory, GpuModelId()};

// ---------------------------------------------------------------------------------
// Placement plugins (sched tests do not link plugins/): CPU, memory and GPUs must fit
// now. No scorers, so every feasible node ties and the lowest node index wins.

class CpuFilter final : public FilterPlugin {
 public:
  std::string_view name() const override { return "cpu"; }
  FilterResult Filter(const NodeLedger& node, const TaskRequest& r) const override {
    if (r.cpu > node.spec().cpu || r.memory > node.spec().memory) {
      return FilterResult::Never("cpu never");
    }
    if (r.cpu > node.free_cpu() || r.memory > node.free_memory()) {
      return FilterResult::NotNow("cpu busy");
    }
    return FilterResult::Fits();
  }
};

class GpuFilter final : public FilterPlugin {
 public:
  std::string_view name() const override { return "gpu"; }
  FilterResult Filter(const NodeLedger& node, const TaskRequest& r) const override {
    if (r.cpu_only()) {
      return FilterResult::Fits();
    }
    if (node.gpu_count() < r.gpu_count) {
      return FilterResult::Never("too few gpus");
    }
    int fitting = 0;
    for (const GpuLedger& g : node.gpus()) {
      fitting += GpuFitsRequest(g, r) ? 1 : 0;
    }
    return fitting >= r.gpu_count ? FilterResult::Fits() : FilterResult::NotNow("gpus busy");
  }
};

// Both states hold the same allocations, node by node (a failed attempt left no trace).
inline void ExpectSameUsage(const ClusterState& a, const ClusterState& b) {
  ASSERT_EQ(a.node_count(), b.node_count());
  for (size_t i = 0; i < a.node_count(); ++i) {
    EXPECT_TRUE(a.nodes()[i].SameUsage(b.nodes()[i])) << "node " << i;
  }
  EXPECT_EQ(a.allocated_gpu_milli(), b.allocated_gpu_milli());
  EXPECT_EQ(a.allocated_cpu(), b.allocated_cpu());
}

inline Profile TestProfile() {
  Profile p;
  p.name = "test";
  p.filters.push_back(std::make_unique<CpuFilter>());
  p.filters.push_back(std::make_unique<GpuFilter>());
  return p;
}

// A job order by a function of the record; by_priority as given.
class FnOrder final : public JobOrderPlugin {
 public:
  FnOrder(std::function<double(const JobRecord&)> key, bool by_priority)
      : key_(std::move(key)), by_priority_(by_priority) {}
  std::string_view name() const override { return "fn"; }
  double Key(const JobRecord& job, Micros /*now*/) const override { return key_(job); }
  bool by_priority() const override { return by_priority_; }

 private:
  std::function<double(const JobRecord&)> key_;
  bool by_priority_;
};

inline std::unique_ptr<JobOrderPlugin> SubmitOrder(bool by_priority) {
  return std::make_unique<FnOrder>(
      [](const JobRecord& j) { return static_cast<double>(j.spec.submit_time); }, by_priority);
}

// ---------------------------------------------------------------------------------
// Builders.

inline NodeSpec GpuNode(std::string name, int gpus = 8, std::string model = "H100-80GB") {
  return MakeUniformNode(std::move(name), MilliCpu(128000), MiB(1 << 20), Model(model), gpus,
                         SharingMode::kExclusive);
}

inline QueueQuota Q(ResourceName r, int64_t nominal) { return {r, Quota{nominal, {}, {}}}; }

inline QueueNodeSpec QueueNode(std::string name, std::string parent = "",
                        std::vector<QueueQuota> quotas = {}) {
  QueueNodeSpec n;
  n.name = std::move(name);
  n.parent = std::move(parent);
  n.quotas = std::move(quotas);
  return n;
}

inline QueueNodeSpec CohortNode(std::string name) {
  QueueNodeSpec n;
  n.name = std::move(name);
  n.cohort = true;
  return n;
}

inline QueueTreeSpec Tree(std::vector<QueueNodeSpec> nodes) {
  QueueTreeSpec spec;
  spec.nodes = std::move(nodes);
  return spec;
}

// Cohort "c" with queues a and b of the given nominal GPU quotas (milli).
inline QueueTreeSpec TwoQueueCohort(int64_t a_milli, int64_t b_milli) {
  return Tree({CohortNode("c"), QueueNode("a", "c", {Q(kGpu, a_milli)}),
               QueueNode("b", "c", {Q(kGpu, b_milli)})});
}

// A gang of whole-GPU tasks, 1000 milli-CPU each.
inline JobSpec Gang(std::string name, std::string queue, std::vector<int> gpus_per_task,
             int32_t priority = 0, Micros submit = 0) {
  JobSpec s;
  s.name = std::move(name);
  s.queue = std::move(queue);
  s.priority = priority;
  s.submit_time = submit;
  for (int g : gpus_per_task) {
    s.tasks.push_back(testing::Whole(g));
  }
  return s;
}

// The driver: owns the jobs, the cluster state and the quota ledger, and applies the
// scheduler's decisions through the JobLifecycle, as the simulator and the server do.
class Harness {
 public:
  Harness(std::vector<NodeSpec> nodes, QueueTreeSpec queues, SchedulerOptions options,
          std::unique_ptr<JobOrderPlugin> order = nullptr,
          std::unique_ptr<QueueOrderPlugin> queue_order = nullptr)
      : tree_(MakeTree(std::move(queues))),
        state_(testing::Cluster(std::move(nodes))),
        quota_(*tree_),
        scheduler_(*tree_, state_, std::move(options), std::move(order), std::move(queue_order),
                   TestProfile(), 7LL * 24 * kHour),
        lifecycle_(&jobs_, tree_.get(), nullptr,
                   JobLifecycle::Options{false, scheduler_.options().lossless_preemption}) {
    lifecycle_.Bind(&state_, &quota_, &scheduler_);
  }

  // Submits (enqueues) a job at `now`.
  JobId Submit(JobSpec spec, Micros now, Micros predicted = 0, Micros oracle = -1) {
    JobRecord r;
    r.id = JobId(jobs_.size());
    StatusOr<QueueId> q = tree_->FindQueue(spec.queue);
    EXPECT_TRUE(q.ok()) << q.status().ToString();
    r.queue = q.value();
    r.gpu_milli = spec.TotalGpuMilli(Catalog());
    r.spec = std::move(spec);
    r.predicted_runtime = predicted;
    r.oracle_runtime = oracle;
    jobs_.push_back(std::move(r));
    lifecycle_.Submit(jobs_.back(), now);
    return jobs_.back().id;
  }

  // Runs one cycle at `now` and applies its decisions; the invariants must hold.
  CycleResult Cycle(Micros now) {
    for (const JobRecord& j : jobs_) {
      phase_before_[j.id.value()] = j.phase;
    }
    CycleResult result = lifecycle_.RunCycle(now, rng_);
    for (const StartDecision& d : result.starts) {
      EXPECT_EQ(phase_before_[d.job.value()], JobPhase::kPending) << job(d.job).spec.name;
    }
    for (const PreemptDecision& d : result.preemptions) {
      EXPECT_EQ(phase_before_[d.victim.value()], JobPhase::kRunning) << job(d.victim).spec.name;
    }
    std::vector<std::string> broken = lifecycle_.CheckInvariants();
    EXPECT_TRUE(broken.empty()) << broken.front();
    return result;
  }

  void Finish(JobId id, Micros now) { lifecycle_.Finish(job(id), JobEnd::kSucceeded, now); }

  // Evicts a stopping victim and requeues it.
  void Evict(JobId id, Micros now) {
    JobRecord& j = job(id);
    ASSERT_EQ(j.phase, JobPhase::kStopping);
    lifecycle_.Requeue(j, j.spec.checkpoint_on_signal ? j.Progress(now) : 0,
                       RequeueCause::kPreempted, now);
  }

  JobRecord& job(JobId id) { return jobs_[id.value()]; }
  std::vector<JobRecord>& jobs() { return jobs_; }
  ClusterState& state() { return state_; }
  QuotaLedger& quota() { return quota_; }
  JobScheduler& scheduler() { return scheduler_; }
  JobLifecycle& lifecycle() { return lifecycle_; }
  const QueueTree& tree() const { return *tree_; }
  QueueId queue(std::string_view name) const { return tree_->Find(name).value(); }

  // Nodes holding the job's tasks, in task order.
  std::vector<uint32_t> NodesOf(JobId id) const {
    std::vector<uint32_t> out;
    for (const Allocation& a : jobs_[id.value()].allocations) {
      out.push_back(a.node.value());
    }
    return out;
  }

 private:
  static std::unique_ptr<QueueTree> MakeTree(QueueTreeSpec spec) {
    StatusOr<QueueTree> t = QueueTree::Create(std::move(spec), Catalog());
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return std::make_unique<QueueTree>(std::move(t).value());
  }

  std::unique_ptr<QueueTree> tree_;
  ClusterState state_;
  QuotaLedger quota_;
  JobScheduler scheduler_;
  std::vector<JobRecord> jobs_;
  JobLifecycle lifecycle_;
  std::unordered_map<uint64_t, JobPhase> phase_before_;
  Pcg32 rng_{12345};
};

inline std::vector<uint64_t> Started(const CycleResult& r) {
  std::vector<uint64_t> ids;
  for (const StartDecision& d : r.starts) {
    ids.push_back(d.job.value());
  }
  return ids;
}

inline std::vector<uint64_t> Victims(const CycleResult& r) {
  std::vector<uint64_t> ids;
  for (const PreemptDecision& d : r.preemptions) {
    ids.push_back(d.victim.value());
  }
  return ids;
}

inline QueueTreeSpec OneQueue() { return Tree({QueueNode("q")}); }

}  // namespace tessera::testing
