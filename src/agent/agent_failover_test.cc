// An agent given several controller addresses (high availability), against loopback
// stand-ins: a dead address, a follower without a leader (503), a follower that
// redirects to the leader (307 with X-Tessera-Leader), a hung controller (accepts and
// never answers) and an agent channel that stops answering. The agent ends up
// registered with the controller that answers, and a task it runs keeps running (it is
// reported, not restarted). Every wait is bounded.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "agent/agent.h"
#include "agent/controller_links.h"
#include "agent/testing/fake_controller.h"
#include "api/agent_channel.grpc.pb.h"
#include "api/agent_channel_codec.h"
#include "base/file_util.h"
#include "base/testing/loopback_listener.h"

namespace tessera {
namespace {

using Json = nlohmann::json;
using Steady = std::chrono::steady_clock;

// A follower's HTTP front: every request gets `answer`; counts them.
class FollowerFront {
 public:
  explicit FollowerFront(std::function<void(const httplib::Request&, httplib::Response&)> answer) {
    auto handler = [this, answer](const httplib::Request& req, httplib::Response& res) {
      ++requests_;
      answer(req, res);
    };
    server_.Post("/.*", handler);
    server_.Get("/.*", handler);
    server_.set_keep_alive_timeout(1);  // stopped while the agent holds a connection
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    for (int i = 0; i < 500 && !server_.is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~FollowerFront() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_.load(); }

  static FollowerFront Leaderless() {
    return FollowerFront([](const httplib::Request&, httplib::Response& res) {
      res.status = 503;
      res.set_header("Retry-After", "1");
      res.set_content(
          R"({"error":{"code":"unavailable","message":"no leader: an election is under way"}})",
          "application/json");
    });
  }

 private:
  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
  std::atomic<int> requests_{0};
};

std::unique_ptr<FollowerFront> RedirectingTo(const std::string& leader) {
  return std::make_unique<FollowerFront>(
      [leader](const httplib::Request& req, httplib::Response& res) {
        res.status = 307;
        res.set_header("Location", leader + req.target);
        res.set_header("X-Tessera-Leader", leader);
      });
}

using testing::DeadUrl;
using testing::HungListener;

// An agent channel that answers each message with an empty HeartbeatResponse (the
// first heartbeat's answer may carry `first_answer`) until hang() is set; then it reads
// and answers nothing, as a stopped controller.
class FakeChannel final : public channel::AgentChannel::Service {
 public:
  explicit FakeChannel(HeartbeatResponse first_answer) : first_answer_(std::move(first_answer)) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~FakeChannel() override { server_->Shutdown(std::chrono::system_clock::now()); }

  grpc::Status Connect(grpc::ServerContext*,
                       grpc::ServerReaderWriter<channel::ControllerMessage, channel::AgentMessage>*
                           stream) override {
    ++streams_;
    channel::AgentMessage in;
    while (stream->Read(&in)) {
      if (hang_.load()) {
        continue;
      }
      HeartbeatResponse answer;
      if (in.has_heartbeat() && !answered_first_.exchange(true)) {
        answer = first_answer_;
      }
      channel::ControllerMessage out;
      out.set_ack(in.seq());
      ToProto(answer, out.mutable_commands());
      stream->Write(out);
    }
    return grpc::Status::OK;
  }

  int port() const { return port_; }
  int streams() const { return streams_.load(); }
  void hang() { hang_ = true; }

