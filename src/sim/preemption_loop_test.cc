// The search for preemption loops: random two- and three-queue workloads under every
// preemptive policy, with eviction that loses work (no checkpoint wait), searched for
// work flowing back between queues, and for a queue within its guarantee preempted by
// another queue (the lifecycle's invariant, counted as quota violations).
//
// A loop is a chain of cross-queue preemptions in which GPUs come back: p evicts v
// (p's queue takes from v's), then v, before it is evicted again, evicts a job of p's
// queue (two queues), or evicts w which, before it is evicted again, evicts a job of
// p's queue (three queues), each link within kWindow of the first eviction.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/rng.h"
#include "base/testing/time_units.h"
#include "model/node.h"
#include "model/testing/test_catalog.h"
#include "sim/cluster_preset.h"
#include "sim/job_sim.h"
#include "sim/job_trace.h"
#include "sim/job_workload.h"

namespace tessera {
namespace preemption_loop_test {

using testing::Catalog;
using testing::kHour;
using testing::kMinute;
using testing::kSecond;

constexpr ResourceName kGpu{ResourceKind::kGpu, GpuModelId()};
// Longer than the amortisation of any victim here: 10 x (60 s of restart + up to the
// hour since its last checkpoint that its eviction loses), about 10 h.
constexpr Micros kWindow = 12 * kHour;

std::vector<NodeSpec> Nodes(int n) {
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < n; ++i) {
    nodes.push_back(MakeUniformNode("n" + std::to_string(i), MilliCpu(8 * kPresetCpuMilliPerGpu),
                                    MiB(8 * kPresetMemoryMiBPerGpu), *Catalog().Find("H100-80GB"),
                                    8, SharingMode::kExclusive));
  }
  return nodes;
}

// One random workload: 2 or 3 queues of one cohort with nominal quotas summing to the
// cluster's GPUs, tenants submitting in skewed proportions, 1-8 GPU jobs of 5 minutes
// to 4 hours, arriving faster than the cluster drains them.
struct Workload {
  int nodes = 0;
  QueueTreeSpec queues;
  std::vector<SimJob> jobs;
  std::map<std::string, std::string> queue_of;  // job name -> queue
};

Workload RandomWorkload(uint64_t seed) {
  Pcg32 rng(seed, 0x100b);
  Workload w;
  w.nodes = 2 + static_cast<int>(rng.Uniform(3));
  const int gpus = 8 * w.nodes;
  const int queues = 2 + static_cast<int>(rng.Uniform(2));
  QueueNodeSpec all;
  all.name = "all";
  all.cohort = true;
  w.queues.nodes = {all};
  std::vector<double> weight;
  int left = gpus;
  for (int q = 0; q < queues; ++q) {
    const int share =
        q + 1 == queues
            ? left
            : 1 + static_cast<int>(rng.Uniform(static_cast<uint32_t>(left - (queues - q - 1))));
    left -= share;
    QueueNodeSpec n;
    n.name = "q" + std::to_string(q);
    n.parent = "all";
    n.quotas = {{kGpu, Quota{int64_t{share} * 1000, {}, {}}}};
    w.queues.nodes.push_back(n);
    weight.push_back(0.1 + rng.UniformDouble() * 10.0);
  }
  double total = 0;
  for (double x : weight) total += x;
  constexpr std::array<int, 6> kGpus = {1, 1, 2, 4, 4, 8};
  JobTrace trace;
  trace.name = "loop-search";
  const int n = 30 + static_cast<int>(rng.Uniform(31));
  double t = 0;
  for (int i = 0; i < n; ++i) {
    TraceJob j;
    j.name = "j" + std::to_string(i);
    t += -std::log(1.0 - rng.UniformDouble()) * 300.0;
    j.submit = static_cast<Micros>(t) * kSecond;
    const double log_d =
        std::log(300.0) + rng.UniformDouble() * (std::log(4 * 3600.0) - std::log(300.0));
    j.duration = static_cast<Micros>(std::exp(log_d)) * kSecond;
    j.gpus = kGpus[rng.Uniform(kGpus.size())];
    double u = rng.UniformDouble() * total;
    size_t q = 0;
    while (q + 1 < weight.size() && u >= weight[q]) {
      u -= weight[q++];
    }
    j.tenant = "q" + std::to_string(q);
    w.queue_of[j.name] = j.tenant;
    trace.jobs.push_back(std::move(j));
  }
  WorkloadOptions options;
  options.checkpoint_interval = kHour;  // and no checkpoint wait: evictions lose work
  options.seed = seed;
  w.jobs = JobsFromTrace(trace, options);
  return w;
}

struct Preemption {
  Micros time;
  std::string victim;
  std::string by;
};

// Whether `victim` was evicted again after `since` and before `until`.
bool EvictedBetween(const std::vector<Preemption>& all, const std::string& victim, Micros since,
                    Micros until) {
  return std::any_of(all.begin(), all.end(), [&](const Preemption& p) {
    return p.victim == victim && p.time > since && p.time < until;
  });
}

// The loops of the header, described; empty when there are none.
std::vector<std::string> FindLoops(const std::vector<Preemption>& all,
                                   const std::map<std::string, std::string>& queue_of) {
  std::vector<Preemption> cross;
  for (const Preemption& p : all) {
    if (queue_of.at(p.victim) != queue_of.at(p.by)) {
      cross.push_back(p);
    }
  }
  std::vector<std::string> loops;
  // The next links of a chain: evictions by `job` after `t`, before it is evicted again.
  auto next = [&](const std::string& job, Micros t, Micros start) {
    std::vector<const Preemption*> out;
    for (const Preemption& p : cross) {
      if (p.by == job && p.time >= t && p.time <= start + kWindow &&
          !EvictedBetween(all, job, t, p.time)) {
        out.push_back(&p);
      }
    }
    return out;
  };
  for (const Preemption& first : cross) {
    const std::string& home = queue_of.at(first.by);
    for (const Preemption* second : next(first.victim, first.time, first.time)) {
      if (queue_of.at(second->victim) == home) {
        loops.push_back(first.by + " evicted " + first.victim + ", which evicted " +
                        second->victim + " at " + std::to_string(second->time / kSecond) + " s");
        continue;
      }
      for (const Preemption* third : next(second->victim, second->time, first.time)) {
        if (queue_of.at(third->victim) == home) {
          loops.push_back(first.by + " evicted " + first.victim + ", which evicted " +
                          second->victim + ", which evicted " + third->victim);
        }
      }
    }
  }
  return loops;
}

JobSimOptions LossyOptions(std::string_view policy, uint64_t seed) {
  JobSimOptions o;
  StatusOr<SchedulerPolicy> p = ParseSchedulerPolicy(policy);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (p.ok()) {
    o.policy = std::move(p).value();
  }
  o.policy.options.restart_overhead = kMinute;
  o.policy.options.checkpoint_wait = 0;
  o.seed = seed;
  o.record_usage = false;
  o.record_events = true;
  return o;
}

TEST(PreemptionLoopTest, NoLoopAndNoGuaranteeBrokenInAThousandRandomWorkloads) {
  // Every preemption path: LAS (Tiresias, and the default with reclaim and priority),
  // SRTF with reclaim, and priority preemption with reclaim.
  const std::array<std::string_view, 4> kPolicies = {
      "tessera", "tiresias", "srtf+preempt-srtf+reclaim", "fairshare+priority+preempt+reclaim"};
  int workloads = 0;
  int64_t preemptions = 0, cross_queue = 0;
  std::vector<std::string> loops;
  for (uint64_t seed = 1; seed <= 1000; ++seed) {
    const Workload w = RandomWorkload(seed);
    const std::string_view policy = kPolicies[seed % kPolicies.size()];
    StatusOr<JobSimResult> r =
        RunJobSimulation(Nodes(w.nodes), w.queues, w.jobs, LossyOptions(policy, seed), Catalog());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ++workloads;
    EXPECT_EQ(r->run.quota_violations, 0) << "seed " << seed << " " << policy << ": "
                                          << (r->violations.empty() ? "" : r->violations.front());
    std::vector<Preemption> all;
    for (const SimEvent& e : r->events) {
      if (e.kind == SimEvent::Kind::kPreempt) {
        all.push_back({e.time, e.job, e.by});
        cross_queue += w.queue_of.at(e.job) != w.queue_of.at(e.by) ? 1 : 0;
      }
    }
    preemptions += static_cast<int64_t>(all.size());
    for (std::string& loop : FindLoops(all, w.queue_of)) {
      if (loops.size() < 10) {
        loops.push_back("seed " + std::to_string(seed) + " " + std::string(policy) + ": " + loop);
      }
    }
    for (const JobOutcome& o : r->run.jobs) {
      ASSERT_GE(o.finish, 0) << "seed " << seed << " " << policy << ": " << o.name;
    }
  }
  EXPECT_EQ(workloads, 1000);
  // The search must have something to search: the workloads do preempt across queues.
  EXPECT_GT(cross_queue, 1000);
  EXPECT_TRUE(loops.empty()) << loops.size() << " loops, the first: " << loops.front();
  std::printf("loop search: %d workloads, %lld preemptions (%lld across queues), %zu loops\n",
              workloads, static_cast<long long>(preemptions), static_cast<long long>(cross_queue),
              loops.size());
}

// The search finds what it looks for: two jobs of different queues trading GPUs back.
TEST(PreemptionLoopTest, TheSearchFindsTwoAndThreeQueueLoops) {
  const std::map<std::string, std::string> queue_of = {
      {"a1", "a"}, {"a2", "a"}, {"b1", "b"}, {"c1", "c"}};
  EXPECT_EQ(FindLoops({{0, "b1", "a1"}, {kMinute, "a2", "b1"}}, queue_of).size(), 1u);
  EXPECT_EQ(FindLoops({{0, "b1", "a1"}, {kMinute, "c1", "b1"}, {2 * kMinute, "a2", "c1"}}, queue_of)
                .size(),
            1u);
  // Not loops: b1 was evicted again (by c1) before it took a2's GPUs; too late; one queue.
  EXPECT_TRUE(
      FindLoops({{0, "b1", "a1"}, {kMinute, "b1", "c1"}, {2 * kMinute, "a2", "b1"}}, queue_of)
          .empty());
  EXPECT_TRUE(FindLoops({{0, "b1", "a1"}, {kWindow + kMinute, "a2", "b1"}}, queue_of).empty());
  EXPECT_TRUE(FindLoops({{0, "a2", "a1"}, {kMinute, "a1", "a2"}}, queue_of).empty());
}

}  // namespace preemption_loop_test
}  // namespace tessera
