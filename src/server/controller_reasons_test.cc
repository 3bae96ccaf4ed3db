// Pending reasons and refusals at submission, through the controller: a share asking
// more GPU memory than any card has, a gang larger than the schedulable GPUs (one
// drained), a queue waiting for the quota it lent, a pending job whose nodes left,
// a cluster with no node yet, nodes that are down (timed out, or not back since a
// restart) or just registered, and a queue at its quota under a policy without
// borrowing.
#include <gtest/gtest.h>

#include <string>

#include "base/time_format.h"
#include "server/controller_fixture.h"

namespace tessera {
namespace {

class ControllerReasonsTest : public ControllerTest {
 protected:
  // A node of `gpus` H100s in `mode`, registered by its own agent.
  void AddNode(const std::string& name, SharingMode mode, int gpus = 8) {
    RegisterRequest r;
    r.agent_id = "agent-" + name;
    r.inventory.spec = MakeUniformNode(name, MilliCpu(64000), MiB(512 * 1024),
                                       catalog().Find("H100-80GB").value(), gpus, mode);
    for (int g = 0; g < gpus; ++g) {
      r.inventory.gpu_uuids.push_back(name + "-GPU-" + std::to_string(g));
      r.inventory.mig_instances.emplace_back();
    }
    auto out = controller_->Register(r, "127.0.0.1");
    ASSERT_TRUE(out.ok()) << out.status().ToString();
  }

  StatusOr<JobIntake::Submitted> TrySubmit(const std::string& tenant, const std::string& yaml) {
    StatusOr<JobSubmission> job = ParseJobYaml(yaml, catalog());
    if (!job.ok()) {
      return job.status();
    }
    return controller_->intake().Submit(Principal{Role::kTenant, tenant, "test"},
                                        std::move(job).value(), "");
  }

  nlohmann::json Job(uint64_t id) {
    auto j = Reads().GetJob(Principal{Role::kAdmin, "", "test"}, JobNumber(id));
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? *j : nlohmann::json{};
  }
  std::string Reason(uint64_t id) { return Job(id)["reason"].get<std::string>(); }

