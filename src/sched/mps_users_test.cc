// Shares of different tenants (different Unix uids) on a shared GPU served by
// single-user MPS, through the JobLifecycle as every driver runs it: a tenant's share
// waits while another tenant's shares hold the card and starts when they end; shares of
// one tenant meet; a node whose MPS serves several users (mps-multi-user=on), or one
// without MPS, takes both at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/node.h"
#include "sched/job_lifecycle.h"
#include "sched/testing/scheduler_harness.h"

namespace tessera {
namespace {

using namespace ::tessera::testing;  // NOLINT: the harness and its builders

// One A100 in shared mode with the given labels.
NodeSpec SharedNode(std::vector<std::pair<std::string, std::string>> labels) {
  NodeSpec n = MakeUniformNode("n0", MilliCpu(64000), MiB(1 << 19), Model("A100-80GB"), 1,
                               SharingMode::kShared);
  n.labels = std::move(labels);
  return n;
}

JobSpec ShareJob(std::string name, std::string queue, int64_t milli) {
  JobSpec s;
  s.name = std::move(name);
  s.queue = std::move(queue);
  s.tasks.push_back(Share(milli));
  return s;
}

std::vector<uint64_t> StartedSorted(const CycleResult& r) {
  std::vector<uint64_t> ids = Started(r);
  std::sort(ids.begin(), ids.end());
  return ids;
}

// Queues a and b: two tenants (a queue's tenant is its own name unless set).
QueueTreeSpec TwoTenants() { return Tree({QueueNode("a"), QueueNode("b")}); }

TEST(MpsUsersTest, AnotherTenantsShareWaitsForTheSingleUserMpsGpuAndStartsWhenItFrees) {
  Harness h({SharedNode({{"mps", "on"}})}, TwoTenants(), SchedulerOptions{});
  JobId a1 = h.Submit(ShareJob("a1", "a", 250), 0);
  JobId a2 = h.Submit(ShareJob("a2", "a", 250), 0);
  JobId b1 = h.Submit(ShareJob("b1", "b", 250), 0);
  EXPECT_EQ(StartedSorted(h.Cycle(0)), (std::vector<uint64_t>{a1.value(), a2.value()}));
  EXPECT_EQ(h.job(b1).phase, JobPhase::kPending);  // room for it, but not its uid's server
  EXPECT_NE(h.job(a1).spec.tasks[0].identity, h.job(b1).spec.tasks[0].identity);
  EXPECT_EQ(h.job(a1).allocations[0].identity, h.job(a1).spec.tasks[0].identity);

  h.Finish(a1, 10 * kSecond);
  EXPECT_TRUE(h.Cycle(10 * kSecond).starts.empty());  // a2 still holds the card
  h.Finish(a2, 20 * kSecond);
  EXPECT_EQ(Started(h.Cycle(20 * kSecond)), std::vector<uint64_t>{b1.value()});
  // Now tenant a waits for b.
  JobId a3 = h.Submit(ShareJob("a3", "a", 250), 30 * kSecond);
  EXPECT_TRUE(h.Cycle(30 * kSecond).starts.empty());
  EXPECT_EQ(h.job(a3).phase, JobPhase::kPending);
  h.Finish(b1, 40 * kSecond);
  EXPECT_EQ(Started(h.Cycle(40 * kSecond)), std::vector<uint64_t>{a3.value()});
}

TEST(MpsUsersTest, MultiUserMpsOrNoMpsTakesBothTenantsAtOnce) {
  for (const auto& labels : std::vector<std::vector<std::pair<std::string, std::string>>>{
           {{"mps", "on"}, {"mps-multi-user", "on"}},
           {{"mps", "off"}},
           {{"mps", "unavailable"}},
           {}}) {
    Harness h({SharedNode(labels)}, TwoTenants(), SchedulerOptions{});
    JobId a1 = h.Submit(ShareJob("a1", "a", 250), 0);
    JobId b1 = h.Submit(ShareJob("b1", "b", 250), 0);
    EXPECT_EQ(StartedSorted(h.Cycle(0)), (std::vector<uint64_t>{a1.value(), b1.value()}))
        << (labels.empty() ? "no labels" : labels.back().first + "=" + labels.back().second);
  }
}

TEST(MpsUsersTest, TenantsOfOneQueueTreeTenantShareTheGpu) {
  // Two queues billed to one tenant run as one uid: their shares meet.
  QueueNodeSpec a = QueueNode("a");
  QueueNodeSpec a_dev = QueueNode("a-dev");
  a_dev.tenant = "a";
  Harness h({SharedNode({{"mps", "on"}})}, Tree({a, a_dev, QueueNode("b")}), SchedulerOptions{});
  JobId j1 = h.Submit(ShareJob("j1", "a", 250), 0);
  JobId j2 = h.Submit(ShareJob("j2", "a-dev", 250), 0);
  JobId j3 = h.Submit(ShareJob("j3", "b", 250), 0);
  EXPECT_EQ(StartedSorted(h.Cycle(0)), (std::vector<uint64_t>{j1.value(), j2.value()}));
  EXPECT_EQ(h.job(j3).phase, JobPhase::kPending);
}

TEST(MpsUsersTest, OnlySharesCarryTheIdentity) {
  JobSpec s = ShareJob("s", "a", 250);
  s.tasks.push_back(Whole(1));
  SetShareIdentity(s, TenantIdentity("a"));
  EXPECT_EQ(s.tasks[0].identity, TenantIdentity("a"));
  EXPECT_EQ(s.tasks[1].identity, 0u);
  EXPECT_NE(TenantIdentity("a"), TenantIdentity("b"));
  EXPECT_NE(TenantIdentity(""), 0u);
}

}  // namespace
}  // namespace tessera
