// End-to-end tests of a cluster made of real processes on loopback: the `tessera`
// binary as controller and agents, tasks as real processes on fake GPUs.
//
//  - the README's main command (scripts/demo.sh) runs the examples and checks what
//    each task saw;
//  - kill -9 of the controller while 1,000 jobs are submitted and run: every
//    acknowledged job exists exactly once and ends, no GPU is ever given twice (the
//    tasks themselves hold a lock per GPU UUID while they run);
//  - `tessera up` and an agent run as root refuse a data directory under a 0700 one;
//  - an agent is killed: its task is requeued and completes on the other node;
//  - a high-priority job preempts a low-priority one, which checkpoints on SIGTERM,
//    is requeued and resumes from its checkpoint directory.
// Every wait is bounded.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <httplib.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "e2e/cluster_fixture.h"
#include "e2e/process.h"

namespace tessera::e2e {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTestDir("e2e");
    ASSERT_FALSE(dir_.empty());
    port_ = FreePort();
    url_ = "http://127.0.0.1:" + std::to_string(port_);
  }
  void TearDown() override {
    StopAgentsThenServer(agents_, server_);
    RemoveTestDir(dir_, HasFailure());
  }

  void StartServer(const std::vector<std::string>& extra = {}) {
    server_ = StartServerProcess(dir_ + "/server", port_, extra, dir_ + "/server.log");
    ASSERT_TRUE(WaitHealthy(url_, 20s)) << server_->Output();
    admin_ = ReadToken(dir_ + "/server/admin.token");
    ASSERT_FALSE(admin_.empty());
  }

  void StartAgent(const std::string& name, const std::string& gpus) {
    agents_[name] = StartAgentProcess(url_, dir_ + "/server", name, dir_ + "/agent-" + name, gpus,
                                      {}, dir_ + "/agent-" + name + ".log");
    ASSERT_TRUE(WaitFor([&] { return NodeUp(url_, admin_, name); }, 20s))
        << agents_[name]->Output();
  }

  httplib::Client Client() { return ApiClient(url_, admin_); }

  json Get(const std::string& path) { return GetJson(url_, admin_, path); }

  // Submits until acknowledged (the controller may be down for a while); 0 on timeout.
  uint64_t Submit(const json& spec, const std::string& key, std::chrono::seconds patience = 60s) {
    const auto deadline = std::chrono::steady_clock::now() + patience;
    while (std::chrono::steady_clock::now() < deadline) {
      httplib::Headers h;
      if (!key.empty()) {
        h.emplace("Idempotency-Key", key);
      }
      auto r = Client().Post("/v1/jobs", h, spec.dump(), "application/json");
      if (r && (r->status == 200 || r->status == 201)) {
        return json::parse(r->body)["id"].get<uint64_t>();
      }
      if (r && r->status == 400) {
        ADD_FAILURE() << "refused: " << r->body;
        return 0;
      }
      std::this_thread::sleep_for(100ms);
    }
    return 0;
  }

  json Job(uint64_t id) { return Get("/v1/jobs/" + std::to_string(id)); }

  std::string Log(uint64_t id, int task = 0) {
    auto r = Client().Get(("/v1/jobs/" + std::to_string(id) + "/logs?task=" + std::to_string(task)).c_str());
    return r && r->status == 200 ? r->body : "";
  }

  bool WaitState(uint64_t id, const std::string& state, std::chrono::milliseconds timeout) {
    return WaitFor([&] { return Job(id).value("state", "") == state; }, timeout);
  }

  std::string dir_;
  int port_ = 0;
  std::string url_;
  std::string admin_;
  std::unique_ptr<Process> server_;
  std::map<std::string, std::unique_ptr<Process>> agents_;
};

TEST_F(ClusterTest, ReadmeMainCommandRunsTheExamples) {
  Process demo({"/bin/bash", TESSERA_SOURCE_DIR "/scripts/demo.sh", TESSERA_BINARY},
               dir_ + "/demo.log");
  std::optional<int> rc = demo.Wait(240s);
  ASSERT_TRUE(rc.has_value()) << demo.Output();
  EXPECT_EQ(*rc, 0) << demo.Output();
  EXPECT_NE(demo.Output().find("demo: all 4 examples succeeded"), std::string::npos)
      << demo.Output();
}

