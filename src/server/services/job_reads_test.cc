// JobReads (services/job_reads.h): a job, a page of the listing, a task's log and a
// terminal's endpoint as the API reads them, on a manual clock with the test playing the
// agent.
#include "server/services/job_reads.h"

#include <string>
#include <vector>

#include "server/controller_fixture.h"

namespace tessera {
namespace job_reads_test {

constexpr const char* kOneGpu =
    "queue: team-a\ncommand: [true]\nresources: {gpus: 1, gpu_model: H100-80GB}\n";
constexpr const char* kTerminal =
    "queue: team-a\ncommand: [bash]\nenv: {TESSERA_PTY: \"1\"}\n"
    "resources: {gpus: 1, gpu_model: H100-80GB}\n";

class JobReadsTest : public ControllerTest {
 protected:
  void Tune(ControllerOptions& o) override { o.finished_in_memory = 1; }

  static Principal Admin() { return Principal{Role::kAdmin, "", "test"}; }
  static Principal TeamA() { return Principal{Role::kTenant, "team-a", "test"}; }
  static Principal TeamB() { return Principal{Role::kTenant, "team-b", "other"}; }

  // A heartbeat in which `job`'s task 0 reports `report`'s output and terminal.
  void Report(uint64_t job, TaskReport report) {
    std::vector<TaskReport> reports;
    for (TaskReport& r : Running()) {
      reports.push_back(r.key.job == job ? report : r);
    }
    auto r = controller_->Heartbeat(HeartbeatRequest{"node-1", agent_id_, reports, {}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
};

TEST_F(JobReadsTest, ATenantCannotReadAnotherTenantsJobInMemoryOrArchived) {
  Register();
  const uint64_t id = Submit("team-a", kOneGpu);
  ASSERT_NE(id, 0u);
  const std::string missing = "no job " + std::to_string(id);
  EXPECT_EQ(Reads().GetJob(TeamA(), JobNumber(id)).value()["tenant"], "team-a");
  EXPECT_EQ(Reads().GetJob(Admin(), JobNumber(id)).value()["id"], id);
  StatusOr<nlohmann::json> theirs = Reads().GetJob(TeamB(), JobNumber(id));
  EXPECT_EQ(theirs.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(theirs.status().message(), missing);
  EXPECT_EQ(Reads().ReadLog(TeamB(), JobNumber(id), 0, 0, 100).status().message(), missing);
  EXPECT_EQ(Reads().Attach(TeamB(), JobNumber(id), 0).status().message(), missing);

  // Archived out of memory (one finished job kept): read from the store, the same rule.
  ASSERT_EQ(CycleAndTake().size(), 1u);
  Exit(id);
  const uint64_t newer = Submit("team-a", kOneGpu);
  ASSERT_EQ(CycleAndTake().size(), 1u);
  Exit(newer);
  ASSERT_TRUE(controller_->RunCycle().ok());  // archives the older
  ASSERT_EQ(controller_->published().Get(JobNumber(id)), nullptr) << "not archived";
  StatusOr<std::string> text = Reads().GetJobText(TeamA(), JobNumber(id));
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(nlohmann::json::parse(*text)["state"], "succeeded");
  EXPECT_EQ(Reads().GetJobText(TeamB(), JobNumber(id)).status().message(), missing);
  EXPECT_EQ(Reads().ReadLog(TeamA(), JobNumber(id), 0, 0, 100).value().job_state, "succeeded");
  EXPECT_EQ(Reads().ReadLog(TeamB(), JobNumber(id), 0, 0, 100).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(Reads().GetJob(Admin(), JobNumber(newer + 1)).status().code(), StatusCode::kNotFound);
}

TEST_F(JobReadsTest, APageIsNewestFirstAndSaysWhetherMoreFollow) {
  const uint64_t a1 = Submit("team-a", kOneGpu);
  const uint64_t b1 = Submit("team-b", "queue: team-b\ncommand: [true]\n");
  const uint64_t a2 = Submit("team-a", kOneGpu);
  JobReads::JobPage first = Reads().ListJobIds(Admin(), JobFilter{}, JobNumber(0), 2);
  EXPECT_EQ(first.ids(), (std::vector<JobNumber>{JobNumber(a2), JobNumber(b1)}));
  EXPECT_TRUE(first.more);
  JobReads::JobPage rest = Reads().ListJobIds(Admin(), JobFilter{}, JobNumber(b1), 2);
  EXPECT_EQ(rest.ids(), std::vector<JobNumber>{JobNumber(a1)});
  EXPECT_FALSE(rest.more);
  // A tenant's page holds its own jobs only; its rows are the jobs' texts.
  JobReads::JobPage mine = Reads().ListJobIds(TeamA(), JobFilter{}, JobNumber(0), 10);
  EXPECT_EQ(mine.ids(), (std::vector<JobNumber>{JobNumber(a2), JobNumber(a1)}));
  EXPECT_FALSE(mine.more);
  EXPECT_EQ(Reads().JobText(*mine.jobs[0]), Reads().GetJobText(TeamA(), JobNumber(a2)).value());
}

TEST_F(JobReadsTest, ALogIsReadFromAnOffsetWithTheJobsState) {
  Register();
  const uint64_t id = Submit("team-a", kOneGpu);
  ASSERT_EQ(CycleAndTake().size(), 1u);
  TaskReport out;
  out.key = running_.at(id);
  out.log_chunk = "hello world\n";
  Report(id, out);
  StatusOr<LogChunk> chunk = Reads().ReadLog(TeamA(), JobNumber(id), 0, 6, 1024);
  ASSERT_TRUE(chunk.ok()) << chunk.status().ToString();
  EXPECT_EQ(chunk->data, "world\n");
  EXPECT_EQ(chunk->next_offset, 12);
  EXPECT_EQ(chunk->job_state, "running");
  EXPECT_EQ(Reads().ReadLog(TeamA(), JobNumber(id), 0, 0, 5).value().data, "hello");
  EXPECT_EQ(Reads().ReadTaskOutput(JobNumber(id), 5).value(), "hello");
  StatusOr<LogChunk> beyond = Reads().ReadLog(TeamA(), JobNumber(id), 1, 0, 1024);
  EXPECT_EQ(beyond.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(beyond.status().message(), "task must be in 0..0");
}

TEST_F(JobReadsTest, AttachIsNotReadyBeforeTheJobRunsAndItsAgentHasSaid) {
  Register();
  const uint64_t id = Submit("team-a", kTerminal);
  ASSERT_NE(id, 0u);
  StatusOr<nlohmann::json> pending = Reads().Attach(TeamA(), JobNumber(id), 0);
  ASSERT_TRUE(pending.ok()) << pending.status().ToString();
  EXPECT_EQ(*pending, (nlohmann::json{{"job", id}, {"task", 0}, {"state", "pending"},
                                      {"ready", false}}));
  EXPECT_EQ(Reads().Attach(TeamA(), JobNumber(id), 1).status().code(),
            StatusCode::kInvalidArgument);

  ASSERT_EQ(CycleAndTake().size(), 1u);
  EXPECT_EQ(Reads().Attach(TeamA(), JobNumber(id), 0).value()["ready"], false) << "not reported";
  TaskReport listening;
  listening.key = running_.at(id);
  listening.pty_port = 4242;
  Report(id, listening);
  StatusOr<nlohmann::json> ready = Reads().Attach(TeamA(), JobNumber(id), 0);
  ASSERT_TRUE(ready.ok()) << ready.status().ToString();
  EXPECT_EQ((*ready)["ready"], true);
  EXPECT_EQ((*ready)["state"], "running");
  EXPECT_EQ((*ready)["address"], "127.0.0.1");
  EXPECT_EQ((*ready)["port"], 4242);
  EXPECT_EQ((*ready)["attempt"], running_.at(id).attempt);
  EXPECT_EQ((*ready)["secret"].get<std::string>().size(), 64u);

  // A job started without a terminal has none to attach to.
  const uint64_t plain = Submit("team-a", kOneGpu);
  EXPECT_EQ(Reads().Attach(TeamA(), JobNumber(plain), 0).status().code(),
            StatusCode::kFailedPrecondition);
}

}  // namespace job_reads_test
}  // namespace tessera
