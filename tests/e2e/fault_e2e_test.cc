// The fault suite (ctest label `faults`): real `tessera server` and `tessera agent`
// processes on loopback, broken on purpose, and what the tasks themselves saw.
//
// Every task runs the script of task_records.h, whose records in the test directory
// tell what it did: when it started and ended, its workers, and any live process of
// another task found on its GPUs.
//
// The cases (issue 11, "What it must show", item 1):
//   1. 5 kill -9s of the controller during 300 submissions (half with an idempotency
//      key, through `tessera submit --idempotency-key`, retried while it is down), 2
//      agents: every acknowledged job exists once and ran exactly once;
//   2. a job whose task exits while the controller is down runs once;
//   3. kill -9 of an agent whose task forked workers, then a restart: no process of the
//      killed attempt outlives it into a new attempt, or the attempt is adopted;
//   4. a graceful agent restart keeps a running task running; it finishes once.
// Every wait is bounded; every process is stopped by the test.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "e2e/cluster_fixture.h"
#include "e2e/process.h"
#include "e2e/task_records.h"

namespace tessera::e2e {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTestDir("faults");
    ASSERT_FALSE(dir_.empty());
    tasks_.emplace(dir_);
    ASSERT_TRUE(tasks_->ok()) << "cannot make the records and locks directories in " << dir_;
    std::filesystem::create_directory(dir_ + "/cli");
    port_ = FreePort();
    url_ = "http://127.0.0.1:" + std::to_string(port_);
    // For `tessera submit`: set once, before any thread starts.
    ::setenv("TESSERA_SERVER", url_.c_str(), 1);
    ::setenv("TESSERA_TOKEN_FILE", (dir_ + "/server/admin.token").c_str(), 1);
  }

  void TearDown() override {
    // Cancel what still runs, so that agents that keep tasks across a stop leave none.
    if (server_ && server_->running()) {
      json jobs = Get("/v1/jobs?limit=100000");
      for (const json& j : jobs.value("jobs", json::array())) {
        const std::string st = j.value("state", "");
        if (st == "pending" || st == "running") {
          Client().Post(("/v1/jobs/" + std::to_string(j.value("id", 0)) + "/cancel").c_str());
        }
      }
    }
    StopAgentsThenServer(agents_, server_);
    // Whatever a killed agent or a kept task left behind ends here.
    if (tasks_) {
      tasks_->KillLeftovers();
    }
    ::unsetenv("TESSERA_SERVER");
    ::unsetenv("TESSERA_TOKEN_FILE");
    RemoveTestDir(dir_, HasFailure());
  }

  void StartServer(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> flags = {"--rate", "100000", "--no-fsync"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    server_ = StartServerProcess(dir_ + "/server", port_, flags, dir_ + "/server.log");
    ASSERT_TRUE(WaitHealthy(url_, 20s)) << server_->Output();
    admin_ = ReadToken(dir_ + "/server/admin.token");
    ASSERT_FALSE(admin_.empty());
  }

  void KillServer() {
    server_->Signal(SIGKILL);
    ASSERT_TRUE(server_->Wait(10s).has_value());
  }

  // `wait_up`: until the node is up. A restarted agent's node may still show up from
  // before, so a restart waits for the agent's own start line instead.
  void StartAgent(const std::string& name, bool wait_up = true) {
    const std::string log = dir_ + "/agent-" + name + ".log";
    const size_t before = Process::ReadFile(log).size();
    agents_[name] = StartAgentProcess(url_, dir_ + "/server", name, dir_ + "/agent-" + name,
                                      "8xH100-80GB", {}, log);
    ASSERT_TRUE(WaitFor(
        [&] {
          if (!wait_up) {
            return Process::ReadFile(log).find("tessera agent: node", before) != std::string::npos;
          }
          return NodeUp(url_, admin_, name);
        },
        20s))
        << agents_[name]->Output();
  }

  httplib::Client Client() { return ApiClient(url_, admin_); }

  json Get(const std::string& path) { return GetJson(url_, admin_, path); }

  json Job(uint64_t id) { return Get("/v1/jobs/" + std::to_string(id)); }

  // POST /v1/jobs until acknowledged. Without a key, only a request that never reached
  // the controller (connection refused) is retried: another retry could make a second
  // job, which is the client's doing. 0: not acknowledged.
  uint64_t Submit(const json& spec, const std::string& key, std::chrono::seconds patience) {
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
      if (r && r->status >= 400 && r->status < 500 && r->status != 429) {
        ADD_FAILURE() << "refused (" << r->status << "): " << r->body;
        return 0;
      }
      if (!r && r.error() != httplib::Error::Connection && key.empty()) {
        return 0;  // it may have been made; the run-once checks cover it anyway
      }
      std::this_thread::sleep_for(100ms);
    }
    return 0;
  }

  // `tessera submit --idempotency-key KEY`, retried until it exits 0; its job id or 0.
  uint64_t SubmitWithCli(const std::string& key, const std::string& queue, int gpus,
                         const std::map<std::string, std::string>& env,
                         std::chrono::seconds patience) {
    std::vector<std::string> argv = {
        TESSERA_BINARY, "submit", "--idempotency-key",  key,     "--name", key,        "--queue",
        queue,          "--gpus", std::to_string(gpus), "--cpu", "0.1",    "--memory", "64MiB"};
    for (const auto& [k, v] : env) {
      argv.insert(argv.end(), {"--env", k + "=" + v});
    }
    argv.insert(argv.end(), {"--", "/bin/sh", "-c", TaskRecords::kScript});
    const auto deadline = std::chrono::steady_clock::now() + patience;
    while (std::chrono::steady_clock::now() < deadline) {
      const std::string log = dir_ + "/cli/" + key + "." + std::to_string(++cli_runs_) + ".log";
      Process cli(argv, log);
      std::optional<int> rc = cli.Wait(30s);
      if (rc == 0) {
        std::istringstream out(cli.Output());
        for (std::string line; std::getline(out, line);) {
          if (!line.empty() && line.find_first_not_of("0123456789") == std::string::npos) {
            return std::stoull(line);
          }
        }
        ADD_FAILURE() << "tessera submit printed no job id: " << cli.Output();
        return 0;
      }
      if (rc == 2) {
        ADD_FAILURE() << "tessera submit refused " << key << ": " << cli.Output();
        return 0;
      }
      std::this_thread::sleep_for(100ms);
    }
    return 0;
  }

  // The tasks' clashes and malformed records, and any double booking an agent logged.
  int ExpectNoClash() {
    const int clashes = tasks_->ExpectNoClash();
    for (auto& [name, agent] : agents_) {
      EXPECT_EQ(agent->Output().find("double-booked"), std::string::npos)
          << "agent " << name << ":\n"
          << agent->Output();
    }
    return clashes;
  }

  bool WaitTerminal(uint64_t id, std::chrono::seconds timeout) {
    return WaitFor(
        [&] {
          const std::string st = Job(id).value("state", "");
          return st == "succeeded" || st == "failed" || st == "cancelled";
        },
        timeout);
  }

  std::string dir_;
  std::optional<TaskRecords> tasks_;
  int port_ = 0;
  std::string url_;
  std::string admin_;
  std::atomic<int> cli_runs_{0};
  std::unique_ptr<Process> server_;
  std::map<std::string, std::unique_ptr<Process>> agents_;
};

