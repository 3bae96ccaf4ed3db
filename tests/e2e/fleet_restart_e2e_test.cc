// The fault suite's fleet case (ctest label `faults`; issue 13, "What it must show",
// item 5): a real `tessera server` process and 1,000 simulated agents
// (e2e/agent_fleet.h) of 8 fake GPUs each, in this process, on the agent channel at the
// default heartbeat. Jobs run, some long enough to span what follows; the controller
// gets kill -9 while keyed batches are being submitted (retried while it is down), and
// is restarted on the same store and ports. Then:
//   - every acknowledged job exists once, and the controller has no other job;
//   - every job succeeds in its first attempt;
//   - the simulated agents started each (job, task, attempt) at most once, and only
//     attempt 1 of any job (all 1,000 agents come back, so nothing is requeued);
//   - no launch found its GPU held by a live task on its node (the fleet's ledger), and
//     no task was fenced;
//   - all 1,000 agents registered again and reopened their streams within 30 s.
// The tasks themselves are the fleet's: no processes. Every wait is bounded; the fleet
// and the server are stopped by the test.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "e2e/agent_fleet.h"
#include "e2e/cluster_fixture.h"
#include "e2e/process.h"

namespace tessera::e2e {
namespace {

using namespace std::chrono_literals;
using fleet::AgentFleet;
using fleet::FleetOptions;
using fleet::FleetStats;
using nlohmann::json;

constexpr int kAgents = 1000;

json Spec(const std::string& name, int gpus, int run_ms) {
  return {{"name", name},
          {"queue", "default"},
          {"command", {"true"}},
          {"env", {{"FLEET_RUN_MS", std::to_string(run_ms)}}},
          {"resources", {{"gpus", gpus}, {"cpu", "0.1"}, {"memory", "64MiB"}}}};
}

double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

class FleetRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTestDir("fleet");
    ASSERT_FALSE(dir_.empty());
    // One queue without a quota: the jobs wait for GPUs, not for a share.
    queues_ = dir_ + "/queues.yaml";
    std::ofstream(queues_) << "queues:\n  - name: default\n";
    port_ = FreePort();
    agent_port_ = FreePort();
    url_ = "http://127.0.0.1:" + std::to_string(port_);
  }

  void TearDown() override {
    if (fleet_ != nullptr) {
      fleet_->Stop();
    }
    if (server_ && server_->running()) {
      ExpectCleanStop(*server_, 30s, "server");
    }
    RemoveTestDir(dir_, HasFailure());
  }

  void StartServer() {
    server_ = StartServerProcess(dir_ + "/server", port_,
                                 {"--agent-port", std::to_string(agent_port_), "--queues", queues_,
                                  "--rate", "100000", "--no-fsync"},
                                 dir_ + "/server.log");
    ASSERT_TRUE(WaitHealthy(url_, 30s)) << server_->Output();
    admin_ = ReadToken(dir_ + "/server/admin.token");
    ASSERT_FALSE(admin_.empty());
  }

  // POST /v1/jobs/batch with `key` until acknowledged (the key makes a resend return
  // the first answer); the ids, or none after `patience`.
  std::vector<uint64_t> SubmitBatch(const json& jobs, const std::string& key,
                                    std::chrono::seconds patience) {
    const auto deadline = std::chrono::steady_clock::now() + patience;
    while (std::chrono::steady_clock::now() < deadline) {
      httplib::Headers h = {{"Idempotency-Key", key}};
      auto r = ApiClient(url_, admin_)
                   .Post("/v1/jobs/batch", h, json{{"jobs", jobs}}.dump(), "application/json");
      if (r && (r->status == 200 || r->status == 201)) {
        return json::parse(r->body)["ids"].get<std::vector<uint64_t>>();
      }
      if (r && r->status >= 400 && r->status < 500 && r->status != 429) {
        ADD_FAILURE() << "batch " << key << " refused (" << r->status << "): " << r->body;
        return {};
      }
      std::this_thread::sleep_for(100ms);
    }
    return {};
  }

