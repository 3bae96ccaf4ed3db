// Kueue's quota semantics, end to end: the example Kueue objects
// (examples/kueue/cluster-queues.yaml) are imported, applied to a controller, and
// scheduled: a queue borrows up to its borrowing limit and no further, the lender
// reclaims what it lent when it needs it (reclaimWithinCohort: Any), and a queue with
// borrowingLimit 0 waits beside an idle GPU of the cohort.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "api/kueue_import.h"
#include "api/queue_config.h"
#include "server/controller_fixture.h"

namespace tessera {
namespace {

constexpr const char* kH100 = "name: h\nresources: {gpus: 1, gpu_model: H100-80GB}\ncommand: [x]\n";
constexpr const char* kA100 = "name: a\nresources: {gpus: 1, gpu_model: A100-80GB}\ncommand: [x]\n";

class KueueControllerTest : public ControllerTest {
 protected:
  void Tune(ControllerOptions& o) override { o.policy = "fifo+reclaim"; }

  // node-1 with four whole H100s and two whole A100s.
  void RegisterGpus() {
    RegisterRequest r = Inventory();
    const GpuModelId h100 = catalog().Find("H100-80GB").value();
    const GpuModelId a100 = catalog().Find("A100-80GB").value();
    r.inventory.spec.gpus.clear();
    r.inventory.gpu_uuids.clear();
    for (int g = 0; g < 6; ++g) {
      r.inventory.spec.gpus.push_back(GpuSpec{g < 4 ? h100 : a100, SharingMode::kExclusive, 0, 0});
      r.inventory.gpu_uuids.push_back("GPU-" + std::to_string(g));
    }
    r.inventory.mig_instances.assign(6, {});
    auto registered = controller_->Register(r, "127.0.0.1");
    ASSERT_TRUE(registered.ok()) << registered.status().ToString();
  }

  std::string ImportedQueues() {
    std::ifstream in(std::string(TESSERA_EXAMPLES_DIR) + "/kueue/cluster-queues.yaml");
    std::ostringstream text;
    text << in.rdbuf();
    StatusOr<KueueImport> imported = ImportKueueYaml(text.str(), catalog());
    EXPECT_TRUE(imported.ok()) << imported.status().ToString();
    return imported.ok() ? QueueTreeYaml(imported->spec, catalog()) : "";
  }

  nlohmann::json Job(uint64_t id) {
    auto j = Reads().GetJob(Principal{Role::kAdmin, "", "test"}, JobNumber(id));
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? *j : nlohmann::json();
  }
  HeartbeatResponse Beat(std::vector<TaskReport> extra = {}) {
    std::vector<TaskReport> reports = Running();
    for (TaskReport& r : extra) {
      std::erase_if(reports, [&](const TaskReport& x) { return x.key == r.key; });
      reports.push_back(std::move(r));
    }
    auto r = controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, reports, {}});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) {
      for (const TaskLaunch& l : r->launch) {
        running_[l.key.job] = l.key;
      }
    }
    return r.ok() ? *r : HeartbeatResponse{};
  }
  void ExitOnSignal(uint64_t job) {
    TaskReport t;
    t.key = running_.at(job);
    t.state = TaskState::kExited;
    t.signal = 15;
    running_.erase(job);
    Beat({t});
  }
  std::set<uint64_t> InState(const std::vector<uint64_t>& jobs, const std::string& state) {
    std::set<uint64_t> out;
    for (uint64_t j : jobs) {
      if (Job(j)["state"] == state) {
        out.insert(j);
      }
    }
    return out;
  }
  void ExpectInvariants() {
    std::vector<std::string> broken = controller_->CheckInvariants();
    EXPECT_TRUE(broken.empty()) << broken.front();
  }
};

TEST_F(KueueControllerTest, BorrowingStopsAtTheLimitAndTheLenderReclaims) {
  ASSERT_TRUE(controller_->SetQueues(ImportedQueues()).ok());
  RegisterGpus();

  // team-a (namespace team-a -> queue team-a-cq): 2 H100s of its own and 1 borrowed
  // (borrowingLimit 1); the fourth waits although an H100 is idle.
  std::vector<uint64_t> a;
  for (int i = 0; i < 4; ++i) {
    a.push_back(Submit("team-a", kH100));
  }
  EXPECT_EQ(Job(a[0])["queue"], "team-a-cq");
  EXPECT_EQ(CycleAndTake().size(), 3u);
  EXPECT_EQ(InState(a, "running"), (std::set<uint64_t>{a[0], a[1], a[2]}));
  EXPECT_EQ(Job(a[3])["state"], "pending");
  // Its reason names the flavor's quota and the borrowing limit.
  ASSERT_TRUE(controller_->RunCycle().ok());
  EXPECT_EQ(Job(a[3])["reason"],
            "waiting for quota: the job asks 1 H100-80GB GPU; queue team-a-cq of cohort research "
            "uses 3 H100-80GB GPUs of its nominal 2 H100-80GB GPUs and can borrow only 0 "
            "H100-80GB GPUs more from its cohort now");
  ExpectInvariants();

  // team-b asks for its 2 nominal H100s: one is idle, the other is the one team-a
  // borrowed, which is reclaimed (its youngest borrowed job is stopped).
  clock_.Advance(2 * kMinute);
  std::vector<uint64_t> b = {Submit("team-b", kH100), Submit("team-b", kH100)};
  EXPECT_EQ(Job(b[0])["queue"], "team-b-cq");
  ASSERT_TRUE(controller_->RunCycle().ok());
  HeartbeatResponse r = Beat();
  ASSERT_EQ(r.launch.size(), 1u);
  EXPECT_EQ(r.launch[0].key.job, b[0]);
  ASSERT_EQ(r.stop.size(), 1u);
  const uint64_t victim = r.stop[0].key.job;
  EXPECT_TRUE(victim == a[0] || victim == a[1] || victim == a[2]) << victim;
  EXPECT_EQ(Job(victim)["state"], "stopping");
  EXPECT_EQ(Job(b[1])["state"], "pending");
  ExpectInvariants();

  // Once the victim is gone team-b's second job starts; team-a is back at its nominal
  // 2 and its two other jobs wait (nothing is left to borrow).
  clock_.Advance(5 * kSecond);
  ExitOnSignal(victim);
  ASSERT_TRUE(controller_->RunCycle().ok());
  r = Beat();
  ASSERT_EQ(r.launch.size(), 1u);
  EXPECT_EQ(r.launch[0].key.job, b[1]);
  EXPECT_EQ(InState(b, "running").size(), 2u);
  EXPECT_EQ(InState(a, "running").size(), 2u);
  EXPECT_EQ(InState(a, "pending").size(), 2u);
  EXPECT_TRUE(InState(a, "pending").count(victim));
  ExpectInvariants();

  // A100s: team-b has 1 of its own and borrowingLimit 0, so its second A100 job waits
  // beside team-a's idle A100; team-a may still borrow team-b's idle one later.
  const uint64_t b_a1 = Submit("team-b", kA100);
  const uint64_t b_a2 = Submit("team-b", kA100);
  ASSERT_TRUE(controller_->RunCycle().ok());
  r = Beat();
  ASSERT_EQ(r.launch.size(), 1u);
  EXPECT_EQ(r.launch[0].key.job, b_a1);
  EXPECT_EQ(Job(b_a2)["state"], "pending");
  ExpectInvariants();
}

}  // namespace
}  // namespace tessera