  void Heartbeat(const std::string& name) {
    auto r = controller_->Heartbeat(HeartbeatRequest{name, "agent-" + name, {}, {}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
};

constexpr const char* kEight = "command: [/bin/true]\nresources: {gpus: 8}\n";

constexpr const char* kBigShare =
    "command: [/bin/true]\nresources: {gpu_fraction: 0.5, gpu_memory: 90GiB}\n";
constexpr const char* kSixteen = "command: [/bin/true]\nreplicas: 2\nresources: {gpus: 8}\n";

// (a) A 90 GiB share on 80 GB cards: refused, or held with the reason.
TEST_F(ControllerReasonsTest, ShareLargerThanAnyCardIsRefusedOrHeld) {
  AddNode("n1", SharingMode::kShared);
  ASSERT_TRUE(controller_->RunCycle().ok());
  StatusOr<JobIntake::Submitted> refused = TrySubmit("team-a", kBigShare);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(),
            "never fits: a task asks 90 GiB of GPU memory per GPU; the largest GPU has 79.6 GiB "
            "(H100-80GB) (set hold_if_unfit, `tessera submit --hold-if-unfit`, to keep it pending "
            "until nodes that fit it join)");
  const uint64_t held = Submit("team-a", std::string(kBigShare) + "hold_if_unfit: true\n");
  ASSERT_TRUE(controller_->RunCycle().ok());
  EXPECT_EQ(Job(held)["state"], "pending");
  EXPECT_EQ(Reason(held),
            "never fits: a task asks 90 GiB of GPU memory per GPU; the largest GPU has 79.6 GiB "
            "(H100-80GB)");
  // A share that fits runs.
  const uint64_t fits = Submit("team-a",
                               "command: [/bin/true]\nresources: {gpu_fraction: 0.5, "
                               "gpu_memory: 40GiB}\n");
  ASSERT_TRUE(controller_->RunCycle().ok());
  EXPECT_EQ(Job(fits)["state"], "running");
}

// (b) 16 GPUs asked of 16 with one drained and nothing running: kept (drains end),
// with a reason that says it waits for the drain; 17 GPUs are refused.
TEST_F(ControllerReasonsTest, GangLargerThanTheSchedulableGpus) {
  AddNode("n1", SharingMode::kExclusive);
  AddNode("n3", SharingMode::kExclusive);
  ASSERT_TRUE(NodeAdmin().Drain("n3", 5, "xid 79").ok());
  ASSERT_TRUE(controller_->RunCycle().ok());
  StatusOr<JobIntake::Submitted> refused =
      TrySubmit("team-a", "command: [/bin/true]\nreplicas: 17\nresources: {gpus: 1}\n");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message().rfind("never fits: the job needs 17 GPUs; 16 are", 0), 0u)
      << refused.status().message();
  const uint64_t held = Submit("team-a", kSixteen);
  ASSERT_TRUE(controller_->RunCycle().ok());
  EXPECT_EQ(Reason(held),
            "held by a drain: only drained nodes or GPUs could run it; it starts when a drain "
            "ends (`tessera nodes` shows them; never fits: the job needs 16 GPUs; 15 are "
            "schedulable (1 drained on node n3))");
  // The drain lifted: it runs.
  ASSERT_TRUE(NodeAdmin().Resume("n3", 5).ok());
  ASSERT_TRUE(controller_->RunCycle().ok());
  EXPECT_EQ(Job(held)["state"], "running");
}

// Draining the only node of a GPU model queues that model's jobs for the maintenance
// window instead of refusing them.
TEST_F(ControllerReasonsTest, DrainingTheOnlyNodeOfAModelQueuesItsJobs) {
  AddNode("n1", SharingMode::kExclusive);  // H100s
  RegisterRequest r;
  r.agent_id = "agent-a1";
  r.inventory.spec = MakeUniformNode("a1", MilliCpu(64000), MiB(512 * 1024),
                                     catalog().Find("A100-80GB").value(), 4, SharingMode::kExclusive);
  for (int g = 0; g < 4; ++g) {
    r.inventory.gpu_uuids.push_back("a1-GPU-" + std::to_string(g));
    r.inventory.mig_instances.emplace_back();
  }
  ASSERT_TRUE(controller_->Register(r, "127.0.0.1").ok());
  ASSERT_TRUE(NodeAdmin().Drain("a1", -1, "maintenance").ok());
  ASSERT_TRUE(controller_->RunCycle().ok());
  const uint64_t id = Submit(
      "team-a", "command: [/bin/true]\nresources: {gpus: 2, gpu_model: A100-80GB}\n");
  ASSERT_TRUE(controller_->RunCycle().ok());
  EXPECT_EQ(Job(id)["state"], "pending");
  EXPECT_EQ(Reason(id).rfind("held by a drain: only drained nodes or GPUs could run it", 0), 0u)
      << Reason(id);
  // More A100s than any node has is still refused at once.
  EXPECT_FALSE(
      TrySubmit("team-a", "command: [/bin/true]\nresources: {gpus: 5, gpu_model: A100-80GB}\n")
          .ok());
  ASSERT_TRUE(NodeAdmin().Resume("a1", -1).ok());
  ASSERT_TRUE(controller_->RunCycle().ok());
  EXPECT_EQ(Job(id)["state"], "running");
}

// (c) A queue under its nominal quota waits for what it lent.
TEST_F(ControllerReasonsTest, QueueWaitingForItsLentQuotaNamesTheBorrower) {
  AddNode("n1", SharingMode::kExclusive);
  AddNode("n2", SharingMode::kExclusive);
  ASSERT_TRUE(controller_->RunCycle().ok());
  const uint64_t borrower = Submit("team-b", kSixteen);  // 8 of its own, 8 of team-a's
  ASSERT_TRUE(controller_->RunCycle().ok());
  ASSERT_EQ(Job(borrower)["state"], "running");
  const uint64_t waiting = Submit("team-a", kEight);
  ASSERT_TRUE(controller_->RunCycle().ok());
  const std::string reason = Reason(waiting);
  EXPECT_EQ(reason.rfind("waiting for quota: the job asks 8 GPUs; queue team-a of cohort cluster "
                         "uses 0 GPUs of its nominal 8 GPUs; the rest of its quota is lent to "
                         "queue team-b (job " +
                             std::to_string(borrower) + ")",
                         0),
            0u)
      << reason;
  EXPECT_NE(reason.find("reclaim is"), std::string::npos) << reason;
}

// A pending job whose nodes leave (here: drained) shows why and stays pending.
TEST_F(ControllerReasonsTest, PendingJobThatBecomesUnfitStaysPendingWithTheReason) {
  AddNode("n1", SharingMode::kExclusive);
  AddNode("n2", SharingMode::kExclusive);
  ASSERT_TRUE(controller_->RunCycle().ok());
  const uint64_t first = Submit("team-a", "command: [/bin/true]\nresources: {gpus: 8}\n");
  ASSERT_TRUE(controller_->RunCycle().ok());
  ASSERT_EQ(Job(first)["state"], "running");
  const uint64_t gang = Submit("team-b", kSixteen);
  ASSERT_TRUE(controller_->RunCycle().ok());
  EXPECT_EQ(Job(gang)["state"], "pending");
  EXPECT_EQ(Reason(gang).rfind("waiting for", 0), 0u) << Reason(gang);
  ASSERT_TRUE(NodeAdmin().Drain("n2", -1, "maintenance").ok());
  ASSERT_TRUE(controller_->RunCycle().ok());
  EXPECT_EQ(Job(gang)["state"], "pending");
  EXPECT_EQ(Reason(gang),
            "held by a drain: only drained nodes or GPUs could run it; it starts when a drain "
            "ends (`tessera nodes` shows them; never fits: the job needs 16 GPUs; 8 are "
            "schedulable (8 drained on node n2))");
}

// A cluster in maintenance (every node drained) refuses nothing either.
TEST_F(ControllerReasonsTest, EveryNodeDrainedAcceptsAndSaysSo) {
  AddNode("n1", SharingMode::kExclusive);
  ASSERT_TRUE(NodeAdmin().Drain("n1", -1, "maintenance").ok());
  ASSERT_TRUE(controller_->RunCycle().ok());
  const uint64_t id = Submit("team-a", "command: [/bin/true]\nresources: {gpus: 8}\n");
  ASSERT_TRUE(controller_->RunCycle().ok());
  EXPECT_EQ(Reason(id), "held by a drain: every node is drained (1 node drained: n1)");
  ASSERT_TRUE(NodeAdmin().Resume("n1", -1).ok());
  ASSERT_TRUE(controller_->RunCycle().ok());
  EXPECT_EQ(Job(id)["state"], "running");
}

// A cluster starting up refuses nothing.
TEST_F(ControllerReasonsTest, NoNodeYetAcceptsAndSaysSo) {
  const uint64_t id = Submit("team-a", kSixteen);
  ASSERT_TRUE(controller_->RunCycle().ok());
  EXPECT_EQ(Reason(id), "no node is up");
  AddNode("n1", SharingMode::kExclusive);
  ASSERT_TRUE(controller_->RunCycle().ok());
  EXPECT_EQ(Reason(id), "never fits: the job needs 16 GPUs; 8 are schedulable");
}

// A batch refuses a job that never fits, naming it, unless that job asks to be held.
TEST_F(ControllerReasonsTest, BatchFollowsTheRulePerJob) {
  AddNode("n1", SharingMode::kExclusive);
  ASSERT_TRUE(controller_->RunCycle().ok());
  auto job = [&](const std::string& yaml) { return ParseJobYaml(yaml, catalog()).value(); };
  const Principal who{Role::kTenant, "team-a", "test"};
  auto refused = controller_->intake().SubmitBatch(
      who, {job("command: [/bin/true]\nresources: {gpus: 1}\n"), job(kSixteen)}, "");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message().rfind("jobs[1]: never fits: the job needs 16 GPUs; 8 are "
                                             "schedulable",
                                             0),
            0u)
      << refused.status().message();
  auto held =
      controller_->intake().SubmitBatch(who,
                                        {job("command: [/bin/true]\nresources: {gpus: 1}\n"),
                                         job(std::string(kSixteen) + "hold_if_unfit: true\n")},
                                        "");
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_EQ(held->jobs.size(), 2u);
}

// Nodes that are down count for "never fits": a job that only they could hold is
// accepted and waits for them, by name.
class ControllerDownNodeReasonsTest : public ControllerReasonsTest {
 protected:
  void Tune(ControllerOptions& o) override { o.node_timeout = 2 * kSecond; }
};

TEST_F(ControllerDownNodeReasonsTest, NodeThatTimesOutDoesNotMakeAJobUnfit) {
  AddNode("n1", SharingMode::kExclusive, 4);
  AddNode("n2", SharingMode::kExclusive, 8);
  ASSERT_TRUE(controller_->RunCycle().ok());
  const uint64_t before = Submit("team-b", kEight);  // runs on n2, then requeued
  ASSERT_TRUE(controller_->RunCycle().ok());
  ASSERT_EQ(Job(before)["state"], "running");
  const Micros last_seen = clock_.NowMicros();
  clock_.Advance(3 * kSecond);  // n2's agent is silent past the timeout; n1's is not
  Heartbeat("n1");
  ASSERT_TRUE(controller_->RunCycle().ok());
  const std::string down = "waiting for node n2, which is down since " +
                           FormatRfc3339(last_seen) +
                           " (no heartbeat for 2 s); no node that is up could ever hold it";
  EXPECT_EQ(Job(before)["state"], "pending");
  EXPECT_EQ(Reason(before), "requeued: node n2 was lost (no heartbeat for 2 s); " + down);
  StatusOr<JobIntake::Submitted> accepted = TrySubmit("team-a", kEight);
  ASSERT_TRUE(accepted.ok()) << accepted.status().ToString();
  const uint64_t after = accepted->jobs.front().value();
  ASSERT_TRUE(controller_->RunCycle().ok());
  EXPECT_EQ(Job(after)["state"], "pending");
  EXPECT_EQ(Reason(after), down);
  // What no known node could hold is still refused.
  StatusOr<JobIntake::Submitted> refused = TrySubmit("team-a", kSixteen);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message().rfind("never fits: the job needs 16 GPUs; 12 are "
                                             "schedulable",
                                             0),
            0u)
      << refused.status().message();
  // Its agent back: the first of them starts there.
  AddNode("n2", SharingMode::kExclusive, 8);
  ASSERT_TRUE(controller_->RunCycle().ok());
  EXPECT_EQ(Job(before)["state"], "running");
  EXPECT_EQ(Job(after)["state"], "pending");
  EXPECT_EQ(Reason(after).rfind("waiting for", 0), 0u) << Reason(after);
  EXPECT_EQ(Reason(after).find("down"), std::string::npos) << Reason(after);
}

TEST_F(ControllerReasonsTest, AfterARestartTheStoredNodesCountBeforeTheirAgentsReturn) {
  AddNode("n1", SharingMode::kExclusive, 4);
  AddNode("n2", SharingMode::kExclusive, 8);
  ASSERT_TRUE(controller_->RunCycle().ok());
  Reopen();
  // No agent back yet: judged against the stored inventories.
  StatusOr<JobIntake::Submitted> refused =
      TrySubmit("team-a", "command: [/bin/true]\nresources: {gpus: 9}\n");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message().rfind("never fits: a task asks 9 GPUs on one node; a "
                                             "schedulable node has at most 8",
                                             0),
            0u)
      << refused.status().message();
  // Only the smaller node back, and a cycle run: the bigger one still counts.
  AddNode("n1", SharingMode::kExclusive, 4);
  ASSERT_TRUE(controller_->RunCycle().ok());
  StatusOr<JobIntake::Submitted> accepted = TrySubmit("team-a", kEight);
  ASSERT_TRUE(accepted.ok()) << accepted.status().ToString();
  const uint64_t id = accepted->jobs.front().value();
  ASSERT_TRUE(controller_->RunCycle().ok());
  EXPECT_EQ(Job(id)["state"], "pending");
  EXPECT_EQ(Reason(id), "waiting for node n2, which is down since " +
                            FormatRfc3339(clock_.NowMicros()) +
                            " (waiting for its agent after a controller restart); no node "
                            "that is up could ever hold it");
  AddNode("n2", SharingMode::kExclusive, 8);
  ASSERT_TRUE(controller_->RunCycle().ok());
  EXPECT_EQ(Job(id)["state"], "running");
}