 private:
  HeartbeatResponse first_answer_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::atomic<int> streams_{0};
  std::atomic<bool> hang_{false};
  std::atomic<bool> answered_first_{false};
};

class AgentFailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(second_.ok());
    char dir[] = "/tmp/tessera_agent_failover_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    // A new leader does not know the agent yet: it asks it to register again.
    HeartbeatResponse again;
    again.reregister = true;
    second_.Answer(again);
  }
  void TearDown() override {
    agent_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // An agent for `servers`, heartbeating every 500 ms: it waits 3 s for an answer.
  void MakeAgent(const std::string& servers) {
    AgentOptions o;
    o.server_url = servers;
    o.token = "join-token";
    o.node_name = "n1";
    o.data_dir = dir_ + "/agent";
    o.fake_gpus = "1xH100-80GB";
    o.use_cgroups = false;
    o.telemetry_interval = 0;
    o.allow_root_tasks = true;  // the stand-ins give no uid
    o.heartbeat_interval = 500'000;
    auto agent = Agent::Create(o, GpuCatalog::Default());
    ASSERT_TRUE(agent.ok()) << agent.status().ToString();
    agent_ = std::move(agent).value();
    EXPECT_EQ(agent_->AnswerBound(), 3'000'000);
  }

  // A task that writes its pid to <dir>/runs (once per start) and sleeps.
  TaskLaunch SleepingTask() const {
    TaskLaunch l;
    l.key = TaskKey{1, 0, 1};
    l.job_name = "j1";
    l.command = {"sh", "-c", "echo $$ >> " + dir_ + "/runs; exec sleep 60"};
    l.gpus = {0};
    l.gpu_milli = 1000;
    return l;
  }

  int Starts() const {
    const std::string text = ReadTextFile(dir_ + "/runs").value_or("");
    return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  }

  bool WaitForStart() const {
    for (int i = 0; i < 200 && Starts() == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return Starts() == 1;
  }

  // The report of job 1's task in the last registration `c` received; null when none.
  static Json ReportInLastRegistration(FakeController& c) {
    const std::vector<Json> regs = c.registrations();
    if (regs.empty()) {
      return Json();
    }
    for (const Json& t : regs.back().value("tasks", Json::array())) {
      if (t["key"]["job"] == 1) {
        return t;
      }
    }
    return Json();
  }

  static double SecondsSince(Steady::time_point start) {
    return std::chrono::duration<double>(Steady::now() - start).count();
  }

  FakeController second_;
  std::string dir_;
  std::unique_ptr<Agent> agent_;
};

TEST_F(AgentFailoverTest, ADeadAddressAndALeaderlessFollowerAreSkipped) {
  FollowerFront leaderless = FollowerFront::Leaderless();
  MakeAgent(DeadUrl() + "," + leaderless.url() + "," + second_.url());
  Status registered = agent_->RunOnce();
  ASSERT_TRUE(registered.ok()) << registered.ToString();
  EXPECT_EQ(second_.registrations().size(), 1U);
  EXPECT_EQ(agent_->controller(), second_.url());
  // Heartbeats go where the registration went.
  ASSERT_TRUE(agent_->RunOnce().ok());
  EXPECT_EQ(leaderless.requests(), 1);
  EXPECT_FALSE(second_.heartbeats().empty());
}

TEST_F(AgentFailoverTest, EveryAddressFailingIsOneErrorNamingEach) {
  FollowerFront leaderless = FollowerFront::Leaderless();
  const std::string dead = DeadUrl();
  MakeAgent(dead + "," + leaderless.url());
  Status s = agent_->RunOnce();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("no controller answered: " + dead + ": "), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find(leaderless.url() + ": no leader: an election is under way"),
            std::string::npos)
      << s.message();
}

TEST_F(AgentFailoverTest, AFollowersRedirectLeadsToTheLeader) {
  std::unique_ptr<FollowerFront> follower = RedirectingTo(second_.url());
  MakeAgent(follower->url());
  Status registered = agent_->RunOnce();
  ASSERT_TRUE(registered.ok()) << registered.ToString();
  EXPECT_EQ(second_.registrations().size(), 1U);
  EXPECT_EQ(agent_->controller(), second_.url());
  ASSERT_TRUE(agent_->RunOnce().ok());
  EXPECT_EQ(follower->requests(), 1);  // the heartbeat went to the leader directly
}

TEST_F(AgentFailoverTest, AHungControllerIsLeftWithinTheBound) {
  HungListener hung;
  MakeAgent(hung.url() + "," + second_.url());
  const Steady::time_point start = Steady::now();
  Status registered = agent_->RunOnce();
  ASSERT_TRUE(registered.ok()) << registered.ToString();
  EXPECT_EQ(second_.registrations().size(), 1U);
  EXPECT_LT(SecondsSince(start), 6.0);
}

// The controller the agent registered with dies: the next heartbeat goes to the next
// address, whose "register again" gets a registration that reports the running task.
TEST_F(AgentFailoverTest, ARunningTaskIsReportedToTheNextControllerNotRestarted) {
  auto first = std::make_unique<FakeController>();
  MakeAgent(first->url() + "," + second_.url());
  ASSERT_TRUE(agent_->RunOnce().ok());
  HeartbeatResponse launch;
  launch.launch.push_back(SleepingTask());
  first->Answer(launch);
  ASSERT_TRUE(agent_->RunOnce().ok());
  ASSERT_TRUE(WaitForStart());
  first.reset();  // the leader dies
  Status s = agent_->RunOnce();
  ASSERT_TRUE(s.ok()) << s.ToString();
  Json report = ReportInLastRegistration(second_);
  ASSERT_FALSE(report.is_null()) << "the second controller got no report of the task";
  EXPECT_EQ(report["state"], "running");
  EXPECT_EQ(agent_->controller(), second_.url());
  EXPECT_EQ(agent_->running_tasks(), 1U);
  EXPECT_EQ(Starts(), 1);
}

// A stopped controller keeps the agent channel's connection open and answers nothing:
// the agent gives up on the stream after AnswerBound() and registers with the next
// address, reporting its running task.
TEST_F(AgentFailoverTest, AChannelThatStopsAnsweringIsDroppedForTheNextController) {
  HeartbeatResponse launch;
  launch.launch.push_back(SleepingTask());
  FakeChannel channel(launch);
  FakeController first;
  RegisterResponse with_channel;
  with_channel.node = "n1";
  with_channel.heartbeat_interval_ms = 500;
  with_channel.channel_port = channel.port();
  first.AnswerRegistrations(with_channel);
  MakeAgent(first.url() + "," + second_.url());
  ASSERT_TRUE(agent_->RunOnce().ok());  // registers, opens the stream
  ASSERT_EQ(channel.streams(), 1);
  ASSERT_TRUE(agent_->RunOnce().ok());  // a heartbeat on the stream: the launch
  ASSERT_TRUE(WaitForStart());
  EXPECT_TRUE(first.heartbeats().empty()) << "heartbeats went over HTTP, not the channel";

  channel.hang();
  const Steady::time_point start = Steady::now();
  Status s = agent_->RunOnce();
  ASSERT_TRUE(s.ok()) << s.ToString();
  const double waited = SecondsSince(start);
  EXPECT_GE(waited, 2.5);
  EXPECT_LT(waited, 6.0);
  Json report = ReportInLastRegistration(second_);
  ASSERT_FALSE(report.is_null()) << "the second controller got no registration with the task";
  EXPECT_EQ(report["state"], "running");
  EXPECT_EQ(agent_->controller(), second_.url());
  EXPECT_EQ(first.registrations().size(), 1U);
  EXPECT_EQ(agent_->running_tasks(), 1U);
  EXPECT_EQ(Starts(), 1);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// Tasks' terminals listen where the controller sees the agent: the local address of
// the route to the controller, never every address.
TEST(LocalAddressTowardTest, TheRouteToTheControllerNamesTheAddress) {
  EXPECT_EQ(LocalAddressToward("http://127.0.0.1:7450"), "127.0.0.1");
  EXPECT_EQ(LocalAddressToward("https://127.0.0.1"), "127.0.0.1");
  const std::string v6 = LocalAddressToward("http://[::1]:7450");
  EXPECT_TRUE(v6 == "::1" || v6 == "127.0.0.1") << v6;  // "127.0.0.1" where IPv6 is off
  EXPECT_EQ(LocalAddressToward("not a url"), "127.0.0.1");
  EXPECT_EQ(LocalAddressToward(""), "127.0.0.1");
}

}  // namespace
}  // namespace tessera
