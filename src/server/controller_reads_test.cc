// API reads of jobs and their logs do not wait for the scheduling cycle: they are served from the
// published views, not under the controller's lock, which the cycle holds. Shown
// without timing: a read is made from inside the cycle, while the lock is held, and
// must complete before the cycle may go on.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <vector>

#include "server/controller_fixture.h"

namespace tessera {
namespace {

constexpr const char* kJob =
    "name: one\nresources: {gpus: 1, gpu_model: H100-80GB}\ncommand: [x]\n";

class ControllerReadsTest : public ControllerTest {
 protected:
  // Called by the lifecycle under the controller's lock, in the cycle.
  struct ReadDuringCycle final : LifecycleListener {
    ControllerReadsTest* test = nullptr;
    int reads_done = 0;
    int reads_blocked = 0;
    nlohmann::json seen;
    std::vector<std::future<nlohmann::json>> blocked;
    void OnJobEvent(const JobRecord&, const LifecycleEvent& event) override {
      if (event.kind != LifecycleEvent::Kind::kStarted || test->controller_ == nullptr) {
        return;
      }
      Controller* c = test->controller_.get();
      const Principal admin{Role::kAdmin, "", "test"};
      const uint64_t other = test->other_;
      std::future<nlohmann::json> read = std::async(std::launch::async, [c, admin, other] {
        const JobReads reads(*c);
        JobReads::JobPage page = reads.ListJobIds(admin, JobFilter{}, JobNumber(0), 10);
        auto job = reads.GetJob(admin, JobNumber(other));
        auto log = reads.ReadLog(admin, JobNumber(other), 0, 0, 1024);
        nlohmann::json out = {{"listed", page.jobs.size()}};
        out["job"] = job.ok() ? *job : nlohmann::json(job.status().ToString());
        out["log_state"] = log.ok() ? log->job_state : log.status().ToString();
        return out;
      });
      // Bounded: a read that needed the lock could not finish while it is held here.
      if (read.wait_for(std::chrono::seconds(20)) == std::future_status::ready) {
        ++reads_done;
        seen = read.get();
      } else {
        ++reads_blocked;
        // Kept, not destroyed here: its destructor would wait for the read, which waits
        // for the lock this cycle holds. It completes once the cycle has ended.
        blocked.push_back(std::move(read));
      }
    }
  };

  void Tune(ControllerOptions& o) override { o.lifecycle_listener = &listener_; }

  ReadDuringCycle listener_;
  uint64_t other_ = 0;
};

TEST_F(ControllerReadsTest, AJobIsReadAndListedWhileTheCycleHoldsTheControllersLock) {
  listener_.test = this;
  Register();
  other_ = Submit("team-b", kJob);
  Submit("team-a", kJob);
  ASSERT_EQ(CycleAndTake().size(), 2u);
  EXPECT_EQ(listener_.reads_blocked, 0) << "a read waited for the cycle";
  ASSERT_GE(listener_.reads_done, 1);
  EXPECT_EQ(listener_.seen["listed"], 2);
  EXPECT_EQ(listener_.seen["job"]["id"], other_);
  // As of the last publication: the cycle's own start is not published yet.
  EXPECT_EQ(listener_.seen["job"]["state"], "pending");
  EXPECT_EQ(listener_.seen["job"]["reason"], "waiting for the next scheduling cycle");
  EXPECT_EQ(listener_.seen["log_state"], "pending");  // logs are read without the lock too

  auto after = Reads().GetJob(Principal{Role::kAdmin, "", "test"}, JobNumber(other_));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)["state"], "running");
}

}  // namespace
}  // namespace tessera
