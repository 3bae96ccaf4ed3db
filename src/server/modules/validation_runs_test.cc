// ValidationRuns on a manual clock through a fake step: a due node held, its check
// started only once it is idle, skipped after max_wait, results judged (a regression
// drains the GPU, a failure the node), check jobs that lose their node or time out, and
// the runs kept bounded.
#include "server/modules/validation_runs.h"

#include <gtest/gtest.h>

#include "server/modules/fake_module_step.h"

namespace tessera {
namespace {

// Prefixed: this file shares a unity build with controller_validation_test.cc.
constexpr Micros kVrSec = 1'000'000;
constexpr Micros kVrMin = 60 * kVrSec;

class ValidationRunsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    step_.now_us = 1'000 * kVrSec;
    NodeInfo& n = step_.nodes["n1"];
    n.up = true;
    n.inventory.spec.name = "n1";
    n.inventory.spec.gpus.resize(2);
  }
  void AddCheck(nlohmann::json body) {
    body["name"] = "burn";
    if (!body.contains("command")) {
      body["command"] = "burn --seconds 60";
    }
    StatusOr<ValidationCheck> check = ValidationCheckFromJson(body);
    ASSERT_TRUE(check.ok()) << check.status().ToString();
    ASSERT_TRUE(runs_.Add(step_, std::move(check).value()).ok());
  }
  // A pass (past its throttle), its ended checks judged with `output`.
  std::vector<ValidationRuns::Ended> Pass(const std::string& output = "") {
    step_.now_us += 2 * kVrSec;
    std::optional<std::vector<ValidationRuns::Ended>> ended = runs_.Tend(step_);
    if (!ended) {
      return {};
    }
    for (ValidationRuns::Ended& e : *ended) {
      e.output = output;
    }
    runs_.Judge(step_, *ended);
    return *ended;
  }
  // The check job started last ends as `state` with `exit_code`.
  void EndCheck(JobState state, int exit_code = 0) {
    ASSERT_FALSE(step_.node_jobs.empty());
    const uint64_t id = step_.node_jobs.back().job.value();
    step_.jobs[id].state = state;
    step_.jobs[id].record.phase = JobPhase::kFinished;
    step_.outcomes[id] = RowOutcome{exit_code, ""};
  }
  // A manual run started and ended as `state`, then judged with `output`.
  void RunOnce(JobState state, const std::string& output, int exit_code = 0) {
    ASSERT_TRUE(runs_.Run(step_, "burn", "").ok());
    const size_t started = step_.node_jobs.size();
    Pass();
    ASSERT_EQ(step_.node_jobs.size(), started + 1);
    EndCheck(state, exit_code);
    ASSERT_EQ(Pass(output).size(), 1U);
  }
  std::string LastOutcome() const { return runs_.book().runs.at({"burn", "n1"}).back().outcome; }

  FakeModuleStep step_;
  ValidationRuns runs_;
};

TEST_F(ValidationRunsTest, ADueNodeIsHeldAndItsCheckStartsOnlyOnceItIsIdle) {
  AddCheck({{"every", "1h"}});
  step_.busy_nodes.insert("n1");
  step_.now_us += 30 * kVrMin;
  Pass();
  EXPECT_EQ(runs_.NodeHold("n1"), "") << "not due before created + every";

  step_.now_us += 31 * kVrMin;
  Pass();
  EXPECT_EQ(runs_.NodeHold("n1"), "held for validation burn: takes no new work until its jobs end");
  EXPECT_EQ(step_.hold_changes, std::vector<std::string>{"n1"});
  Pass();
  EXPECT_TRUE(step_.node_jobs.empty()) << "started on a busy node";
  EXPECT_TRUE(step_.stops.empty()) << "a busy node's jobs are never preempted for a check";

  step_.busy_nodes.clear();
  Pass();
  ASSERT_EQ(step_.node_jobs.size(), 1U);
  const FakeModuleStep::NodeJobStarted& started = step_.node_jobs[0];
  EXPECT_EQ(started.node, "n1");
  EXPECT_EQ(started.request.tenant, kValidationTenant);
  EXPECT_EQ(started.request.command, "burn --seconds 60");
  EXPECT_EQ(started.request.env.at("TESSERA_VALIDATION"), "burn");
  EXPECT_EQ(runs_.NodeHold("n1"),
            "running validation burn (job " + std::to_string(started.job.value()) + ")");
  Pass();
  EXPECT_EQ(step_.node_jobs.size(), 1U) << "one check job per run";
}