// A node that just registered counts at once, before the next cycle.
TEST_F(ControllerReasonsTest, SubmitRightAfterABiggerNodeRegistersIsAccepted) {
  AddNode("n1", SharingMode::kExclusive, 4);
  ASSERT_TRUE(controller_->RunCycle().ok());
  StatusOr<JobIntake::Submitted> refused = TrySubmit("team-a", kEight);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message().rfind("never fits: a task asks 8 GPUs on one node; a "
                                             "schedulable node has at most 4",
                                             0),
            0u)
      << refused.status().message();
  AddNode("n2", SharingMode::kExclusive, 8);
  StatusOr<JobIntake::Submitted> accepted = TrySubmit("team-a", kEight);
  ASSERT_TRUE(accepted.ok()) << accepted.status().ToString();
  // And a batch too.
  auto batch = controller_->intake().SubmitBatch(Principal{Role::kTenant, "team-a", "test"},
                                                 {ParseJobYaml(kEight, catalog()).value()}, "");
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  ASSERT_TRUE(controller_->RunCycle().ok());
  EXPECT_EQ(Job(accepted->jobs.front().value())["state"], "running");
}

// Under a policy without borrowing, a queue at its own quota says so (as the scheduler
// and `show` judge it), not that it waits for its turn.
class ControllerStaticVcReasonsTest : public ControllerReasonsTest {
 protected:
  void Tune(ControllerOptions& o) override { o.policy = "static-vc"; }
};

TEST_F(ControllerStaticVcReasonsTest, QueueAtItsQuotaSaysBorrowingIsOff) {
  AddNode("n1", SharingMode::kExclusive);
  AddNode("n2", SharingMode::kExclusive);
  ASSERT_TRUE(controller_->RunCycle().ok());
  const uint64_t first = Submit("team-a", kEight);
  ASSERT_TRUE(controller_->RunCycle().ok());
  ASSERT_EQ(Job(first)["state"], "running");
  const uint64_t second = Submit("team-a", kEight);
  ASSERT_TRUE(controller_->RunCycle().ok());
  ASSERT_TRUE(controller_->RunCycle().ok());
  EXPECT_EQ(Job(second)["state"], "pending");  // 8 GPUs idle on the other node
  EXPECT_EQ(Reason(second),
            "waiting for quota: the job asks 8 GPUs; queue team-a of cohort cluster uses 8 GPUs "
            "of its nominal 8 GPUs; the queue is at its own quota and borrowing is off under "
            "this policy");
}

}  // namespace
}  // namespace tessera