TEST_F(ClusterTest, ControllerKilledWhileThousandJobsRun) {
  StartServer();
  StartAgent("a", "8xH100-80GB");
  StartAgent("b", "8xH100-80GB");
  const std::string locks = dir_ + "/locks";
  std::filesystem::create_directories(locks);
  ::chmod(locks.c_str(), 01777);  // shared by tasks of every tenant's uid
  // Each task holds a directory per GPU UUID while it runs: mkdir fails if another
  // task holds the same GPU, and the task records the double booking.
  // A preempted task (SIGTERM) releases its locks too.
  const std::string script =
      R"(held=""
release() { for g in $held; do rmdir "$LOCKS/$g"; done; }
trap 'release; exit 143' TERM
for g in $(echo "$CUDA_VISIBLE_DEVICES" | tr , ' '); do
  if mkdir "$LOCKS/$g" 2>/dev/null; then held="$held $g"
  else echo "job $TESSERA_JOB_ID attempt $TESSERA_ATTEMPT: $g already held" >> "$LOCKS/violations"; fi
done
sleep 0.05 & wait $!
release
)";
  constexpr int kJobs = 1000;
  constexpr int kThreads = 4;
  std::mutex mu;
  std::map<std::string, uint64_t> acknowledged;  // key -> id
  std::atomic<int> submitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < kJobs; i += kThreads) {
        const std::string key = "job-" + std::to_string(i);
        json spec = {{"name", key},
                     {"queue", i % 2 == 0 ? "team-a" : "team-b"},
                     {"command", script},
                     {"env", {{"LOCKS", locks}}},
                     {"resources", {{"gpus", 1 + i % 2}, {"cpu", "0.1"}, {"memory", "64MiB"}}}};
        const uint64_t id = Submit(spec, key, 120s);
        std::lock_guard<std::mutex> lock(mu);
        if (id != 0) {
          acknowledged[key] = id;
        }
        ++submitted;
      }
    });
  }
  // Kill the controller in the middle of it, then bring it back.
  ASSERT_TRUE(WaitFor([&] { return submitted.load() >= kJobs / 3; }, 120s));
  server_->Signal(SIGKILL);
  ASSERT_TRUE(server_->Wait(10s).has_value());
  std::this_thread::sleep_for(500ms);
  StartServer();
  for (std::thread& th : threads) {
    th.join();
  }
  ASSERT_EQ(acknowledged.size(), static_cast<size_t>(kJobs));

  json jobs;
  const bool all_done = WaitFor(
      [&] {
        jobs = Get("/v1/jobs?limit=100000");
        if (!jobs.contains("jobs")) {
          return false;
        }
        for (const json& j : jobs["jobs"]) {
          const std::string st = j["state"];
          if (st != "succeeded" && st != "failed" && st != "cancelled") {
            return false;
          }
        }
        return true;
      },
      300s);
  ASSERT_TRUE(all_done) << jobs.dump().substr(0, 2000);
  std::map<std::string, int> by_name;
  std::map<uint64_t, std::string> name_of;
  for (const json& j : jobs["jobs"]) {
    ++by_name[j["name"].get<std::string>()];
    name_of[j["id"].get<uint64_t>()] = j["name"];
    EXPECT_EQ(j["state"], "succeeded") << j.dump();
  }
  EXPECT_EQ(by_name.size(), static_cast<size_t>(kJobs));
  for (const auto& [key, id] : acknowledged) {
    EXPECT_EQ(by_name[key], 1) << key << " exists " << by_name[key] << " times";
    EXPECT_EQ(name_of[id], key);
  }
  EXPECT_FALSE(std::filesystem::exists(locks + "/violations"))
      << Process::ReadFile(locks + "/violations");
  for (auto& [name, agent] : agents_) {
    EXPECT_EQ(agent->Output().find("double-booked"), std::string::npos) << agent->Output();
  }
}

