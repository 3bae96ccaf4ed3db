// Job arrays, dependencies, holds, singletons and requeues through the controller
// (modules/job_gates_module.h) and its JobActions service (services/job_actions.h), on a manual
// clock with the test playing the agent.
#include <algorithm>
#include <string>
#include <vector>

#include "server/controller_fixture.h"

namespace tessera {
namespace {

class ControllerGatesTest : public ControllerTest {
 protected:
  Principal Team() const { return Principal{Role::kTenant, "team-a", "test"}; }

  std::string Reason(uint64_t id) {
    auto job = Reads().GetJob(Team(), JobNumber(id));
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    return job.ok() ? (*job)["reason"].get<std::string>() : "";
  }
  std::string State(uint64_t id) {
    auto job = Reads().GetJob(Team(), JobNumber(id));
    return job.ok() ? (*job)["state"].get<std::string>() : "?";
  }
  std::vector<uint64_t> Jobs(const std::vector<TaskLaunch>& launches) {
    std::vector<uint64_t> out;
    for (const TaskLaunch& l : launches) {
      out.push_back(l.key.job);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
};

constexpr const char* kOneGpu =
    "queue: team-a\ncommand: [true]\nresources: {gpus: 1, gpu_model: H100-80GB}\n";

TEST_F(ControllerGatesTest, AThrottledArrayRunsAtMostItsLimitAndCancelsWhole) {
  Register();
  const uint64_t a = Submit("team-a", std::string(kOneGpu) + "name: sweep\narray: 0-4:2,7%1\n");
  ASSERT_NE(a, 0u);
  // Elements 0, 2, 4, 7 are jobs a..a+3; one runs at a time though two GPUs are free.
  std::vector<TaskLaunch> first = CycleAndTake();
  ASSERT_EQ(Jobs(first), std::vector<uint64_t>{a});
  EXPECT_EQ(first[0].env.at("SLURM_ARRAY_JOB_ID"), std::to_string(a));
  EXPECT_EQ(first[0].env.at("SLURM_ARRAY_TASK_ID"), "0");
  EXPECT_EQ(first[0].env.at("SLURM_ARRAY_TASK_COUNT"), "4");
  EXPECT_EQ(first[0].env.at("SLURM_JOB_ID"), std::to_string(a));
  EXPECT_EQ(first[0].env.at("SLURM_JOB_NAME"), "sweep");
  EXPECT_EQ(first[0].env.at("SLURM_NTASKS"), "1");
  EXPECT_EQ(first[0].env.at("SLURM_PROCID"), "0");
  EXPECT_EQ(first[0].env.at("SLURM_JOB_NODELIST"), "node-1");
  EXPECT_EQ(first[0].env.at("SLURM_GPUS_ON_NODE"), "1");
  EXPECT_NE(Reason(a + 1).find("array throttle: 1 elements of array " + std::to_string(a)),
            std::string::npos)
      << Reason(a + 1);
  // Named as users name them: "A_INDEX".
  StatusOr<JobNumber> seven = Actions().ResolveJobId(Team(), std::to_string(a) + "_7");
  ASSERT_TRUE(seven.ok()) << seven.status().ToString();
  EXPECT_EQ(seven->value(), a + 3);
  EXPECT_FALSE(Actions().ResolveJobId(Team(), std::to_string(a) + "_3").ok());
  EXPECT_FALSE(Actions().ResolveJobId(Principal{Role::kTenant, "team-b", "t"},
                                         std::to_string(a) + "_7")
                   .ok());

  Exit(a, 0);
  std::vector<TaskLaunch> second = CycleAndTake();
  ASSERT_EQ(Jobs(second), std::vector<uint64_t>{a + 1});
  EXPECT_EQ(second[0].env.at("SLURM_ARRAY_TASK_ID"), "2");
  // One element cancelled alone, then the rest by the array's id.
  ASSERT_TRUE(Actions().CancelNamed(Team(), std::to_string(a) + "_4").ok());
  EXPECT_EQ(State(a + 2), "cancelled");
  auto all = Actions().CancelNamed(Team(), std::to_string(a));
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->jobs, (std::vector<JobNumber>{JobNumber(a + 1), JobNumber(a + 3)}));
  EXPECT_EQ(State(a), "succeeded");
  EXPECT_EQ(State(a + 3), "cancelled");
}

TEST_F(ControllerGatesTest, AfterokOnAFailedJobNeverRunsAndSaysWhy) {
  Register();
  const uint64_t step1 = Submit("team-a", std::string(kOneGpu) + "name: step1\n");
  const uint64_t ok = Submit("team-a", std::string(kOneGpu) + "dependency: afterok:" +
                                           std::to_string(step1) + "\n");
  const uint64_t notok = Submit("team-a", std::string(kOneGpu) + "dependency: afternotok:" +
                                              std::to_string(step1) + "\n");
  ASSERT_EQ(Jobs(CycleAndTake()), std::vector<uint64_t>{step1});
  EXPECT_NE(Reason(ok).find("waiting for its dependency: afterok on job " + std::to_string(step1)),
            std::string::npos)
      << Reason(ok);
  Exit(step1, 3);
  ASSERT_EQ(State(step1), "failed");
  // The cycle after the failure starts only the job that waited for a failure.
  ASSERT_EQ(Jobs(CycleAndTake()), std::vector<uint64_t>{notok});
  EXPECT_EQ(State(ok), "pending");
  EXPECT_NE(Reason(ok).find("dependency never satisfied: afterok on job " + std::to_string(step1) +
                            ", which failed"),
            std::string::npos)
      << Reason(ok);
  // Still so after a restart, and cycles later.
  Reopen();
  Register();
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(kMinute);
    EXPECT_TRUE(CycleAndTake().empty());
  }
  EXPECT_NE(Reason(ok).find("dependency never satisfied"), std::string::npos) << Reason(ok);
}

TEST_F(ControllerGatesTest, DependenciesOnUnknownOrForeignJobsAreRefused) {
  const uint64_t theirs = Submit("team-b", "queue: team-b\ncommand: [true]\n");
  StatusOr<JobSubmission> job =
      ParseJobYaml("queue: team-a\ncommand: [true]\ndependency: afterany:" +
                       std::to_string(theirs) + "\n",
                   catalog());
  ASSERT_TRUE(job.ok());
  auto out = controller_->intake().Submit(Team(), *job, "");
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("dependency: no job"), std::string::npos);
  job->dependency = "afterany:999";
  EXPECT_NE(controller_->intake().Submit(Team(), *job, "").status().message().find("no job 999"),
            std::string::npos);
  job->dependency.clear();
  job->priority_class = "urgent";
  EXPECT_NE(controller_->intake()
                .Submit(Team(), *job, "")
                .status()
                .message()
                .find("no priority class 'urgent'"),
            std::string::npos);
}

TEST_F(ControllerGatesTest, ArrayIndicesComeOnlyFromTheServerAndNamesStayInTheirTenant) {
  // A batch that sets array_index itself (to pass for an array over others' ids) is refused.
  StatusOr<JobSubmission> forged =
      ParseJobYaml("queue: team-a\ncommand: [true]\narray: 0-99\narray_index: 0\n", catalog());
  ASSERT_TRUE(forged.ok()) << forged.status().ToString();
  auto out = controller_->intake().SubmitBatch(Team(), {*forged}, "");
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("array_index: is set by the server"), std::string::npos)
      << out.status().ToString();
  EXPECT_EQ(controller_->intake().Submit(Team(), *forged, "").status().code(),
            StatusCode::kInvalidArgument);

