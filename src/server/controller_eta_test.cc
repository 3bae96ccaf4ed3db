// Pending jobs' ETAs at controller level: after a refresh every pending job has an ETA,
// a position and what blocks it, and its view shows them; before one, nulls.
#include <gtest/gtest.h>

#include <string>

#include "base/time_format.h"
#include "server/controller_fixture.h"

namespace tessera {
namespace {

// 30 min limits: with no runtime history the predictor answers with the limit.
constexpr const char* kTwoGpus =
    "name: train\nresources: {gpus: 2, gpu_model: H100-80GB}\nruntime_limit: 30m\ncommand: [x]\n";

class ControllerEtaTest : public ControllerTest {
 protected:
  nlohmann::json View(uint64_t id) {
    auto text = Reads().GetJobText(Principal{Role::kAdmin, "", "test"}, JobNumber(id));
    EXPECT_TRUE(text.ok()) << text.status().ToString();
    return nlohmann::json::parse(text.ok() ? *text : "{}");
  }
};

TEST_F(ControllerEtaTest, EveryPendingJobGetsAnEtaAndPositionAfterARefresh) {
  Register();
  const uint64_t running = Submit("team-a", kTwoGpus);
  CycleAndTake();
  clock_.Advance(10 * kMinute);
  const uint64_t first = Submit("team-a", kTwoGpus);
  const uint64_t second = Submit("team-a", kTwoGpus);
  CycleAndTake();
  EXPECT_TRUE(View(first)["eta"].is_null());  // no refresh yet
  EXPECT_TRUE(View(first)["position"].is_null());
  EXPECT_FALSE(View(running).contains("eta"));  // not pending

  auto table = controller_->etas().RefreshEtas();
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  ASSERT_NE(*table, nullptr);
  EXPECT_EQ((*table)->pending, 2);
  // The running job has 20 of its 30 min left; then each waiting one runs 30 min.
  const nlohmann::json a = View(first), b = View(second);
  EXPECT_EQ(a["eta"], FormatRfc3339(kT0 + 30 * kMinute));
  EXPECT_EQ(b["eta"], FormatRfc3339(kT0 + 60 * kMinute));
  EXPECT_EQ(a["position"], 1);
  EXPECT_EQ(b["position"], 2);
  EXPECT_EQ(b["queue_position"], 2);
  EXPECT_EQ(a["blocking"]["kind"], "gpus");
  EXPECT_EQ(a["blocking"]["model"], "H100-80GB");
  EXPECT_EQ(a["eta_computed_at"], FormatRfc3339(kT0 + 10 * kMinute));

  // Slurm's `--start` from limits says the same here (the limits are the predictions).
  auto limits = controller_->etas().ForecastEtas(EtaRuntimes::kUserLimit);
  ASSERT_TRUE(limits.ok() && *limits != nullptr);
  EXPECT_EQ((*limits)->jobs.at(second).eta, kT0 + 60 * kMinute);

  // The running job ends early: the next refresh moves the ETAs up.
  clock_.Advance(5 * kMinute);
  Exit(running);
  CycleAndTake();
  ASSERT_TRUE(controller_->etas().RefreshEtas().ok());
  EXPECT_FALSE(View(first).contains("eta"));  // it started
  EXPECT_EQ(View(second)["eta"], FormatRfc3339(kT0 + 45 * kMinute));
  EXPECT_EQ(View(second)["position"], 1);
}

TEST_F(ControllerEtaTest, JobsBehindAGateGetNoEstimateAndTakeNoRoomInTheForecast) {
  Register();
  const uint64_t running = Submit("team-a", kTwoGpus);
  CycleAndTake();
  const std::string two = kTwoGpus;
  const uint64_t held = Submit("team-a", two + "hold: true\n");
  const uint64_t after = Submit("team-a", two + "dependency: afterok:" + std::to_string(running) + "\n");
  const uint64_t never = Submit("team-a", two + "dependency: afternotok:" + std::to_string(held) + "\n");
  const uint64_t waiting = Submit("team-a", kTwoGpus);
  CycleAndTake();
  ASSERT_TRUE(controller_->etas().RefreshEtas().ok());
  for (uint64_t id : {held, after, never}) {
    const nlohmann::json v = View(id);
    EXPECT_TRUE(v["eta"].is_null()) << v;
    EXPECT_TRUE(v["position"].is_null()) << v;
    EXPECT_EQ(v["blocking"]["kind"], "gate") << v;
    EXPECT_EQ(v["eta_note"], "no estimate until it may start: " + v["reason"].get<std::string>());
  }
  EXPECT_NE(View(held)["eta_note"].get<std::string>().find("tessera release"), std::string::npos);
  EXPECT_NE(View(after)["eta_note"].get<std::string>().find("dependency"), std::string::npos);
  // The gated jobs, submitted before it, do not push it back: it is next.
  const nlohmann::json w = View(waiting);
  EXPECT_EQ(w["eta"], FormatRfc3339(kT0 + 30 * kMinute));
  EXPECT_EQ(w["position"], 1);
}

class ShortHorizonTest : public ControllerEtaTest {
 protected:
  void Tune(ControllerOptions& options) override { options.eta.horizon = 20 * kMinute; }
};

TEST_F(ShortHorizonTest, NoEstimateBeyondTheHorizonSaysSo) {
  Register();
  Submit("team-a", kTwoGpus);
  CycleAndTake();
  const uint64_t waiting = Submit("team-a", kTwoGpus);
  CycleAndTake();
  ASSERT_TRUE(controller_->etas().RefreshEtas().ok());
  const nlohmann::json v = View(waiting);
  EXPECT_TRUE(v["eta"].is_null());
  EXPECT_NE(v["eta_note"].get<std::string>().find("no estimate before"), std::string::npos);
  EXPECT_EQ(v["position"], 1);
}

}  // namespace
}  // namespace tessera