TEST_F(FaultTest, ControllerKilledFiveTimesDuring300SubmissionsRunsEachJobOnce) {
  const std::vector<std::string> flags = {"--node-timeout", "10s"};
  StartServer(flags);
  StartAgent("a");
  StartAgent("b");
  constexpr int kJobs = 300;
  constexpr int kThreads = 4;
  constexpr int kKills = 5;
  std::mutex mu;
  std::map<std::string, uint64_t> acked;  // name -> id
  std::set<std::string> keyed;
  std::atomic<int> done{0};
  // Job i: even ones through the CLI with a key. Work long enough that the kills find
  // tasks running, and tasks ending while the controller is down.
  auto queue_of = [](int i) { return i % 3 == 0 ? "team-b" : "team-a"; };
  auto gpus_of = [](int i) { return 1 + i % 2; };
  auto env_of = [&](int i) { return tasks_->Env(i % 5 == 0 ? "1" : "0.3"); };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < kJobs; i += kThreads) {
        const std::string name = "job-" + std::to_string(i);
        uint64_t id = 0;
        if (i % 2 == 0) {
          id = SubmitWithCli(name, queue_of(i), gpus_of(i), env_of(i), 120s);
        } else {
          id = Submit(TaskRecords::Spec(name, queue_of(i), gpus_of(i), env_of(i)), "", 120s);
        }
        {
          std::lock_guard<std::mutex> lock(mu);
          if (id != 0) {
            acked[name] = id;
          }
          if (i % 2 == 0) {
            keyed.insert(name);
          }
        }
        ++done;
        std::this_thread::sleep_for(10ms);
      }
    });
  }
  int kills = 0;
  for (int k = 1; k <= kKills; ++k) {
    if (!WaitFor([&] { return done.load() >= k * kJobs / (kKills + 1); }, 120s)) {
      break;
    }
    KillServer();
    ++kills;
    std::this_thread::sleep_for(std::chrono::milliseconds(150 * k));  // down a while
    StartServer(flags);
  }
  for (std::thread& th : threads) {
    th.join();
  }
  EXPECT_EQ(kills, kKills) << "submissions stalled: " << done.load() << " of " << kJobs;
  for (const std::string& k : keyed) {
    EXPECT_TRUE(acked.count(k)) << k << " (idempotency key) was never acknowledged";
  }

  // Every job the controller has, acknowledged or not, must end and have run once.
  json jobs;
  const bool all_done = WaitFor(
      [&] {
        jobs = Get("/v1/jobs?limit=100000");
        if (!jobs.contains("jobs") || jobs["jobs"].size() < acked.size()) {
          return false;
        }
        for (const json& j : jobs["jobs"]) {
          const std::string st = j.value("state", "");
          if (st != "succeeded" && st != "failed" && st != "cancelled") {
            return false;
          }
        }
        return true;
      },
      180s);
  std::map<std::string, std::vector<uint64_t>> ids_by_name;
  for (const json& j : jobs.value("jobs", json::array())) {
    ids_by_name[j.value("name", "")].push_back(j.value("id", uint64_t{0}));
  }
  std::map<uint64_t, Runs> runs = tasks_->RunsByJob();
  std::vector<std::string> problems;
  int succeeded = 0, reruns = 0, never_started = 0;
  for (const json& j : jobs.value("jobs", json::array())) {
    const uint64_t id = j.value("id", uint64_t{0});
    const Runs& r = runs[id];
    const std::string state = j.value("state", "");
    const int attempts = j.value("attempts", -1);
    succeeded += state == "succeeded";
    reruns += r.starts.size() > 1 ? static_cast<int>(r.starts.size()) - 1 : 0;
    never_started += r.starts.empty();
    if (state != "succeeded" || attempts != 1 || r.starts.size() != 1 || r.ends.size() != 1) {
      problems.push_back("job " + std::to_string(id) + " (" + j.value("name", "") + "): state " +
                         state + ", attempts " + std::to_string(attempts) + ", " + Show(r));
    }
  }
  for (const auto& [name, id] : acked) {
    const std::vector<uint64_t>& ids = ids_by_name[name];
    if (ids.size() != 1 || ids[0] != id) {
      std::string list;
      for (uint64_t x : ids) {
        list += " " + std::to_string(x);
      }
      problems.push_back(name + (keyed.count(name) ? " (keyed)" : "") + ": acknowledged as job " +
                         std::to_string(id) + " but the controller has " +
                         std::to_string(ids.size()) + " job(s) of that name:" + list);
    }
  }
  // A key keeps naming its job after all the restarts (the same request, resent).
  for (int i = 0; i < kJobs; i += 10) {
    const std::string name = "job-" + std::to_string(i);
    if (acked.count(name)) {
      const uint64_t again = SubmitWithCli(name, queue_of(i), gpus_of(i), env_of(i), 10s);
      if (again != acked[name]) {
        problems.push_back(name + ": resubmitted with its idempotency key, got job " +
                           std::to_string(again) + " instead of " + std::to_string(acked[name]));
      }
    }
  }
  const int clashes = ExpectNoClash();
  std::cout << "[faults] controller kill -9 x" << kills << " during " << kJobs
            << " submissions: acknowledged " << acked.size() << " (" << keyed.size()
            << " with a key), jobs " << jobs.value("jobs", json::array()).size() << ", succeeded "
            << succeeded << ", re-runs " << reruns << ", never started " << never_started
            << ", clashes " << clashes << ", problems " << problems.size() << "\n";
  EXPECT_TRUE(all_done) << "not every job ended within 180 s";
  std::string shown;
  for (size_t i = 0; i < problems.size() && i < 25; ++i) {
    shown += "\n  " + problems[i];
  }
  EXPECT_TRUE(problems.empty()) << problems.size() << " job(s) did not run exactly once:" << shown
                                << (problems.size() > 25 ? "\n  ..." : "");
}