TEST_F(ValidationRunsTest, ANodeStillBusyAfterMaxWaitIsLetGoAndTheRunSkipped) {
  AddCheck({{"every", "1h"}, {"max_wait", "30m"}});
  step_.busy_nodes.insert("n1");
  step_.now_us += 61 * kVrMin;
  Pass();
  ASSERT_NE(runs_.NodeHold("n1"), "");
  step_.now_us += 29 * kVrMin;
  Pass();
  EXPECT_NE(runs_.NodeHold("n1"), "") << "let go before max_wait";

  step_.now_us += 2 * kVrMin;
  Pass();
  EXPECT_EQ(runs_.NodeHold("n1"), "");
  EXPECT_TRUE(step_.node_jobs.empty());
  EXPECT_EQ(LastOutcome(), "skipped");
  EXPECT_NE(runs_.book().runs.at({"burn", "n1"}).back().reason.find("stayed busy for 30m"),
            std::string::npos);
  EXPECT_EQ(step_.hold_changes.size(), 2U);  // held, then let go
  step_.busy_nodes.clear();
  Pass();
  EXPECT_TRUE(step_.node_jobs.empty()) << "the next run is due `every` after the skipped one";
}

TEST_F(ValidationRunsTest, ARegressionDrainsTheGpuAndTheFirstResultSetsTheBaseline) {
  AddCheck({{"every", "24h"}, {"threshold", "10%"}});
  RunOnce(JobState::kSucceeded, "{\"gpu\":0,\"metric\":\"tflops\",\"value\":300}\n");
  EXPECT_EQ(LastOutcome(), "passed");
  EXPECT_TRUE(step_.drains.empty());
  EXPECT_EQ(runs_.NodeHold("n1"), "") << "let go once judged";

  RunOnce(JobState::kSucceeded,
          "{\"gpu\":0,\"metric\":\"tflops\",\"value\":210}\n"
          "{\"gpu\":1,\"metric\":\"tflops\",\"value\":305}\n");
  EXPECT_EQ(LastOutcome(), "regressed");
  ASSERT_EQ(step_.drains.size(), 1U);  // GPU 1 had no baseline: it sets one
  EXPECT_EQ(step_.drains[0].node, "n1");
  EXPECT_EQ(step_.drains[0].gpu, 0);
  ASSERT_TRUE(step_.drains[0].drain.has_value());
  EXPECT_EQ(step_.drains[0].drain->reason,
            "validation burn: tflops 210 is 30 % below baseline 300 (threshold 10 %)");
  EXPECT_EQ(step_.drains[0].drain->by, "validation");
  EXPECT_EQ(runs_.book().regressions, 1U);
}

TEST_F(ValidationRunsTest, AFailedCheckDrainsTheWholeNode) {
  AddCheck({{"every", "24h"}});
  RunOnce(JobState::kFailed, "diag: PCIe replay errors\n", 3);
  EXPECT_EQ(LastOutcome(), "failed");
  ASSERT_EQ(step_.drains.size(), 1U);
  EXPECT_EQ(step_.drains[0].gpu, -1);
  EXPECT_EQ(step_.drains[0].drain->reason, "validation burn: check failed with exit code 3");
}

