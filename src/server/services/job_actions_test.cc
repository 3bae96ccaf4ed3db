// JobActions (services/job_actions.h): cancel, hold, release and requeue through the
// controller's transactions, on a manual clock with the test playing the agent.
#include "server/services/job_actions.h"

#include <string>
#include <vector>

#include "server/controller_fixture.h"

namespace tessera {
namespace job_actions_test {

constexpr const char* kOneGpu =
    "queue: team-a\ncommand: [true]\nresources: {gpus: 1, gpu_model: H100-80GB}\n";

class JobActionsTest : public ControllerTest {
 protected:
  static Principal TeamA() { return Principal{Role::kTenant, "team-a", "test"}; }
  static Principal TeamB() { return Principal{Role::kTenant, "team-b", "other"}; }

  nlohmann::json View(uint64_t id) {
    auto job = Reads().GetJob(Principal{Role::kAdmin, "", "test"}, JobNumber(id));
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    return job.ok() ? *job : nlohmann::json();
  }
  std::string State(uint64_t id) { return View(id).value("state", "?"); }
};

TEST_F(JobActionsTest, HoldThenReleaseOfAPendingJob) {
  Register();
  const uint64_t id = Submit("team-a", kOneGpu);
  ASSERT_NE(id, 0u);
  StatusOr<JobActions::ActedOn> held = Actions().Hold(TeamA(), std::to_string(id));
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_EQ(held->jobs, std::vector<JobNumber>{JobNumber(id)});
  EXPECT_TRUE(held->named_one);
  EXPECT_TRUE(View(id)["held"].get<bool>());
  EXPECT_EQ(View(id)["reason"], "held: `tessera release JOB` lets it start (held by tenant token test)");
  EXPECT_TRUE(CycleAndTake().empty());  // held: not started though a GPU is free

  // A second hold is refused with its reason; nothing changes.
  StatusOr<JobActions::ActedOn> again = Actions().Hold(TeamA(), std::to_string(id));
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(again.status().message(), "job " + std::to_string(id) + " is held already");

  StatusOr<JobActions::ActedOn> released = Actions().Release(TeamA(), std::to_string(id));
  ASSERT_TRUE(released.ok()) << released.status().ToString();
  EXPECT_EQ(released->jobs, std::vector<JobNumber>{JobNumber(id)});
  EXPECT_FALSE(View(id)["held"].get<bool>());
  EXPECT_EQ(State(id), "pending");
  EXPECT_EQ(Actions().Release(TeamA(), std::to_string(id)).status().message(),
            "job " + std::to_string(id) + " is not held");
  std::vector<TaskLaunch> run = CycleAndTake();
  ASSERT_EQ(run.size(), 1u);
  EXPECT_EQ(run[0].key.job, id);
  EXPECT_EQ(State(id), "running");

  // Running: no longer one a hold applies to.
  EXPECT_EQ(Actions().Hold(TeamA(), std::to_string(id)).status().message(),
            "job " + std::to_string(id) + " is not pending: only a pending job can be held");
}

TEST_F(JobActionsTest, RequeueIsRefusedForAPendingJobAndStopsARunningOne) {
  const uint64_t id = Submit("team-a", kOneGpu);  // no node yet: it waits
  StatusOr<JobActions::ActedOn> refused = Actions().Requeue(TeamA(), std::to_string(id));
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(),
            "job " + std::to_string(id) + " is pending: only a running job can be requeued");
  EXPECT_EQ(State(id), "pending");

  Register();
  std::vector<TaskLaunch> run = CycleAndTake();
  ASSERT_EQ(run.size(), 1u);
  StatusOr<JobActions::ActedOn> requeued = Actions().Requeue(TeamA(), std::to_string(id));
  ASSERT_TRUE(requeued.ok()) << requeued.status().ToString();
  EXPECT_EQ(requeued->jobs, std::vector<JobNumber>{JobNumber(id)});
  EXPECT_EQ(State(id), "stopping");
  EXPECT_EQ(View(id)["reason"], "requeued by tenant token test");
  // Its attempt ends and it runs again, a new attempt not counted as a restart.
  Exit(id, 143);
  std::vector<TaskLaunch> again = CycleAndTake();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].key.attempt, run[0].key.attempt + 1);
  const nlohmann::json view = View(id);
  EXPECT_EQ(view["state"], "running");
  EXPECT_EQ(view["attempt_history"][0]["ended"], "requeued");
  EXPECT_EQ(view["restart"]["used"], 0);
}