TEST_F(FaultTest, TaskThatExitsWhileTheControllerIsDownRunsOnce) {
  const std::vector<std::string> flags = {"--node-timeout", "10s"};
  StartServer(flags);
  StartAgent("a");
  const uint64_t id =
      Submit(TaskRecords::Spec("exits-while-down", "team-a", 1, tasks_->Env("2")), "", 20s);
  ASSERT_NE(id, 0u);
  ASSERT_TRUE(tasks_->WaitRecord(id, 1, "start", 20s)) << "job " << id << " never started";
  KillServer();
  const bool ended = tasks_->WaitRecord(id, 1, "end", 15s).has_value();
  std::this_thread::sleep_for(300ms);  // the agent sees the exit, and cannot report it
  StartServer(flags);
  const bool terminal = WaitTerminal(id, 30s);
  const json job = Job(id);
  const Runs runs = tasks_->RunsByJob()[id];
  const int clashes = ExpectNoClash();
  std::cout << "[faults] task exited while the controller was down: job " << id << " "
            << job.value("state", "?") << ", attempts " << job.value("attempts", -1) << ", "
            << Show(runs) << ", clashes " << clashes << "\n";
  EXPECT_TRUE(ended) << "job " << id << ": its task did not end while the controller was down";
  EXPECT_TRUE(terminal) << "job " << id << " did not end after the restart: " << job.dump();
  EXPECT_EQ(job.value("state", ""), "succeeded") << "job " << id << ": " << job.dump();
  EXPECT_EQ(job.value("attempts", -1), 1) << "job " << id << " ran again: " << Show(runs);
  EXPECT_EQ(runs.starts.size(), 1u) << "job " << id << ": " << Show(runs);
}

