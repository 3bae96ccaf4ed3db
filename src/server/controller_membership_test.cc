// Nodes joining and leaving change the scheduler's cluster in place: no rebuild, the
// running work elsewhere untouched, and after a restart a node that comes back holds
// its running tasks' GPUs again before anything else may take them. On a manual clock,
// no sleeps.
#include <gtest/gtest.h>

#include <regex>

#include "server/controller_fixture.h"
#include "server/testing/job_yaml.h"

namespace tessera {
namespace {

constexpr const char* kTwoGpus =
    "name: two\nresources: {gpus: 2, gpu_model: H100-80GB}\ncommand: [x]\n";

class ControllerMembershipTest : public ControllerTest {
 protected:
  void Tune(ControllerOptions& o) override {
    o.node_timeout = 30 * kSecond;
    o.history_interval = 0;
    o.policy = "priority+preempt";
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
    auto j = Reads().GetJob(Principal{Role::kAdmin, "", "test"}, JobNumber(id));
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? *j : nlohmann::json();
  }
  uint64_t Counter(const std::string& name) {
    std::smatch m;
    const std::string text = Views().Metrics();
    const std::regex line("\n" + name + " ([0-9]+)\n");
    EXPECT_TRUE(std::regex_search(text, m, line)) << name;
    return m.empty() ? 0 : std::stoull(m[1]);
  }
  uint64_t Rebuilds() { return Counter("tessera_scheduler_rebuilds_total"); }
  void ExpectInvariants() {
    std::vector<std::string> broken = controller_->CheckInvariants();
    EXPECT_TRUE(broken.empty()) << broken.front();
    // And no cycle found them broken either.
    EXPECT_EQ(Counter("tessera_scheduler_invariant_breaches_total"), 0u);
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
  const uint64_t second = Submit("team-a", testing::kOneGpu);
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

// After a restart a node comes back with less than its running task holds (a GPU gone):
// the task is not held on resources that are gone; the job is stopped and requeued, and
// scheduling goes on without a rebuild.
TEST_F(ControllerMembershipTest, ARunningTaskThatNoLongerFitsItsReturningNodeIsRequeued) {
  Register();
  const uint64_t job = Submit("team-a", kTwoGpus);
  ASSERT_EQ(CycleAndTake().size(), 1u);  // both H100s of node-1

  Reopen();
  ASSERT_TRUE(controller_->RunCycle().ok());
  RegisterRequest smaller = Inventory();  // one H100 fewer
  smaller.inventory.spec.gpus.erase(smaller.inventory.spec.gpus.begin());
  smaller.inventory.gpu_uuids.erase(smaller.inventory.gpu_uuids.begin());
  smaller.inventory.mig_instances.resize(3);
  smaller.tasks = Running();
  auto r = controller_->Register(smaller, "127.0.0.1");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Job(job)["state"], "stopping");
  ExpectInvariants();
  // The agent is told to stop the task; it ends, and the job waits for room again.
  auto hb = controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, Running(), {}});
  ASSERT_TRUE(hb.ok());
  ASSERT_EQ(hb->stop.size(), 1u);
  EXPECT_EQ(hb->stop[0].key.job, job);
  TaskReport killed;
  killed.key = running_.at(job);
  killed.state = TaskState::kExited;
  killed.signal = 9;
  running_.erase(job);
  ASSERT_TRUE(controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, {killed}, {}}).ok());
  ASSERT_TRUE(controller_->RunCycle().ok());
  nlohmann::json j = Job(job);
  EXPECT_EQ(j["state"], "pending");
  EXPECT_NE(j["reason"].get<std::string>().find("came back without room"), std::string::npos)
      << j["reason"];
  EXPECT_EQ(Rebuilds(), 1u);
  ExpectInvariants();
}

