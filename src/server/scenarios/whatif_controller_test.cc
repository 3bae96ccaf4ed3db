// `tessera whatif`'s key property, at controller level: a workload run through the live
// controller (controller_job_runner.h), its recorded history read back page by page
// (ClusterViews::History, as GET /v1/admin/history serves it) and replayed (sim/whatif.h,
// the CLI's code path): the replay of the policy that ran gives what happened within
// 1 % per tenant and overall, and another policy's figures stand beside them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "server/controller.h"
#include "server/scenarios/controller_job_runner.h"
#include "server/core_session.h"
#include "server/services/cluster_views.h"
#include "server/services/node_actions.h"
#include "sim/cluster_preset.h"
#include "sim/job_trace.h"
#include "sim/job_workload.h"
#include "sim/whatif.h"

namespace tessera {
namespace {

constexpr Micros kSec = 1'000'000;

const GpuCatalog& Catalog() { return GpuCatalog::Default(); }

struct Recorded {
  std::vector<SimJob> jobs;
  RecordedHistory history;
  int pages = 0;
};

// 120 jobs of three tenants on 4 nodes of 8 GPUs at 1.3x load, under tiresias with the
// server's bounds and a 60 s restart overhead (LAS preemption: jobs resume from
// their 30-minute checkpoints, so actual work must be told from lost work).
Recorded RunRecorded(const std::string& policy) {
  Recorded out;
  StatusOr<JobTrace> trace = MakeSyntheticTrace(
      "jobs=120,seed=7,gpus=1:50/2:20/4:20/8:10,median=40m,sigma=1.2,max=12h,tenants=3");
  EXPECT_TRUE(trace.ok()) << trace.status().ToString();
  ScaleToLoad(&*trace, 32, 1.3);
  StatusOr<ClusterSetup> cluster =
      MakeClusterPreset("4x8xH100-80GB", TraceTenants(*trace), "", Catalog());
  EXPECT_TRUE(cluster.ok()) << cluster.status().ToString();
  out.jobs = JobsFromTrace(*trace, WorkloadOptions{});
  JobSimOptions options;
  options.policy = WithServerBounds(ParseSchedulerPolicy(policy).value(), 60 * kSec, 120 * kSec);
  options.policy.options.restart_overhead = 60 * kSec;
  StatusOr<JobSimResult> run = RunJobsThroughController(
      cluster->nodes, cluster->queues, out.jobs, options, Catalog(),
      [&](Controller& c, Store& store) -> Status {
        // The admin removes a node after the run: its leave is recorded too.
        TESSERA_RETURN_IF_ERROR(NodeActions(c).RemoveNode(cluster->nodes.back().name, WriteBatch{}).status());
        uint64_t after = 0;
        do {
          TESSERA_ASSIGN_OR_RETURN(
              nlohmann::json page,
              ClusterViews(c, store).History(1, std::numeric_limits<int64_t>::max(), after, 50));
          // Through text, as the CLI gets it.
          TESSERA_ASSIGN_OR_RETURN(
              after, AddHistoryPage(nlohmann::json::parse(page.dump()), Catalog(), &out.history));
          ++out.pages;
        } while (after != 0);
        return Status::Ok();
      });
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_GT(Summarize(run->run).preemptions, 0) << "the workload should preempt";
  return out;
}

// One run shared by the tests (a few seconds).
const Recorded& Shared() {
  static const Recorded r = RunRecorded("tiresias");
  return r;
}

double RelDiff(double a, double b) {
  return std::abs(a - b) / std::max({std::abs(a), std::abs(b), 1e-9});
}

TEST(WhatIfControllerTest, RecordsJobsAttemptsNodesAndThePolicy) {
  const Recorded& r = Shared();
  EXPECT_EQ(r.pages, 3);  // 120 jobs, 50 a page
  ASSERT_EQ(r.history.jobs.size(), r.jobs.size());
  EXPECT_EQ(r.history.policy.name, "tiresias");
  EXPECT_EQ(r.history.policy.restart_overhead, 60 * kSec);
  EXPECT_EQ(r.history.policy.min_run_before_reclaim, 60 * kSec);
  // Four joins, then the removal.
  ASSERT_EQ(r.history.nodes.size(), 5u);
  int leaves = 0;
  for (const RecordedNode& n : r.history.nodes) {
    leaves += n.left ? 1 : 0;
  }
  EXPECT_EQ(leaves, 1);
  // Every job's actual work is its true runtime, preempted ones included.
  std::map<std::string, Micros> truth;
  for (const SimJob& j : r.jobs) {
    truth[j.spec.name] = j.duration;
  }
  int resumed = 0;
  for (const RecordedJob& j : r.history.jobs) {
    EXPECT_EQ(j.state, "succeeded");
    EXPECT_EQ(ActualWork(j, r.history.policy.restart_overhead), truth.at(j.spec.name))
        << j.spec.name << " attempts " << j.attempts;
    EXPECT_EQ(static_cast<int>(j.runs.size()), j.attempts);
    resumed += j.attempts > 1 ? 1 : 0;
  }
  EXPECT_GT(resumed, 0);
}

// The replay of the policy that ran against what happened, and `other` beside them.
void ExpectReplayMatches(const Recorded& r, const std::string& other) {
  WhatIfOptions o;
  o.policy = other;
  StatusOr<WhatIfReport> report = RunWhatIf(r.history, o, Catalog());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  std::cout << WhatIfText(*report);
  EXPECT_EQ(report->replayed, 120);
  EXPECT_EQ(report->nodes, 4);  // the removed node was there through the window
  ASSERT_EQ(report->sides.size(), 3u);
  bool other_differs = false;
  int tenants = 0;
  double largest = 0;
  for (const WhatIfGroup& g : report->groups) {
    ASSERT_EQ(g.sides.size(), 3u);
    const WhatIfFigures& actual = g.sides[0];
    const WhatIfFigures& same = g.sides[1];
    tenants += g.kind == "tenant" ? 1 : 0;
    EXPECT_EQ(actual.jobs, same.jobs) << g.kind << " " << g.name;
    EXPECT_LT(RelDiff(actual.avg_jct_s, same.avg_jct_s), 0.01)
        << g.kind << " " << g.name << ": " << actual.avg_jct_s << " vs " << same.avg_jct_s;
    EXPECT_LT(RelDiff(actual.avg_wait_s, same.avg_wait_s), 0.01)
        << g.kind << " " << g.name << ": " << actual.avg_wait_s << " vs " << same.avg_wait_s;
    EXPECT_LT(RelDiff(actual.utilization, same.utilization), 0.01) << g.kind << " " << g.name;
    largest = std::max({largest, RelDiff(actual.avg_jct_s, same.avg_jct_s),
                        RelDiff(actual.avg_wait_s, same.avg_wait_s),
                        RelDiff(actual.utilization, same.utilization)});
    EXPECT_EQ(g.sides[2].jobs, actual.jobs);
    other_differs = other_differs || RelDiff(g.sides[2].avg_jct_s, same.avg_jct_s) > 0.01;
  }
  std::cout << "largest relative difference, what happened against its replay: " << largest
            << "\n";
  EXPECT_EQ(tenants, 3);
  EXPECT_TRUE(other_differs) << other << " should not reproduce " << r.history.policy.name;
  EXPECT_LT(RelDiff(report->summaries[0].jain, report->summaries[1].jain), 0.01);
}

TEST(WhatIfControllerTest, ReplayOfThePolicyThatRanMatchesWhatHappened) {
  ExpectReplayMatches(Shared(), "fifo");
}

// The live controller's default policy (LAS with predicted GPU-time, reclaim, checkpoint
// wait) learns runtimes as jobs end: the replay learns them in the same order.
TEST(WhatIfControllerTest, ReplayOfTheDefaultPolicyMatchesWhatHappened) {
  ExpectReplayMatches(RunRecorded("tessera"), "tiresias");
}

TEST(WhatIfControllerTest, ClearErrors) {
  const Recorded& r = Shared();
  WhatIfOptions o;
  o.policy = "no-such-policy";
  StatusOr<WhatIfReport> bad = RunWhatIf(r.history, o, Catalog());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--policy"), std::string::npos) << bad.status().message();

  RecordedHistory empty = r.history;
  empty.jobs.clear();
  StatusOr<WhatIfReport> none = RunWhatIf(empty, WhatIfOptions{}, Catalog());
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("no job to replay"), std::string::npos)
      << none.status().message();
}

}  // namespace
}  // namespace tessera