TEST_F(FaultTest, KilledAgentLeavesNoWorkerOfItsAttemptBehind) {
  StartServer({"--node-timeout", "3s"});
  StartAgent("a");
  // Attempt 1 works 8 s in two forked workers; a re-run works briefly.
  const uint64_t id =
      Submit(TaskRecords::Spec("forks-workers", "team-a", 1,
                               tasks_->Env("8", {{"FORK", "1"}, {"WORK_RETRY", "0.2"}})),
             "", 20s);
  ASSERT_NE(id, 0u);
  ASSERT_TRUE(tasks_->WaitRecord(id, 1, "workers", 20s))
      << "job " << id << " never forked its workers";
  const std::vector<Pid> first =
      tasks_->RecordedPids([&](const Record& r) { return r.job == id && r.attempt == 1; });
  ASSERT_EQ(first.size(), 4u) << "job " << id << ": expected the task and 3 workers";

  agents_["a"]->Signal(SIGKILL);
  ASSERT_TRUE(agents_["a"]->Wait(10s).has_value());
  std::vector<Pid> survivors;
  for (const Pid& p : first) {
    if (p.Alive()) {
      survivors.push_back(p);
    }
  }
  std::this_thread::sleep_for(300ms);
  StartAgent("a", /*wait_up=*/false);

  // Whether a second attempt ever starts while the first one's processes still live.
  std::optional<std::vector<Pid>> alive_at_rerun;
  const bool terminal = WaitFor(
      [&] {
        if (!alive_at_rerun) {
          for (const Record& r : tasks_->Read()) {
            if (r.job == id && r.kind == "start" && r.attempt > 1) {
              alive_at_rerun.emplace();
              for (const Pid& p : first) {
                if (p.Alive()) {
                  alive_at_rerun->push_back(p);
                }
              }
            }
          }
        }
        const std::string st = Job(id).value("state", "");
        return st == "succeeded" || st == "failed" || st == "cancelled";
      },
      40s);
  const json job = Job(id);
  const Runs runs = tasks_->RunsByJob()[id];
  std::vector<Pid> alive_now;
  for (const Pid& p : first) {
    if (p.Alive()) {
      alive_now.push_back(p);
    }
  }
  const int clashes = ExpectNoClash();
  const bool adopted = runs.starts.size() == 1;
  std::cout << "[faults] agent kill -9 with forked workers: job " << id << " "
            << job.value("state", "?") << ", attempts " << job.value("attempts", -1) << ", "
            << Show(runs) << ", " << survivors.size() << " of " << first.size()
            << " processes outlived the agent, "
            << (alive_at_rerun ? std::to_string(alive_at_rerun->size()) : std::string("-"))
            << " alive when attempt 2 started, " << alive_now.size() << " alive at the end, "
            << (adopted ? "adopted" : "re-run") << ", clashes " << clashes << "\n";
  EXPECT_TRUE(terminal) << "job " << id
                        << " did not end within 40 s of the agent's restart: " << job.dump();
  if (adopted) {
    EXPECT_EQ(job.value("attempts", -1), 1) << "job " << id << ": " << Show(runs);
    EXPECT_EQ(runs.ends.size(), 1u) << "job " << id << " adopted but " << Show(runs);
  } else {
    ASSERT_EQ(runs.starts.size(), 2u) << "job " << id << ": " << Show(runs);
    EXPECT_EQ(runs.starts[1], 2) << "job " << id << ": " << Show(runs);
    EXPECT_EQ(job.value("attempts", -1), 2) << "job " << id << ": " << Show(runs);
    ASSERT_TRUE(alive_at_rerun.has_value());
    EXPECT_TRUE(alive_at_rerun->empty())
        << "job " << id << ": attempt 2 started while " << alive_at_rerun->size()
        << " process(es) of attempt 1 were alive (pids " << Describe(*alive_at_rerun) << ")";
    EXPECT_TRUE(alive_now.empty()) << "job " << id << ": " << alive_now.size()
                                   << " process(es) of the killed attempt 1 are still alive (pids "
                                   << Describe(alive_now) << ")";
  }
  EXPECT_EQ(job.value("state", ""), "succeeded") << "job " << id << ": " << job.dump();
}