  // A real array of team-a's, then team-b's jobs: nothing named by team-a reaches them.
  const uint64_t a = Submit("team-a", std::string(kOneGpu) + "array: 0-1\nhold: true\n");
  const uint64_t theirs = Submit("team-b", "queue: team-b\ncommand: [true]\n");
  ASSERT_EQ(theirs, a + 2);
  auto held = Actions().Release(Team(), std::to_string(a));
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_EQ(held->jobs, (std::vector<JobNumber>{JobNumber(a), JobNumber(a + 1)}));
  EXPECT_EQ(Actions().Hold(Team(), std::to_string(theirs)).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(Actions().Hold(Team(), std::to_string(a) + "_2").status().code(),
            StatusCode::kNotFound);
  EXPECT_FALSE(Reads().GetJob(Principal{Role::kTenant, "team-b", "t"}, JobNumber(theirs))
                   ->at("held")
                   .get<bool>());
}

TEST_F(ControllerGatesTest, SingletonJobsOfOneUserAndNameRunOneAtATime) {
  Register();
  const std::string spec = std::string(kOneGpu) + "name: nightly\nuser: ana\ndependency: singleton\n";
  const uint64_t first = Submit("team-a", spec);
  const uint64_t second = Submit("team-a", spec);
  const uint64_t other_user = Submit("team-a", std::string(kOneGpu) +
                                                   "name: nightly\nuser: bo\ndependency: singleton\n");
  ASSERT_EQ(Jobs(CycleAndTake()), (std::vector<uint64_t>{first, other_user}));
  EXPECT_NE(Reason(second).find("singleton: job " + std::to_string(first)), std::string::npos)
      << Reason(second);
  Exit(first, 0);
  ASSERT_EQ(Jobs(CycleAndTake()), std::vector<uint64_t>{second});
}

TEST_F(ControllerGatesTest, AHoldSurvivesARestartUntilReleasedAndRequeueRunsItAgain) {
  Register();
  const uint64_t held = Submit("team-a", std::string(kOneGpu) + "hold: true\n");
  EXPECT_TRUE(CycleAndTake().empty());
  EXPECT_EQ(Reason(held), "held: `tessera release JOB` lets it start");
  Reopen();
  Register();
  EXPECT_TRUE(CycleAndTake().empty());
  EXPECT_NE(Reason(held).find("held"), std::string::npos) << Reason(held);
  EXPECT_EQ(Actions().Hold(Team(), std::to_string(held)).status().code(),
            StatusCode::kFailedPrecondition);
  ASSERT_TRUE(Actions().Release(Team(), std::to_string(held)).ok());
  std::vector<TaskLaunch> run = CycleAndTake();
  ASSERT_EQ(Jobs(run), std::vector<uint64_t>{held});
  EXPECT_EQ(Actions().Hold(Team(), std::to_string(held)).status().code(),
            StatusCode::kFailedPrecondition);

  // A requeue ends the attempt (the agent is told to stop it) and runs it again.
  auto requeued = Actions().Requeue(Team(), std::to_string(held));
  ASSERT_TRUE(requeued.ok()) << requeued.status().ToString();
  EXPECT_EQ(requeued->jobs, std::vector<JobNumber>{JobNumber(held)});
  EXPECT_EQ(State(held), "stopping");
  Exit(held, 143);
  std::vector<TaskLaunch> again = CycleAndTake();
  ASSERT_EQ(Jobs(again), std::vector<uint64_t>{held});
  EXPECT_EQ(again[0].key.attempt, run[0].key.attempt + 1);
  auto job = Reads().GetJob(Team(), JobNumber(held));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ((*job)["restart"]["used"], 0);  // not counted against its restart policy
}

TEST_F(ControllerGatesTest, ATimeLimitFailsTheAttemptAndItsSignalComesFirst) {
  Register();
  const uint64_t job = Submit("team-a", std::string(kOneGpu) +
                                            "runtime_limit: 10m\nsignal: {name: USR1, before: 2m}\n");
  ASSERT_EQ(Jobs(CycleAndTake()), std::vector<uint64_t>{job});
  auto stops = [&] {
    EXPECT_TRUE(controller_->RunCycle().ok());
    auto r = controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, Running(), {}});
    EXPECT_TRUE(r.ok());
    return r.ok() ? r->stop : std::vector<TaskStop>{};
  };
  clock_.Advance(7 * kMinute);
  EXPECT_TRUE(stops().empty());
  clock_.Advance(kMinute + kSecond);  // 8 min 1 s: 2 min before the limit have begun
  std::vector<TaskStop> signalled = stops();
  ASSERT_EQ(signalled.size(), 1u);
  EXPECT_EQ(signalled[0].signal, 10);  // SIGUSR1
  // Its grace runs to the limit and then the usual stop grace (30 s).
  EXPECT_EQ(signalled[0].grace_ms, (kMinute + 59 * kSecond + 30 * kSecond) / 1000);
  EXPECT_EQ(State(job), "running");
  // Until the task is gone the agent is told the same (it acts on the first only).
  clock_.Advance(kSecond);
  for (const TaskStop& again : stops()) {
    EXPECT_EQ(again, signalled[0]);
  }
  EXPECT_EQ(State(job), "running");
  clock_.Advance(2 * kMinute);
  (void)stops();
  EXPECT_EQ(State(job), "stopping");
  Exit(job, 0);
  EXPECT_EQ(State(job), "failed");
  EXPECT_EQ(Reason(job), "failed: time limit of 10m reached");

  // A task that saves its work on the signal and exits 0 before the limit succeeds.
  const uint64_t saver = Submit("team-a", std::string(kOneGpu) +
                                              "runtime_limit: 10m\nsignal: {name: USR1, before: 2m}\n");
  ASSERT_EQ(Jobs(CycleAndTake()), std::vector<uint64_t>{saver});
  clock_.Advance(9 * kMinute);
  ASSERT_EQ(stops().size(), 1u);
  Exit(saver, 0);
  EXPECT_EQ(State(saver), "succeeded");
}

}  // namespace
}  // namespace tessera