// A gang whose task on one node has ended keeps running on the other; that node is then
// lost. The gang holds nothing there any more, and a preemption that picks it frees only
// what it holds.
TEST_F(ControllerMembershipTest, AGangThatLostANodeWhereItsTaskEndedIsAVictimOfWhatItHolds) {
  Register();
  ASSERT_TRUE(controller_->Register(Node2("agent-2"), "127.0.0.1").ok());
  constexpr const char* kGang =
      "name: gang\nreplicas: 2\nresources: {gpus: 2, gpu_model: H100-80GB}\ncommand: [x]\n";
  const uint64_t gang = Submit("team-a", kGang);
  ASSERT_TRUE(controller_->RunCycle().ok());
  Beat1();
  std::vector<TaskLaunch> on2 = Beat2("agent-2");
  ASSERT_EQ(on2.size(), 1u);
  ASSERT_EQ(running_.count(gang), 1u);  // task 0 on node-1
  TaskReport done;
  done.key = on2[0].key;
  done.state = TaskState::kExited;
  ASSERT_TRUE(controller_->Heartbeat(HeartbeatRequest{"node-2", "agent-2", {done}, {}}).ok());
  EXPECT_EQ(Job(gang)["state"], "running");

  clock_.Advance(31 * kSecond);
  Beat1();
  ASSERT_TRUE(controller_->RunCycle().ok());  // node-2 is lost
  EXPECT_EQ(Job(gang)["state"], "running");
  ExpectInvariants();

  constexpr const char* kUrgent =
      "name: urgent\npriority: 10\nresources: {gpus: 2, gpu_model: H100-80GB}\ncommand: [x]\n";
  const uint64_t urgent = Submit("team-a", kUrgent);
  ASSERT_TRUE(controller_->RunCycle().ok());
  EXPECT_EQ(Job(gang)["state"], "stopping");
  EXPECT_EQ(Job(urgent)["state"], "pending");
  ExpectInvariants();
  TaskReport killed;  // task 0 ends on its signal
  killed.key = running_.at(gang);
  killed.state = TaskState::kExited;
  killed.signal = 15;
  running_.erase(gang);
  ASSERT_TRUE(controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, {killed}, {}}).ok());
  ASSERT_TRUE(controller_->RunCycle().ok());
  Beat1();
  EXPECT_EQ(Job(urgent)["state"], "running");
  EXPECT_EQ(Job(gang)["state"], "pending");
  ExpectInvariants();
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// A fleet paced to 2 heartbeats a second, with the default 500 ms floor and a 30 s
// timeout (a ceiling of 7.5 s).
class ControllerHeartbeatPaceTest : public ControllerTest {
 protected:
  void Tune(ControllerOptions& o) override {
    o.node_timeout = 30 * kSecond;
    o.heartbeat_interval = 500'000;
    o.max_heartbeats_per_second = 2;
  }
  StatusOr<RegisterResponse> Join(int n) {
    RegisterRequest r = Inventory();
    r.agent_id = "agent-" + std::to_string(n);
    r.inventory.spec.name = "node-" + std::to_string(n);
    return controller_->Register(r, "127.0.0.1");
  }
};

TEST_F(ControllerHeartbeatPaceTest, TheIntervalStretchesWithTheFleetUpToAQuarterOfTheTimeout) {
  auto first = Join(1);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->heartbeat_interval_ms, 500);  // 1 node at 2/s: the floor
  for (int n = 2; n <= 4; ++n) {
    ASSERT_TRUE(Join(n).ok());
  }
  // 4 nodes at 2 a second: each every 2 s, in registrations' and heartbeats' answers.
  auto hb = controller_->Heartbeat(HeartbeatRequest{"node-1", "agent-1", {}, {}});
  ASSERT_TRUE(hb.ok()) << hb.status().ToString();
  EXPECT_EQ(hb->heartbeat_interval_ms, 2000);
  auto fifth = Join(5);
  ASSERT_TRUE(fifth.ok());
  EXPECT_EQ(fifth->heartbeat_interval_ms, 2500);
  for (int n = 6; n <= 40; ++n) {
    ASSERT_TRUE(Join(n).ok());
  }
  // 40 nodes would be 20 s; the timeout allows 7.5 s.
  hb = controller_->Heartbeat(HeartbeatRequest{"node-7", "agent-7", {}, {}});
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->heartbeat_interval_ms, 7500);
  // A stretched fleet is not lost for it: 7.5 s of silence is no timeout.
  clock_.Advance(7'500'000);
  ASSERT_TRUE(controller_->RunCycle().ok());
  hb = controller_->Heartbeat(HeartbeatRequest{"node-7", "agent-7", {}, {}});
  ASSERT_TRUE(hb.ok());
  EXPECT_FALSE(hb->reregister);
}

TEST_F(ControllerHeartbeatPaceTest, NodesThatJoinedBetweenCyclesAreAllPlacedOnAtTheNextCycle) {
  // Joins only mark the scheduler's groups and capacity stale; the next cycle must see
  // every node. 9 two-GPU jobs (a node's whole H100s each; the cohort's 18 GPUs) wait
  // on one node; 8 nodes join without a cycle between them; the next cycle starts all
  // the 8 that waited.
  ASSERT_TRUE(Join(1).ok());
  std::vector<uint64_t> jobs;
  for (int j = 0; j < 9; ++j) {
    jobs.push_back(Submit(j % 2 == 0 ? "team-a" : "team-b", kTwoGpus));
  }
  ASSERT_TRUE(controller_->RunCycle().ok());  // builds the core: one job starts
  for (int n = 2; n <= 9; ++n) {
    ASSERT_TRUE(Join(n).ok());
  }
  ASSERT_TRUE(controller_->RunCycle().ok());
  for (uint64_t id : jobs) {
    auto j = Reads().GetJob(Principal{Role::kAdmin, "", "test"}, JobNumber(id));
    ASSERT_TRUE(j.ok()) << j.status().ToString();
    EXPECT_EQ((*j)["state"], "running") << j->dump();
  }
  for (int n = 1; n <= 9; ++n) {
    const std::string name = "node-" + std::to_string(n);
    auto hb = controller_->Heartbeat(HeartbeatRequest{name, "agent-" + std::to_string(n), {}, {}});
    ASSERT_TRUE(hb.ok());
    EXPECT_EQ(hb->launch.size(), 1u) << name;
  }
  std::vector<std::string> broken = controller_->CheckInvariants();
  EXPECT_TRUE(broken.empty()) << broken.front();
}

}  // namespace
}  // namespace tessera