TEST_F(FaultTest, GracefulAgentRestartKeepsTheTaskRunning) {
  StartServer({"--node-timeout", "10s"});
  StartAgent("a");
  const uint64_t id =
      Submit(TaskRecords::Spec("survives-restart", "team-a", 1, tasks_->Env("4")), "", 20s);
  ASSERT_NE(id, 0u);
  ASSERT_TRUE(tasks_->WaitRecord(id, 1, "start", 20s)) << "job " << id << " never started";
  const std::vector<Pid> task =
      tasks_->RecordedPids([&](const Record& r) { return r.job == id && r.attempt == 1; });
  ASSERT_EQ(task.size(), 1u);

  agents_["a"]->Signal(SIGTERM);
  const std::optional<int> rc = agents_["a"]->Wait(15s);
  const bool alive_while_stopped = task[0].Alive();
  const bool ended_early = tasks_->WaitRecord(id, 1, "end", 0s).has_value();
  StartAgent("a", /*wait_up=*/false);
  const bool alive_after_restart =
      task[0].Alive() || tasks_->WaitRecord(id, 1, "end", 0s).has_value();
  const bool terminal = WaitTerminal(id, 30s);
  const json job = Job(id);
  const Runs runs = tasks_->RunsByJob()[id];
  const int clashes = ExpectNoClash();
  std::cout << "[faults] graceful agent restart: job " << id << " " << job.value("state", "?")
            << ", attempts " << job.value("attempts", -1) << ", " << Show(runs)
            << ", task alive while the agent was stopped: " << (alive_while_stopped ? "yes" : "no")
            << ", after the restart: " << (alive_after_restart ? "yes" : "no") << ", clashes "
            << clashes << "\n";
  EXPECT_EQ(rc, std::optional<int>(0)) << agents_["a"]->Output();
  EXPECT_TRUE(alive_while_stopped || ended_early)
      << "job " << id << ": task pid " << task[0].pid << " died when its agent stopped on SIGTERM";
  EXPECT_TRUE(alive_after_restart)
      << "job " << id << ": task pid " << task[0].pid << " did not survive the agent's restart";
  EXPECT_TRUE(terminal) << "job " << id << " did not end: " << job.dump();
  EXPECT_EQ(job.value("state", ""), "succeeded") << "job " << id << ": " << job.dump();
  EXPECT_EQ(job.value("attempts", -1), 1) << "job " << id << ": " << Show(runs);
  EXPECT_EQ(runs.starts.size(), 1u) << "job " << id << ": " << Show(runs);
  EXPECT_EQ(runs.ends.size(), 1u) << "job " << id << ": " << Show(runs);
}

}  // namespace
}  // namespace tessera::e2e