  // Every job the controller lists, page by page.
  std::vector<json> AllJobs() {
    std::vector<json> out;
    std::string after = "0";
    for (int page = 0; page < 100; ++page) {
      json j = GetJson(url_, admin_, "/v1/jobs?limit=1000&after=" + after);
      for (const json& job : j.value("jobs", json::array())) {
        out.push_back(job);
      }
      if (!j.contains("next") || !j["next"].is_string()) {
        break;
      }
      after = j["next"].get<std::string>();
    }
    return out;
  }

  std::string dir_, queues_, url_, admin_;
  int port_ = 0, agent_port_ = 0;
  std::unique_ptr<Process> server_;
  std::unique_ptr<AgentFleet> fleet_;
};

TEST_F(FleetRestartTest, ControllerKilledWithThousandAgentsConnectedRunsEachJobOnce) {
  StartServer();
  FleetOptions o;
  o.server_url = url_;
  o.join_token = ReadToken(dir_ + "/server/join.token");
  o.agents = kAgents;
  auto made = AgentFleet::Create(o, GpuCatalog::Default());
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  fleet_ = std::move(made).value();
  const auto joined_from = std::chrono::steady_clock::now();
  fleet_->Start();
  ASSERT_TRUE(WaitFor([&] { return fleet_->Stats().streaming == kAgents; }, 60s))
      << fleet_->Stats().streaming << " of " << kAgents << " agents streaming";
  const double join_s = Since(joined_from);

  // Long jobs span the restart, middle ones end while the controller is down, short
  // ones (of 1 or 2 GPUs) come and go before it.
  std::mutex mu;
  std::vector<uint64_t> acked;
  auto add = [&](const std::vector<uint64_t>& ids) {
    std::lock_guard<std::mutex> lock(mu);
    acked.insert(acked.end(), ids.begin(), ids.end());
  };
  json long_jobs = json::array(), mid_jobs = json::array(), short_jobs = json::array();
  for (int i = 0; i < 400; ++i) {
    long_jobs.push_back(Spec("long-" + std::to_string(i), 1, 8000));
    mid_jobs.push_back(Spec("mid-" + std::to_string(i), 1, 1500));
  }
  for (int i = 0; i < 800; ++i) {
    short_jobs.push_back(Spec("short-" + std::to_string(i), 1 + i % 2, 0));
  }
  add(SubmitBatch(long_jobs, "long", 30s));
  add(SubmitBatch(mid_jobs, "mid", 30s));
  add(SubmitBatch(short_jobs, "short", 30s));
  ASSERT_EQ(acked.size(), 1600u);
  ASSERT_TRUE(WaitFor([&] { return fleet_->Stats().running >= 800; }, 30s))
      << "only " << fleet_->Stats().running << " tasks running";

  // Keyed batches through the kill and the restart.
  constexpr int kBatches = 20;
  std::atomic<int> batches_done{0};
  std::thread submitter([&] {
    for (int b = 0; b < kBatches; ++b) {
      json jobs = json::array();
      for (int i = 0; i < 25; ++i) {
        jobs.push_back(Spec("during-" + std::to_string(b) + "-" + std::to_string(i), 1, 200));
      }
      add(SubmitBatch(jobs, "during-" + std::to_string(b), 60s));
      ++batches_done;
      std::this_thread::sleep_for(150ms);
    }
  });
  std::this_thread::sleep_for(300ms);
  const FleetStats before = fleet_->Stats();
  const auto killed_at = std::chrono::steady_clock::now();
  server_->Signal(SIGKILL);
  ASSERT_TRUE(server_->Wait(10s).has_value());
  std::this_thread::sleep_for(1s);  // middle jobs end meanwhile
  const auto restarted_at = std::chrono::steady_clock::now();
  StartServer();
  const double healthy_s = Since(restarted_at);
  const bool back = WaitFor([&] { return fleet_->StreamingSince(killed_at) == kAgents; }, 45s);
  const double reregister_s = Since(restarted_at);
  submitter.join();

  std::vector<json> jobs;
  const bool all_done = WaitFor(
      [&] {
        jobs = AllJobs();
        if (jobs.size() < acked.size()) {
          return false;
        }
        for (const json& j : jobs) {
          const std::string st = j.value("state", "");
          if (st != "succeeded" && st != "failed" && st != "cancelled") {
            return false;
          }
        }
        return true;
      },
      60s);

  // What the controller has against what was acknowledged.
  std::vector<std::string> problems;
  std::map<uint64_t, int> listed;
  int succeeded = 0;
  for (const json& j : jobs) {
    const uint64_t id = j.value("id", uint64_t{0});
    ++listed[id];
    succeeded += j.value("state", "") == "succeeded";
    if (j.value("state", "") != "succeeded" || j.value("attempts", -1) != 1) {
      problems.push_back("job " + std::to_string(id) + " (" + j.value("name", "") + "): state " +
                         j.value("state", "") + ", attempts " +
                         std::to_string(j.value("attempts", -1)));
    }
  }
  const std::set<uint64_t> acked_set(acked.begin(), acked.end());
  if (acked_set.size() != acked.size()) {
    problems.push_back(std::to_string(acked.size() - acked_set.size()) +
                       " job id(s) acknowledged twice");
  }
  for (uint64_t id : acked_set) {
    if (listed[id] != 1) {
      problems.push_back("acknowledged job " + std::to_string(id) + " listed " +
                         std::to_string(listed[id]) + " time(s)");
    }
  }
  for (const auto& [id, n] : listed) {
    if (acked_set.count(id) == 0) {
      problems.push_back("job " + std::to_string(id) + " was never acknowledged");
    }
  }
  // What the agents ran.
  std::map<uint64_t, int> started_by_job;
  int reruns = 0;
  for (const fleet::TaskCount& c : fleet_->TaskCounts()) {
    started_by_job[c.key.job] += c.started;
    if (c.started > 1 || c.key.attempt != 1) {
      ++reruns;
      problems.push_back(ToString(c.key) + " started " + std::to_string(c.started) +
                         " time(s) (last on " + c.node + ")");
    }
  }
  for (uint64_t id : acked_set) {
    if (started_by_job[id] == 0) {
      problems.push_back("job " + std::to_string(id) + " was never started by an agent");
    }
  }
  const FleetStats after = fleet_->Stats();
  for (const std::string& c : fleet_->Clashes()) {
    problems.push_back("double booking: " + c);
  }
  std::cout << "[faults] controller kill -9 with " << kAgents << " agents: joined in " << join_s
            << " s; " << before.running << " tasks running at the kill; healthy " << healthy_s
            << " s after the restart, all agents back in " << reregister_s << " s; acknowledged "
            << acked.size() << " jobs (" << batches_done.load() << " of " << kBatches
            << " keyed batches), listed " << jobs.size() << ", succeeded " << succeeded
            << ", re-runs " << reruns << ", double bookings " << after.double_bookings
            << ", fenced " << after.fenced << ", registrations " << after.registrations
            << ", problems " << problems.size() << "\n";
  EXPECT_TRUE(back) << fleet_->StreamingSince(killed_at) << " of " << kAgents
                    << " agents registered again within 45 s";
  EXPECT_LT(reregister_s, 30.0) << "re-registration took " << reregister_s << " s";
  EXPECT_TRUE(all_done) << "not every job ended within 60 s";
  EXPECT_EQ(batches_done.load(), kBatches);
  EXPECT_EQ(after.double_bookings, 0u);
  EXPECT_EQ(after.fenced, 0u);
  std::string shown;
  for (size_t i = 0; i < problems.size() && i < 25; ++i) {
    shown += "\n  " + problems[i];
  }
  EXPECT_TRUE(problems.empty()) << problems.size() << " problem(s):" << shown
                                << (problems.size() > 25 ? "\n  ..." : "");
  if (HasFailure()) {
    for (const std::string& e : after.errors) {
      std::cerr << "fleet: " << e << "\n";
    }
  }
}

}  // namespace
}  // namespace tessera::e2e