TEST_F(ValidationRunsTest, ACheckThatTimesOutIsStoppedAsFailed) {
  AddCheck({{"every", "24h"}, {"timeout", "5m"}});
  ASSERT_TRUE(runs_.Run(step_, "burn", "").ok());
  Pass();
  ASSERT_EQ(step_.node_jobs.size(), 1U);
  step_.now_us += 6 * kVrMin;
  Pass();
  ASSERT_EQ(step_.stops.size(), 1U);
  EXPECT_EQ(step_.stops[0].request.after, AttemptEnd::kFail);
  EXPECT_EQ(step_.stops[0].reason, "validation burn: timed out after 5m");
  EndCheck(JobState::kFailed);
  Pass();
  ASSERT_EQ(step_.drains.size(), 1U);
  EXPECT_EQ(step_.drains[0].gpu, -1);
  EXPECT_EQ(step_.drains[0].drain->reason, "validation burn: timed out after 5m");
}

TEST_F(ValidationRunsTest, ARequeuedCheckEndsAndIsRecordedAsInterrupted) {
  AddCheck({{"every", "24h"}});
  ASSERT_TRUE(runs_.Run(step_, "burn", "").ok());
  Pass();
  ASSERT_EQ(step_.node_jobs.size(), 1U);
  FakeModuleStep::Job& job = step_.jobs[step_.node_jobs[0].job.value()];
  job.state = JobState::kPending;  // its node was lost
  job.record.phase = JobPhase::kPending;
  Pass();
  EXPECT_EQ(step_.cancelled_pending.size(), 1U);
  EXPECT_EQ(LastOutcome(), "interrupted");
  EXPECT_TRUE(step_.drains.empty());
}

TEST_F(ValidationRunsTest, RemovingACheckEndsItsJobRunningOrRequeued) {
  AddCheck({{"every", "24h"}});
  ASSERT_TRUE(runs_.Run(step_, "burn", "").ok());
  Pass();
  ASSERT_EQ(step_.node_jobs.size(), 1U);
  const JobNumber id = step_.node_jobs[0].job;
  FakeModuleStep::Job& job = step_.jobs[id.value()];
  job.state = JobState::kPending;  // requeued, not tended yet
  job.record.phase = JobPhase::kPending;
  ASSERT_TRUE(runs_.Remove(step_, "burn").ok());
  ASSERT_EQ(step_.cancelled_pending.size(), 1U) << "it must not run later untracked";
  EXPECT_EQ(step_.cancelled_pending[0], id);
  EXPECT_EQ(step_.jobs[id.value()].reason, "cancelled: validation check burn was removed");
  EXPECT_EQ(runs_.NodeHold("n1"), "");
}

TEST_F(ValidationRunsTest, TheRunsKeptPerNodeAreBounded) {
  AddCheck({{"every", "24h"}});
  const size_t runs = ValidationBook::kRunsKept + 5;
  for (size_t i = 0; i < runs; ++i) {
    RunOnce(JobState::kSucceeded, "{\"gpu\":0,\"metric\":\"tflops\",\"value\":300}\n");
  }
  EXPECT_EQ(runs_.book().runs.at({"burn", "n1"}).size(), ValidationBook::kRunsKept);
  const std::pair<std::string, std::string>& last = step_.written.kv.back();
  ASSERT_EQ(last.first, "validations/slot/burn/n1");
  // The row of kept runs is rewritten whole, as bounded as the memory.
  for (auto it = step_.written.kv.rbegin(); it != step_.written.kv.rend(); ++it) {
    if (it->first == "validations/runs/burn/n1") {
      EXPECT_EQ(nlohmann::json::parse(it->second).size(), ValidationBook::kRunsKept);
      break;
    }
  }
  auto results = runs_.Results("burn", "", 1000);
  ASSERT_TRUE(results.ok());
  EXPECT_EQ((*results)["runs"].size(), ValidationBook::kRunsKept);
}

}  // namespace
}  // namespace tessera
