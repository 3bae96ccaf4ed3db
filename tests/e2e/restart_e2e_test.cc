// End to end: GPU faults and the restart policy on real `tessera server` and `tessera
// agent` processes with fake GPUs.
//
//  - a job that saves a checkpoint and resumes from it: an XID 79 injected on its GPU
//    (the agent's fake-faults file) stops it with the preemption signal, it checkpoints,
//    and it is requeued onto the node's other GPU, where it reads what it saved;
//  - a task that always fails, with restart {max: 2}: it runs 3 times, then the job fails.
// Every wait is bounded; each test takes a few seconds.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "e2e/cluster_fixture.h"
#include "e2e/process.h"

namespace tessera::e2e {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// Appends "run ATTEMPT GPUS" to $RECORDS/runs, and "resumed TEXT" when its checkpoint
// directory holds a saved state; saves one, then works until told to stop, when it
// reports the checkpoint (the preemption protocol) and exits 143.
constexpr const char* kCheckpointingTask = R"sh(d="$TESSERA_CHECKPOINT_DIR"
echo "run $TESSERA_ATTEMPT ${CUDA_VISIBLE_DEVICES:-none}" >> "$RECORDS/runs"
if [ -f "$d/state" ]; then echo "resumed $(cat "$d/state")" >> "$RECORDS/runs"; fi
echo "step-$TESSERA_ATTEMPT" > "$d/state"
trap 'mkdir -p "$d/.tessera"; touch "$d/.tessera/checkpointed"; exit 143' TERM
i=0
while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
)sh";

class RestartTest : public ServerAndAgentsTest {
 protected:
  std::string Prefix() const override { return "restart"; }

  void SetUp() override {
    ServerAndAgentsTest::SetUp();
    if (HasFatalFailure()) {
      return;
    }
    records_ = dir_ + "/records";
    ASSERT_TRUE(std::filesystem::create_directory(records_));
    ASSERT_EQ(::chmod(records_.c_str(), 01777), 0);  // tasks run as their tenant's uid
  }

  uint64_t Submit(const json& spec) {
    auto r = ApiClient(url_, admin_).Post("/v1/jobs", spec.dump(), "application/json");
    EXPECT_TRUE(r && (r->status == 200 || r->status == 201)) << (r ? r->body : "no answer");
    if (!r) {
      return 0;
    }
    json body = json::parse(r->body, nullptr, false);
    return body.is_object() ? body.value("id", uint64_t{0}) : 0;
  }

  std::vector<std::string> Lines(const std::string& file) {
    std::vector<std::string> out;
    std::istringstream in(Process::ReadFile(records_ + "/" + file));
    for (std::string line; std::getline(in, line);) {
      out.push_back(line);
    }
    return out;
  }

  std::string records_;
};

TEST_F(RestartTest, AnXid79RequeuesTheJobWhichResumesFromItsCheckpointOnAnotherGpu) {
  StartAgent("n1", "2xH100-80GB", {"--telemetry-interval", "100ms"});
  const uint64_t id = Submit({{"name", "resumes"},
                              {"queue", "team-a"},
                              {"command", kCheckpointingTask},
                              {"env", {{"RECORDS", records_}}},
                              {"checkpoint", {{"on_signal", true}}},
                              {"resources", {{"gpus", 1}}}});
  ASSERT_NE(id, 0u);
  int gpu = -1;
  ASSERT_TRUE(WaitFor(
      [&] {
        const json job = Job(id);
        if (job.value("state", "") != "running" || Lines("runs").empty()) {
          return false;
        }
        gpu = job["tasks"][0]["gpus"][0].value("index", -1);
        return gpu >= 0;
      },
      15s))
      << Job(id).dump();
  // The healthy baseline has been sampled by now (the agent samples every 100 ms).
  std::this_thread::sleep_for(300ms);
  std::ofstream(dir_ + "/agent-n1/fake-faults", std::ios::app)
      << "{\"gpu\":" << gpu << ",\"xid\":79}\n";

  json job;
  ASSERT_TRUE(WaitFor(
      [&] {
        job = Job(id);
        return job.value("attempts", 0) == 2 && job.value("state", "") == "running" &&
               Lines("runs").size() >= 3;
      },
      20s))
      << job.dump() << "\n" << Process::ReadFile(records_ + "/runs");
  const json& first = job["attempt_history"][0];
  EXPECT_EQ(first["ended"], "gpu-fault");
  EXPECT_EQ(first["detail"], "XID 79 (GPU has fallen off the bus) on node n1 GPU " +
                                 std::to_string(gpu));
  EXPECT_EQ(first["tasks"][0]["gpus"][0]["index"], gpu);
  const int now_on = job["tasks"][0]["gpus"][0].value("index", -1);
  EXPECT_NE(now_on, gpu);
  EXPECT_GE(now_on, 0);
  // The task saw its checkpoint: the second run read what the first saved.
  const std::vector<std::string> runs = Lines("runs");
  ASSERT_EQ(runs.size(), 3u) << Process::ReadFile(records_ + "/runs");
  EXPECT_EQ(runs[0].rfind("run 1 ", 0), 0u) << runs[0];
  EXPECT_EQ(runs[1].rfind("run 2 ", 0), 0u) << runs[1];
  EXPECT_NE(runs[0].substr(6), runs[1].substr(6)) << "another GPU";
  EXPECT_EQ(runs[2], "resumed step-1");
  EXPECT_NE(Process::ReadFile(dir_ + "/server.log").find("stops: GPU fault"), std::string::npos);
  auto metrics = ApiClient(url_, admin_).Get("/metrics");
  ASSERT_TRUE(metrics && metrics->status == 200);
  EXPECT_NE(metrics->body.find("tessera_job_gpu_faults_total{kind=\"xid\"} 1"),
            std::string::npos);
}

TEST_F(RestartTest, AFailingTaskWithRestartMaxTwoRunsThreeTimesThenTheJobFails) {
  StartAgent("n1", "1xH100-80GB");
  const uint64_t id = Submit({{"name", "fails"},
                              {"queue", "team-a"},
                              {"command", "echo \"run $TESSERA_ATTEMPT\" >> \"$RECORDS/fails\"; exit 3"},
                              {"env", {{"RECORDS", records_}}},
                              {"restart", {{"max", 2}, {"on", {"failure"}}, {"backoff", "500ms"}}},
                              {"resources", {{"gpus", 1}}}});
  ASSERT_NE(id, 0u);
  json job;
  ASSERT_TRUE(WaitFor(
      [&] {
        job = Job(id);
        return job.value("state", "") == "failed";
      },
      20s))
      << job.dump();
  // Bounded settle: nothing runs a fourth time.
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(Lines("fails"), (std::vector<std::string>{"run 1", "run 2", "run 3"}));
  job = Job(id);
  EXPECT_EQ(job["state"], "failed");
  EXPECT_EQ(job["attempts"], 3);
  EXPECT_EQ(job["exit_code"], 3);
  EXPECT_EQ(job["restart"]["used"], 2);
  EXPECT_EQ(job["restart"]["left"], 0);
  ASSERT_EQ(job["attempt_history"].size(), 3u);
  for (const json& a : job["attempt_history"]) {
    EXPECT_EQ(a["ended"], "failed");
    EXPECT_EQ(a["exit_code"], 3);
  }
  EXPECT_NE(job.value("reason", "").find("no restarts left: 2 of 2 used"), std::string::npos)
      << job["reason"];
}

}  // namespace
}  // namespace tessera::e2e
