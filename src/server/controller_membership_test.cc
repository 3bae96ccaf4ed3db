// Nodes joining and leaving change the scheduler's cluster in place: no rebuild, the
// running work elsewhere untouched, and after a restart a node that comes back holds
// its running tasks' GPUs again before anything else may take them. On a manual clock,
// no sleeps.
#include <gtest/gtest.h>

#include <regex>

#include "server/controller_fixture.h"

namespace tessera {
namespace {

constexpr const char* kTwoGpus =
    "name: two\nresources: {gpus: 2, gpu_model: H100-80GB}\ncommand: [x]\n";

class ControllerMembershipTest : public ControllerTest {
 protected:
  void Tune(ControllerOptions& o) override {
    o.node_timeout = 30 * kSecond;
    o.history_interval = 0;
  }

  // node-2: node-1's inventory under another name, played by its own agent.
  RegisterRequest Node2(const std::string& agent) const {
    RegisterRequest r = Inventory();
    r.agent_id = agent;
    r.inventory.spec.name = "node-2";
    return r;
  }
  void Beat1() {
    auto r = controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, Running(), {}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    for (const TaskLaunch& l : r->launch) {
      running_[l.key.job] = l.key;
    }
  }
  // The launches node-2's agent gets in a heartbeat.
  std::vector<TaskLaunch> Beat2(const std::string& agent) {
    auto r = controller_->Heartbeat(HeartbeatRequest{"node-2", agent, {}, {}});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->launch : std::vector<TaskLaunch>{};
  }
  nlohmann::json Job(uint64_t id) {
    auto j = controller_->GetJob(Principal{Role::kAdmin, "", "test"}, id);
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? *j : nlohmann::json();
  }
  uint64_t Rebuilds() {
    std::smatch m;
    const std::string text = controller_->Metrics();
    static const std::regex kLine("\ntessera_scheduler_rebuilds_total ([0-9]+)\n");
    EXPECT_TRUE(std::regex_search(text, m, kLine));
    return m.empty() ? 0 : std::stoull(m[1]);
  }
  void ExpectInvariants() {
    std::vector<std::string> broken = controller_->CheckInvariants();
    EXPECT_TRUE(broken.empty()) << broken.front();
  }
};

TEST_F(ControllerMembershipTest, ANodeLeavingAndRejoining100TimesChangesTheClusterInPlace) {
  Register();
  const uint64_t kept = Submit("team-a", kTwoGpus);
  ASSERT_EQ(CycleAndTake().size(), 1u);  // node-1 is the only node: the job runs there
  ASSERT_TRUE(controller_->Register(Node2("agent-2-0"), "127.0.0.1").ok());
  ASSERT_TRUE(controller_->RunCycle().ok());
  ASSERT_EQ(Rebuilds(), 1u);

  for (int flap = 1; flap <= 100; ++flap) {
    clock_.Advance(31 * kSecond);
    Beat1();  // node-1 stays; node-2 falls silent
    ASSERT_TRUE(controller_->RunCycle().ok());
    const std::string agent = "agent-2-" + std::to_string(flap);
    ASSERT_TRUE(controller_->Register(Node2(agent), "127.0.0.1").ok());
    ASSERT_TRUE(controller_->RunCycle().ok());
    ExpectInvariants();
    if (HasFailure()) {
      break;
    }
  }
  EXPECT_EQ(Rebuilds(), 1u) << "a node event rebuilt the scheduler's cluster";
  nlohmann::json j = Job(kept);
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["attempts"], 1);

  // node-2 is back in the cluster: a job that needs its GPUs starts there.
  const uint64_t next = Submit("team-a", kTwoGpus);
  ASSERT_TRUE(controller_->RunCycle().ok());
  std::vector<TaskLaunch> launches = Beat2("agent-2-100");
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].key.job, next);
  ExpectInvariants();
}

TEST_F(ControllerMembershipTest, AfterARestartARunningTasksNodeHoldsItsGpusAgainWhenItReturns) {
  Register();
  const uint64_t first = Submit("team-a", kTwoGpus);
  ASSERT_EQ(CycleAndTake().size(), 1u);  // both H100s of node-1

  Reopen();
  ASSERT_TRUE(controller_->RunCycle().ok());  // the core is built before the agent is back
  Register();                                 // reports the task still running
  const uint64_t second = Submit("team-a", kTwoGpus);
  EXPECT_TRUE(CycleAndTake().empty()) << "the second job took GPUs the first still runs on";
  EXPECT_EQ(Job(first)["state"], "running");
  EXPECT_EQ(Job(second)["state"], "pending");
  ExpectInvariants();

  Exit(first);
  std::vector<TaskLaunch> launches = CycleAndTake();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].key.job, second);
  EXPECT_EQ(Job(first)["state"], "succeeded");
  ExpectInvariants();
}

TEST_F(ControllerMembershipTest, ANodeWithANewInventoryTakesItOnceItsWorkHasEnded) {
  Register();
  const uint64_t first = Submit("team-a", kTwoGpus);
  ASSERT_EQ(CycleAndTake().size(), 1u);
  // The agent restarts with different hardware: the two H100s are now three.
  RegisterRequest changed = Inventory();
  changed.agent_id = agent_id_ = "agent-new";
  const GpuModelId h100 = catalog().Find("H100-80GB").value();
  changed.inventory.spec.gpus.push_back(GpuSpec{h100, SharingMode::kExclusive, 0, 0});
  changed.inventory.gpu_uuids.push_back("GPU-4");
  changed.inventory.mig_instances.resize(5);
  changed.tasks = Running();
  ASSERT_TRUE(controller_->Register(changed, "127.0.0.1").ok());

  // Until its work ends the node takes nothing more (its old ledger still holds it).
  constexpr const char* kOneGpu =
      "name: one\nresources: {gpus: 1, gpu_model: H100-80GB}\ncommand: [x]\n";
  const uint64_t second = Submit("team-a", kOneGpu);
  EXPECT_TRUE(CycleAndTake().empty());
  EXPECT_EQ(Job(first)["state"], "running");
  ExpectInvariants();

  Exit(first);
  ASSERT_EQ(CycleAndTake().size(), 1u);
  // With three H100s the node now holds the 1-GPU job and a 2-GPU one beside it.
  const uint64_t third = Submit("team-a", kTwoGpus);
  ASSERT_EQ(CycleAndTake().size(), 1u);
  EXPECT_EQ(Job(second)["state"], "running");
  EXPECT_EQ(Job(third)["state"], "running");
  EXPECT_EQ(Rebuilds(), 1u);
  ExpectInvariants();
}

}  // namespace
}  // namespace tessera