// Run as root, tasks run as other uids: `tessera up` (and an agent) on a data directory
// under a private (0700) directory refuse to start, naming the fix, instead of starting
// and failing every task.
TEST_F(ClusterTest, UpAsRootRefusesADataDirectoryTasksCannotReach) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "runs as root only: as another user tasks run as that user";
  }
  const std::string home = dir_ + "/private-home";
  ASSERT_EQ(::mkdir(home.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(home.c_str(), 0700), 0);
  Process up({TESSERA_BINARY, "up", "--data", home + "/tessera-data", "--listen", "127.0.0.1:0"},
             dir_ + "/up-private.log");
  const std::optional<int> rc = up.Wait(std::chrono::seconds(60));
  ASSERT_TRUE(rc.has_value()) << "tessera up started: " << up.Output();
  EXPECT_NE(*rc, 0);
  const std::string out = up.Output();
  EXPECT_NE(out.find(home + " (mode 0700) is not searchable by others"), std::string::npos) << out;
  EXPECT_NE(out.find("chmod o+x " + home), std::string::npos) << out;
  EXPECT_NE(out.find("--data /var/lib/tessera/tessera-data"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(home + "/tessera-data"));  // nothing made
  Process agent({TESSERA_BINARY, "agent", "--containers", "off", "--server", "http://127.0.0.1:1",
                 "--token", "x", "--data", home + "/agent", "--fake-gpus", "1xH100-80GB"},
                dir_ + "/agent-private.log");
  const std::optional<int> agent_rc = agent.Wait(std::chrono::seconds(60));
  ASSERT_TRUE(agent_rc.has_value()) << agent.Output();
  EXPECT_NE(*agent_rc, 0);
  EXPECT_NE(agent.Output().find("is not searchable by others"), std::string::npos)
      << agent.Output();
  // Once others may search it, the same command starts.
  ASSERT_EQ(::chmod(home.c_str(), 0711), 0);
  Process ok({TESSERA_BINARY, "up", "--data", home + "/tessera-data", "--listen", "127.0.0.1:0"},
             dir_ + "/up-reachable.log");
  EXPECT_TRUE(WaitFor([&] { return ok.Output().find("Tessera is up") != std::string::npos; },
                      std::chrono::seconds(60)))
      << ok.Output();
  ok.Signal(SIGTERM);
  EXPECT_EQ(ok.Wait(std::chrono::seconds(30)), std::optional<int>(0)) << ok.Output();
}

TEST_F(ClusterTest, LostNodesTasksAreRequeuedToTheOtherNode) {
  StartServer({"--node-timeout", "2s"});
  StartAgent("a", "8xH100-80GB");
  StartAgent("b", "8xH100-80GB");
  json spec = {{"name", "long"},
               {"queue", "team-a"},
               {"command", "sleep 3; echo finished on $TESSERA_ATTEMPT"},
               {"resources", {{"gpus", 8}}}};
  const uint64_t x = Submit(spec, "");
  spec["name"] = "other";
  const uint64_t y = Submit(spec, "");
  ASSERT_TRUE(WaitState(x, "running", 20s));
  ASSERT_TRUE(WaitState(y, "running", 20s));
  const uint64_t on_a = Job(x)["tasks"][0]["node"] == "a" ? x : y;
  ASSERT_EQ(Job(on_a)["tasks"][0]["node"], "a");

  agents_["a"]->Signal(SIGKILL);
  ASSERT_TRUE(agents_["a"]->Wait(10s).has_value());
  agents_.erase("a");
  ASSERT_TRUE(WaitFor(
      [&] {
        json nodes = Get("/v1/nodes");
        for (const json& n : nodes["nodes"]) {
          if (n["name"] == "a") {
            return n["state"] == "down";
          }
        }
        return false;
      },
      15s));
  ASSERT_TRUE(WaitState(on_a, "succeeded", 40s)) << Job(on_a).dump();
  json job = Job(on_a);
  EXPECT_EQ(job["attempts"], 2);
  EXPECT_EQ(job["tasks"][0]["node"], "b");
  EXPECT_NE(Log(on_a).find("finished on 2"), std::string::npos) << Log(on_a);
}

TEST_F(ClusterTest, PreemptedJobCheckpointsAndResumes) {
  StartServer();
  StartAgent("a", "8xH100-80GB");
  // Saves its progress on SIGTERM and reports the checkpoint; resumes from it.
  const std::string victim_script = R"sh(ck="$TESSERA_CHECKPOINT_DIR/progress"
if [ -f "$ck" ]; then echo "resumed from step $(cat "$ck")"; exit 0; fi
on_term() {
  echo "got SIGTERM; marker: $(head -1 "$TESSERA_CHECKPOINT_DIR/.tessera/preempt")"
  echo 7 > "$ck"
  touch "$TESSERA_CHECKPOINT_DIR/.tessera/checkpointed"
  echo checkpointed
  exit 0
}
trap on_term TERM
echo started
while :; do sleep 0.1 & wait $!; done
)sh";
  json low = {{"name", "low"},
              {"queue", "team-a"},
              {"priority", 0},
              {"command", victim_script},
              {"checkpoint", {{"on_signal", true}}},
              {"resources", {{"gpus", 8}}}};
  const uint64_t l = Submit(low, "");
  ASSERT_TRUE(WaitState(l, "running", 20s));
  ASSERT_TRUE(WaitFor([&] { return Log(l).find("started") != std::string::npos; }, 10s));

  json high = {{"name", "high"},
               {"queue", "team-a"},
               {"priority", 100},
               {"command", "echo high ran"},
               {"resources", {{"gpus", 8}}}};
  const uint64_t h = Submit(high, "");
  ASSERT_TRUE(WaitState(h, "succeeded", 30s)) << Job(h).dump() << Job(l).dump();
  ASSERT_TRUE(WaitState(l, "succeeded", 30s)) << Job(l).dump();
  json job = Job(l);
  EXPECT_EQ(job["preemptions"], 1);
  EXPECT_EQ(job["attempts"], 2);
  const std::string log = Log(l);
  EXPECT_NE(log.find("got SIGTERM; marker: "), std::string::npos) << log;
  EXPECT_NE(log.find("checkpointed"), std::string::npos) << log;
  EXPECT_NE(log.find("resumed from step 7"), std::string::npos) << log;
}

}  // namespace
}  // namespace tessera::e2e