TEST_F(JobActionsTest, CancelByAnArraysNameActsOnEveryElement) {
  const uint64_t a = Submit("team-a", std::string(kOneGpu) + "array: 0-2\n");
  ASSERT_NE(a, 0u);
  StatusOr<JobActions::ActedOn> all = Actions().CancelNamed(TeamA(), std::to_string(a));
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_FALSE(all->named_one);
  EXPECT_EQ(all->jobs, (std::vector<JobNumber>{JobNumber(a), JobNumber(a + 1), JobNumber(a + 2)}));
  for (uint64_t id = a; id < a + 3; ++id) {
    EXPECT_EQ(State(id), "cancelled") << id;
    EXPECT_EQ(View(id)["reason"], "cancelled before it started, by tenant token test") << id;
  }
  // Nothing left to end: an empty answer by the array's name, a refusal by one element's.
  StatusOr<JobActions::ActedOn> none = Actions().CancelNamed(TeamA(), std::to_string(a));
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->jobs.empty());
  StatusOr<JobActions::ActedOn> one = Actions().CancelNamed(TeamA(), std::to_string(a) + "_1");
  EXPECT_EQ(one.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(one.status().message(), "job " + std::to_string(a + 1) + " has already been cancelled");
}

TEST_F(JobActionsTest, CancelOfARunningJobAnswersWithItsViewAfterTheStop) {
  Register();
  const uint64_t id = Submit("team-a", kOneGpu);
  ASSERT_EQ(CycleAndTake().size(), 1u);
  StatusOr<nlohmann::json> view = Actions().Cancel(TeamA(), JobNumber(id));
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_EQ((*view)["id"].get<uint64_t>(), id);
  EXPECT_EQ((*view)["state"], "stopping");
  EXPECT_TRUE(view->contains("spec"));
  Exit(id, 143);
  EXPECT_EQ(State(id), "cancelled");
}

TEST_F(JobActionsTest, ATenantDoesNotSeeAnotherTenantsJob) {
  const uint64_t theirs = Submit("team-b", "queue: team-b\ncommand: [true]\n");
  ASSERT_NE(theirs, 0u);
  const std::string name = std::to_string(theirs);
  const std::string not_found = "no job " + name;
  StatusOr<nlohmann::json> cancel = Actions().Cancel(TeamA(), JobNumber(theirs));
  EXPECT_EQ(cancel.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(cancel.status().message(), not_found);
  for (auto act : {&JobActions::CancelNamed, &JobActions::Hold, &JobActions::Release,
                   &JobActions::Requeue}) {
    JobActions actions = Actions();
    StatusOr<JobActions::ActedOn> out = (actions.*act)(TeamA(), name);
    EXPECT_EQ(out.status().code(), StatusCode::kNotFound);
    EXPECT_EQ(out.status().message(), not_found);
  }
  EXPECT_EQ(Actions().ResolveJobId(TeamA(), name).status().code(), StatusCode::kNotFound);
  // Untouched, and its own tenant may act on it.
  EXPECT_EQ(State(theirs), "pending");
  EXPECT_FALSE(View(theirs)["held"].get<bool>());
  StatusOr<JobNumber> resolved = Actions().ResolveJobId(TeamB(), name);
  ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
  EXPECT_EQ(resolved->value(), theirs);
  ASSERT_TRUE(Actions().Hold(TeamB(), name).ok());
  EXPECT_TRUE(View(theirs)["held"].get<bool>());
}

}  // namespace job_actions_test
}  // namespace tessera
