// End to end: validation runs on real `tessera server` and `tessera agent` processes with
// fake GPUs, driven through the `tessera validate` command. A check that prints a value
// read from a file: the first run sets GPU 0's baseline, the second, 30 % lower, drains
// that GPU with the regression as the reason. And a check on a busy node: the node is
// held (its job not preempted, new work kept off it) until the job ends, then the check
// runs before the waiting work. Every wait is bounded; each test takes a few seconds.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "e2e/cluster_fixture.h"
#include "e2e/process.h"

namespace tessera::e2e {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class ValidationTest : public ServerAndAgentsTest {
 protected:
  std::string Prefix() const override { return "validation"; }

  // `tessera validate ARGS` as the admin; its exit status, its output in *output.
  int Validate(std::vector<std::string> args, std::string* output = nullptr) {
    std::vector<std::string> argv = {TESSERA_BINARY, "validate"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--server", url_, "--token", admin_});
    const std::string log = dir_ + "/cli-" + std::to_string(++cli_runs_) + ".log";
    Process p(argv, log);
    const std::optional<int> status = p.Wait(20s);
    if (output != nullptr) {
      *output = p.Output();
    }
    return status.value_or(-1);
  }
  void WriteValue(const std::string& value) {
    std::ofstream(value_file_) << value << "\n";
    ASSERT_EQ(::chmod(value_file_.c_str(), 0644), 0);  // the check runs as _validation's uid
  }
  // Waits for `n` runs of check "burn" and returns the newest.
  json WaitForRuns(size_t n) {
    json runs;
    EXPECT_TRUE(WaitFor(
        [&] {
          runs = Get("/v1/admin/validations/results?check=burn").value("runs", json::array());
          return runs.size() >= n;
        },
        20s))
        << runs.dump() << "\n"
        << server_->Output();
    return runs.empty() ? json::object() : runs[0];
  }

  // POST /v1/jobs as the admin: the new job's id (0 on failure).
  uint64_t Submit(const std::string& command) {
    const json spec = {
        {"name", "work"}, {"queue", "team-a"}, {"command", command}, {"resources", {{"gpus", 1}}}};
    auto r = ApiClient(url_, admin_).Post("/v1/jobs", spec.dump(), "application/json");
    if (!r || (r->status != 200 && r->status != 201)) {
      ADD_FAILURE() << "submit: " << (r ? r->body : "no answer");
      return 0;
    }
    return json::parse(r->body).value("id", uint64_t{0});
  }
  std::string State(uint64_t id) { return Job(id).value("state", ""); }

  std::string value_file_;
  int cli_runs_ = 0;
};

// The node is held while its job runs: the job is not preempted, new work does not land
// there although a GPU is free, and the check runs once the job ends, before that work.
TEST_F(ValidationTest, TheCheckWaitsForTheNodesJobAndHoldsTheNodeMeanwhile) {
  StartAgent("n1", "2xH100-80GB");
  const uint64_t busy = Submit("sleep 60");
  ASSERT_TRUE(WaitFor([&] { return State(busy) == "running"; }, 10s)) << Job(busy).dump();
  std::string out;
  ASSERT_EQ(Validate({"add", "burn", "--command",
                      "echo '{\"gpu\":1,\"metric\":\"tflops\",\"value\":300}'"},
                     &out),
            0)
      << out;
  ASSERT_EQ(Validate({"run", "burn"}, &out), 0) << out;
  json node;
  ASSERT_TRUE(WaitFor(
      [&] {
        node = Get("/v1/nodes")["nodes"][0];
        return node.value("reason", "") ==
               "held for validation burn: takes no new work until its jobs end";
      },
      10s))
      << node.dump();
  EXPECT_EQ(node["schedulable"], false);
  const uint64_t later = Submit("true");
  std::this_thread::sleep_for(1s);  // cycles run every 50 ms: it would have started
  EXPECT_EQ(State(later), "pending") << Job(later).dump();
  EXPECT_EQ(State(busy), "running");  // not preempted for the check
  EXPECT_TRUE(Get("/v1/admin/validations/results?check=burn")["runs"].empty());

  auto cancelled =
      ApiClient(url_, admin_)
          .Post("/v1/jobs/" + std::to_string(busy) + "/cancel", "", "application/json");
  ASSERT_TRUE(cancelled && cancelled->status == 200);
  const json run = WaitForRuns(1);
  EXPECT_EQ(run.value("outcome", ""), "passed") << run.dump();
  ASSERT_TRUE(WaitFor([&] { return State(later) == "succeeded"; }, 10s)) << Job(later).dump();
  // The check's job ran before the waiting work started.
  EXPECT_LE(Job(run["job"].get<uint64_t>()).value("end_time", ""),
            Job(later).value("start_time", "~"));
}

TEST_F(ValidationTest, ARegressingRunDrainsItsGpuWithTheReason) {
  StartAgent("n1", "2xH100-80GB");
  value_file_ = dir_ + "/value";
  WriteValue("312.4");
  const std::string command =
      "echo warming up; echo '{\"gpu\":0,\"metric\":\"matmul_tflops\","
      "\"value\":'$(cat " +
      value_file_ + ")'}'";
  std::string out;
  ASSERT_EQ(
      Validate({"add", "burn", "--command", command, "--every", "24h", "--threshold", "10%"}, &out),
      0)
      << out;
  EXPECT_NE(out.find("validation burn added: every 1d on all nodes"), std::string::npos) << out;

  ASSERT_EQ(Validate({"run", "burn"}, &out), 0) << out;
  json first = WaitForRuns(1);
  EXPECT_EQ(first.value("outcome", ""), "passed") << first.dump();
  ASSERT_EQ(first["results"].size(), 1U) << first.dump();
  EXPECT_EQ(first["results"][0]["value"], 312.4);
  // The check ran as a job of its own, shown like any other.
  const json job = Job(first["job"].get<uint64_t>());
  EXPECT_EQ(job.value("tenant", ""), "_validation") << job.dump();
  EXPECT_EQ(job.value("state", ""), "succeeded") << job.dump();
  EXPECT_TRUE(Get("/v1/nodes")["nodes"][0]["gpus"][0]["drain"].is_null());

  WriteValue("218.68");  // 30 % below 312.4
  ASSERT_EQ(Validate({"run", "burn", "--node", "n1"}, &out), 0) << out;
  json second = WaitForRuns(2);
  EXPECT_EQ(second.value("outcome", ""), "regressed") << second.dump();
  const json gpus = Get("/v1/nodes")["nodes"][0]["gpus"];
  ASSERT_FALSE(gpus[0]["drain"].is_null()) << gpus.dump();
  EXPECT_EQ(gpus[0]["drain"]["reason"],
            "validation burn: matmul_tflops 218.68 is 30 % below baseline 312.4 (threshold 10 %)");
  EXPECT_TRUE(gpus[1]["drain"].is_null());

  ASSERT_EQ(Validate({"results", "burn"}, &out), 0) << out;
  EXPECT_NE(out.find("regressed"), std::string::npos) << out;
  EXPECT_NE(out.find("-30.0%"), std::string::npos) << out;
  auto metrics = ApiClient(url_, admin_).Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("tessera_validation_regressions_total 1"), std::string::npos);

  ASSERT_EQ(Validate({"list"}, &out), 0) << out;
  EXPECT_NE(out.find("burn  1d     all    10%        higher  10m      1 scheduled"),
            std::string::npos)
      << out;
  ASSERT_EQ(Validate({"remove", "burn"}, &out), 0) << out;
  EXPECT_TRUE(Get("/v1/admin/validations")["checks"].empty());
  EXPECT_NE(Validate({"remove", "burn"}, &out), 0);  // gone
  EXPECT_NE(out.find("no validation check 'burn'"), std::string::npos) << out;
}

}  // namespace
}  // namespace tessera::e2e
