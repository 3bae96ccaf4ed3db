// The agent's side of exactly-once execution and isolation, against a loopback
// stand-in for the controller: exit reports are kept until a controller has taken
// them (also across "register again"), a restarted agent re-attaches the tasks an
// earlier one left, a stopping agent's tasks are reported lost, and tasks run as the
// uid they were given, with their own HOME and only their own GPU device nodes.
// Real processes; every wait is bounded.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/agent.h"
#include "agent/launch/task_state_file.h"
#include "agent/testing/fake_controller.h"
#include "base/file_util.h"

namespace tessera {
namespace {

using Json = nlohmann::json;
constexpr int64_t kTaskUid = 200'777;

class AgentRecoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(controller_.ok());
    char dir[] = "/tmp/tessera_agent_recovery_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    ::chmod(dir_.c_str(), 0711);  // tasks run as another uid and must reach the agent's data
  }
  void TearDown() override {
    agent_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  void StartAgent(bool keep_tasks_on_stop, const std::string& device_dir = "/dev") {
    AgentOptions o;
    o.server_url = controller_.url();
    o.token = "join-token";
    o.node_name = "n1";
    o.data_dir = dir_ + "/agent";
    o.fake_gpus = "2xH100-80GB";
    o.use_cgroups = false;
    o.telemetry_interval = 0;
    o.keep_tasks_on_stop = keep_tasks_on_stop;
    o.device_dir = device_dir;
    auto agent = Agent::Create(o, GpuCatalog::Default());
    ASSERT_TRUE(agent.ok()) << agent.status().ToString();
    agent_ = std::move(agent).value();
    Status registered = agent_->RunOnce();
    ASSERT_TRUE(registered.ok()) << registered.ToString();
  }

  TaskLaunch Launch(uint64_t job, std::vector<std::string> command, int gpu = 0) const {
    TaskLaunch l;
    l.key = TaskKey{job, 0, 1};
    l.job_name = "j" + std::to_string(job);
    l.command = std::move(command);
    l.gpus = {gpu};
    l.gpu_milli = 1000;
    l.uid = kTaskUid;
    l.gid = kTaskUid;
    l.checkpoint_dir = dir_ + "/ckpt/" + std::to_string(job);
    l.checkpoint_managed = true;
    return l;
  }

  void Send(TaskLaunch launch) {
    controller_.AnswerWithLaunch(std::move(launch));
    Status s = agent_->RunOnce();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  std::string TaskRecord(uint64_t job) const {
    return dir_ + "/agent/tasks/" + std::to_string(job) + ".0.1.task";
  }
  std::string Log(uint64_t job) const {
    return ReadTextFile(dir_ + "/agent/logs/" + std::to_string(job) + ".0.1.log").value_or("");
  }

  // The report of `job`'s task in a register or heartbeat request; null when absent.
  static Json ReportOf(const Json& request, uint64_t job) {
    for (const Json& t : request.value("tasks", Json::array())) {
      if (t["key"]["job"] == job) {
        return t;
      }
    }
    return Json();
  }

  // Heartbeats until one reports `job` in `state`; that report (null after 10 s).
  Json BeatUntil(uint64_t job, const std::string& state) {
    for (int i = 0; i < 200; ++i) {
      (void)agent_->RunOnce();
      Json r = ReportOf(controller_.last(), job);
      if (!r.is_null() && r["state"] == state) {
        return r;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return Json();
  }

  static bool WaitForFile(const std::string& path) {
    for (int i = 0; i < 200; ++i) {
      if (std::filesystem::exists(path)) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // Polls until the task's state file says how it ended.
  static bool WaitForEnd(const std::string& record) {
    for (int i = 0; i < 200; ++i) {
      if (!ReadTaskState(record).end.empty()) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // Waits until the task's supervisor (the first number of its record's "shim" line) has
  // ended: it writes the end just before it does, and the agent reports an end only then.
  static bool WaitForShimEnd(const std::string& record) {
    const std::string text = ReadTaskState(record).shim;
    const pid_t pid = static_cast<pid_t>(std::atoll(text.c_str()));
    for (int i = 0; i < 200 && pid > 0; ++i) {
      if (!Alive(pid)) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  static bool Alive(pid_t pid) {
    if (::kill(pid, 0) != 0) {
      return false;
    }
    std::string stat = ReadTextFile("/proc/" + std::to_string(pid) + "/stat").value_or("");
    const size_t close = stat.rfind(')');
    return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
  }

  FakeController controller_;
  std::string dir_;
  std::unique_ptr<Agent> agent_;
};

// The controller restarted while the task ended: its first answer is "register
// again". The exit must travel with the registration, not be forgotten.
TEST_F(AgentRecoveryTest, AnExitIsKeptWhenTheControllerAsksToRegisterAgain) {
  StartAgent(false);
  Send(Launch(1, {"sh", "-c", "exit 3"}));
  ASSERT_TRUE(WaitForEnd(TaskRecord(1))) << "the task did not end";
  ASSERT_TRUE(WaitForShimEnd(TaskRecord(1))) << "the task's supervisor did not end";
  HeartbeatResponse again;
  again.reregister = true;
  controller_.Answer(again);
  ASSERT_TRUE(agent_->RunOnce().ok());
  ASSERT_FALSE(controller_.registrations().empty());
  Json r = ReportOf(controller_.registrations().back(), 1);
  ASSERT_FALSE(r.is_null()) << "the registration did not carry the exit: "
                            << controller_.registrations().back().dump();
  EXPECT_EQ(r["state"], "exited");
  EXPECT_EQ(r["exit_code"], 3);
  EXPECT_FALSE(std::filesystem::exists(TaskRecord(1))) << "the record outlived its acknowledgment";
}

// An agent restart (an upgrade) keeps the task running; the new agent re-attaches it
// and reports how it ended.
TEST_F(AgentRecoveryTest, ARestartedAgentReattachesARunningTask) {
  StartAgent(true);
  Send(Launch(2, {"sh", "-c", "sleep 1; exit 4"}));
  agent_->Stop();
  agent_.reset();
  ASSERT_NE(ReadTaskState(TaskRecord(2)).shim, "") << "no record of the task's shim";
  EXPECT_EQ(ReadTaskState(TaskRecord(2)).end, "") << "the task ended with its agent";
  StartAgent(true);
  Json r = ReportOf(controller_.registrations().back(), 2);
  ASSERT_FALSE(r.is_null()) << "the new agent did not report the task";
  EXPECT_EQ(r["state"], "running");
  Json end = BeatUntil(2, "exited");
  ASSERT_FALSE(end.is_null()) << "the re-attached task's end was never reported";
  EXPECT_EQ(end["exit_code"], 4);
}

// An agent that stops its tasks (tessera up shutting down) kills all their processes
// and reports them as lost, so that the controller runs them again instead of
// counting a failure.
TEST_F(AgentRecoveryTest, AStoppingAgentKillsItsTasksAndTheyAreReportedLost) {
  StartAgent(false);
  const std::string pidfile = dir_ + "/worker.pid";
  ::chmod(dir_.c_str(), 0777);
  Send(Launch(3, {"sh", "-c", "sleep 100 & echo $! > " + pidfile + "; wait"}));
  ASSERT_TRUE(WaitForFile(pidfile));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const pid_t worker = std::stoi(ReadTextFile(pidfile).value_or("0"));
  ASSERT_GT(worker, 0);
  ASSERT_TRUE(Alive(worker));
  agent_->Stop();
  agent_.reset();
  EXPECT_FALSE(Alive(worker)) << "worker " << worker << " survived its agent";
  StartAgent(false);
  Json r = ReportOf(controller_.registrations().back(), 3);
  ASSERT_FALSE(r.is_null());
  EXPECT_EQ(r["state"], "lost");
}

TEST_F(AgentRecoveryTest, TasksRunAsTheirUidWithTheirOwnHomeAndTmp) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root (uid switching)";
  }
  StartAgent(false);
  Send(Launch(4, {"sh", "-c", "id -u; id -g; echo $HOME; echo $TMPDIR; pwd; touch $HOME/x"}));
  Json end = BeatUntil(4, "exited");
  ASSERT_FALSE(end.is_null());
  EXPECT_EQ(end["exit_code"], 0) << Log(4);
  const std::string job_dir = dir_ + "/agent/jobs/4";
  EXPECT_EQ(Log(4), std::to_string(kTaskUid) + "\n" + std::to_string(kTaskUid) + "\n" + job_dir +
                        "/home\n" + job_dir + "/tmp\n" + job_dir + "\n");
}

TEST_F(AgentRecoveryTest, ARootAgentRefusesToRunATaskAsRoot) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root (the refusal is a root agent's)";
  }
  StartAgent(false);
  TaskLaunch l = Launch(5, {"true"});
  l.uid = -1;
  l.gid = -1;
  Send(l);
  Json r = BeatUntil(5, "failed_to_start");
  ASSERT_FALSE(r.is_null());
  EXPECT_NE(r["message"].get<std::string>().find("does not run tenant tasks as root"),
            std::string::npos)
      << r["message"];
}

TEST_F(AgentRecoveryTest, ATaskCannotOpenAnotherGpusDeviceNode) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root (mknod, mount namespaces)";
  }
  const std::string dev = dir_ + "/dev";
  ASSERT_TRUE(std::filesystem::create_directories(dev));
  ::chmod(dir_.c_str(), 0755);
  for (int g = 0; g < 2; ++g) {
    const std::string node = dev + "/nvidia" + std::to_string(g);
    ASSERT_EQ(::mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0) << node;  // like /dev/null
  }
  StartAgent(false, dev);
  Send(Launch(6, {"sh", "-c",
                  "cat " + dev + "/nvidia0 && echo ok0; cat " + dev + "/nvidia1 || echo denied1"}));
  Json end = BeatUntil(6, "exited");
  ASSERT_FALSE(end.is_null());
  const std::string log = Log(6);
  EXPECT_NE(log.find("ok0"), std::string::npos) << log;
  EXPECT_NE(log.find("denied1"), std::string::npos) << log;
  struct stat st {};
  ASSERT_EQ(::stat((dev + "/nvidia1").c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "the agent's own view of the device changed";
}

// The lease file carries the time of the last answered request: tasks fence
// themselves when it grows older than the controller's node timeout allows.
TEST_F(AgentRecoveryTest, AnsweredRequestsRenewTheLease) {
  RegisterResponse answer;
  answer.node = "n1";
  answer.heartbeat_interval_ms = 1000;
  answer.node_timeout_ms = 10'000;
  controller_.AnswerRegistrations(answer);
  const auto before = std::chrono::system_clock::now();
  StartAgent(false);
  struct stat st {};
  ASSERT_EQ(::stat((dir_ + "/agent/lease").c_str(), &st), 0);
  const auto mtime = std::chrono::system_clock::from_time_t(st.st_mtim.tv_sec) +
                     std::chrono::nanoseconds(st.st_mtim.tv_nsec);
  EXPECT_GE(mtime, before - std::chrono::seconds(1));
  EXPECT_LE(mtime, std::chrono::system_clock::now() + std::chrono::seconds(1));
}

// A partitioned node: nobody answers the agent for longer than the lease. The task's
// supervisor kills it on its own (the controller requeues the job once it declares the
// node lost, so the old attempt must be gone by then), and it is reported lost.
TEST_F(AgentRecoveryTest, ATaskFencesItselfWhenTheLeaseExpires) {
  RegisterResponse answer;
  answer.node = "n1";
  answer.heartbeat_interval_ms = 100;
  answer.node_timeout_ms = 2'000;  // lease: 1 s
  controller_.AnswerRegistrations(answer);
  StartAgent(false);
  Send(Launch(8, {"sleep", "30"}));
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitForEnd(TaskRecord(8))) << "the task outlived its lease";
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(waited, 5.0);
  EXPECT_EQ(ReadTaskState(TaskRecord(8)).end, "fenced");
  Json r = BeatUntil(8, "lost");
  ASSERT_FALSE(r.is_null());
  EXPECT_NE(r["message"].get<std::string>().find("lease"), std::string::npos) << r["message"];
}

// A checkpoint directory the job's spec names is made with the task's own identity: a
// tenant cannot have the root agent create (and hand it) a directory where it could
// not create one itself.
TEST_F(AgentRecoveryTest, ASpecNamedCheckpointDirIsMadeOnlyAsTheTask) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root (the agent acts for another uid)";
  }
  const std::string root_only = dir_ + "/root-only";
  ASSERT_TRUE(std::filesystem::create_directories(root_only));
  ::chmod(root_only.c_str(), 0755);
  StartAgent(false);
  TaskLaunch l = Launch(9, {"true"});
  l.checkpoint_managed = false;
  l.checkpoint_dir = root_only + "/ckpt";
  Send(l);
  Json r = BeatUntil(9, "failed_to_start");
  ASSERT_FALSE(r.is_null()) << "the task started";
  EXPECT_NE(r["message"].get<std::string>().find("as uid 200777"), std::string::npos)
      << r["message"];
  EXPECT_FALSE(std::filesystem::exists(root_only + "/ckpt"));

  // Where the tenant may write, it works, and what is made is the tenant's.
  const std::string open_dir = dir_ + "/open";
  ASSERT_TRUE(std::filesystem::create_directories(open_dir));
  ::chmod(open_dir.c_str(), 0777);
  TaskLaunch ok = Launch(10, {"true"});
  ok.checkpoint_managed = false;
  ok.checkpoint_dir = open_dir + "/a/b";
  Send(ok);
  Json end = BeatUntil(10, "exited");
  ASSERT_FALSE(end.is_null());
  struct stat st {};
  ASSERT_EQ(::stat((open_dir + "/a/b").c_str(), &st), 0);
  EXPECT_EQ(static_cast<int64_t>(st.st_uid), kTaskUid);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// A stop for an attempt this agent never had (its launch was dropped as the attempt
// stopped, or lost on the way) ends it at once: reported lost, so the controller does
// not wait forever with the job `stopping`; a late launch of it starts nothing.
TEST_F(AgentRecoveryTest, AStopForATaskItNeverHadEndsItAndALateLaunchStartsNothing) {
  StartAgent(false);
  const std::string ran = dir_ + "/ran";
  ::chmod(dir_.c_str(), 0777);
  HeartbeatResponse stop;
  stop.stop.push_back(TaskStop{TaskKey{9, 0, 1}, 30000, 15});
  controller_.Answer(stop);
  ASSERT_TRUE(agent_->RunOnce().ok());
  Json r = BeatUntil(9, "lost");
  ASSERT_FALSE(r.is_null()) << "the stop of a task the agent never had was not answered: "
                            << controller_.last().dump();
  EXPECT_NE(r["message"].get<std::string>().find("never ran"), std::string::npos) << r.dump();
  // The controller took the report; the launch it had dropped arrives after all.
  Send(Launch(9, {"sh", "-c", "touch " + ran}));
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(agent_->RunOnce().ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(std::filesystem::exists(ran)) << "a launch of an attempt already ended ran";
  EXPECT_TRUE(ReportOf(controller_.last(), 9).is_null()) << controller_.last().dump();
  EXPECT_EQ(agent_->running_tasks(), 0u);
}

}  // namespace
}  // namespace tessera
