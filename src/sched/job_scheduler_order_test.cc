// PendingOrder (queue positions) against the order in which a cycle tries the jobs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "sched/job_scheduler.h"
#include "sched/testing/scheduler_harness.h"

namespace tessera {
namespace {

using namespace ::tessera::testing;  // NOLINT: the harness and its builders

std::vector<uint64_t> Values(const std::vector<JobId>& ids) {
  std::vector<uint64_t> out;
  for (JobId id : ids) {
    out.push_back(id.value());
  }
  return out;
}

TEST(JobSchedulerOrderTest, PendingOrderIsTheOrderTheCycleStartsJobsIn) {
  // Room for every job, so the cycle starts each one as it visits it: its starts are its
  // visit order. Starving jobs first, then two queues merged by priority, then submission.
  SchedulerOptions o;
  o.starvation_limit = kHour;
  Harness h({GpuNode("n0"), GpuNode("n1")}, Tree({QueueNode("a"), QueueNode("b")}), o,
            SubmitOrder(true));
  const Micros m = 60 * kSecond;
  JobId old_a = h.Submit(Gang("old-a", "a", {1}, 0, 0), 0);
  JobId old_b = h.Submit(Gang("old-b", "b", {1}, 0, 10 * kSecond), 10 * kSecond);
  JobId x = h.Submit(Gang("x", "a", {1}, 0, 90 * m), 90 * m);
  JobId y = h.Submit(Gang("y", "a", {1}, 5, 100 * m), 100 * m);
  JobId z = h.Submit(Gang("z", "b", {1}, 0, 95 * m), 95 * m);
  JobId w = h.Submit(Gang("w", "b", {1}, 5, 91 * m), 91 * m);
  const Micros now = 2 * kHour;
  const std::vector<uint64_t> expected = {old_a.value(), old_b.value(), w.value(),
                                          y.value(),     x.value(),     z.value()};
  EXPECT_EQ(Values(h.scheduler().PendingOrder(h.jobs(), now)), expected);
  EXPECT_EQ(Started(h.Cycle(now)), expected);
}

TEST(JobSchedulerOrderTest, PendingOrderListsWhatACycleWouldSkip) {
  // One GPU free: the cycle starts the first job in order and stops (the cluster is
  // full); PendingOrder still lists all of them, the started one first.
  Harness h({GpuNode("n0", 1)}, Tree({QueueNode("a"), QueueNode("b")}), SchedulerOptions{},
            SubmitOrder(true));
  JobId a1 = h.Submit(Gang("a1", "a", {1}, 0, 2 * kSecond), 2 * kSecond);
  JobId b1 = h.Submit(Gang("b1", "b", {1}, 0, kSecond), kSecond);
  JobId a2 = h.Submit(Gang("a2", "a", {1}, 3, 3 * kSecond), 3 * kSecond);
  const std::vector<uint64_t> order = Values(h.scheduler().PendingOrder(h.jobs(), 4 * kSecond));
  EXPECT_EQ(order, (std::vector<uint64_t>{a2.value(), b1.value(), a1.value()}));
  CycleResult r = h.Cycle(4 * kSecond);
  EXPECT_EQ(Started(r), std::vector<uint64_t>{order.front()});
  EXPECT_EQ(r.tested, 1);
}

JobSpec By(JobSpec spec, std::string user) {
  spec.user = std::move(user);
  return spec;
}

TEST(JobSchedulerOrderTest, FairUsersPutTheLeastServedUserFirstKeepingEachUsersOrder) {
  // Alice ran a GPU for an hour, Bob nothing: with fair-users Bob's jobs come first,
  // each user's in submission order, and priority still before users.
  auto order = [](bool fair_users) {
    SchedulerOptions o;
    o.user_fair_share = fair_users;
    Harness h({GpuNode("n0", 1)}, OneQueue(), o, SubmitOrder(true));
    JobId ran = h.Submit(By(Gang("ran", "q", {1}, 0, 0), "alice"), 0);
    EXPECT_EQ(Started(h.Cycle(0)), std::vector<uint64_t>{ran.value()});
    h.Finish(ran, kHour);
    std::vector<JobId> ids;
    int i = 0;
    for (const char* user : {"alice", "bob", "alice", "bob"}) {
      const Micros t = kHour + (++i) * kSecond;
      ids.push_back(h.Submit(By(Gang(user, "q", {1}, 0, t), user), t));
    }
    const Micros t = kHour + 10 * kSecond;
    ids.push_back(h.Submit(By(Gang("urgent", "q", {1}, 5, t), "alice"), t));
    std::vector<uint64_t> out;
    for (JobId id : h.scheduler().PendingOrder(h.jobs(), kHour + 60 * kSecond)) {
      out.push_back(std::find(ids.begin(), ids.end(), id) - ids.begin());
    }
    if (fair_users) {
      // Alice's decayed usage is kept per user (and carried over with the queues').
      QueueUsage::Saved saved = h.scheduler().SaveUsage(kHour + 60 * kSecond);
      EXPECT_EQ(saved.users.size(), 2u);
      EXPECT_GT(saved.users[0].decayed, 3000.0 * 1000.0);  // about an hour of 1000 milli
    }
    return out;
  };
  // Indices into ids: a1 b1 a2 b2 urgent(alice, priority 5).
  EXPECT_EQ(order(false), (std::vector<uint64_t>{4, 0, 1, 2, 3}));
  EXPECT_EQ(order(true), (std::vector<uint64_t>{4, 1, 3, 0, 2}));
}

}  // namespace
}  // namespace tessera
