// The agent's two heartbeat transports (agent/heartbeat_transport.h) against one loopback
// controller stand-in (FakeController, with its FakeAgentChannel for the stream) and the
// same expectations: the agent channel (AgentChannelClient, protobuf messages) and HTTP
// (HttpHeartbeatTransport, JSON). Then an agent over each: a launch, and its task's end
// reported.
#include "agent/heartbeat_transport.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <thread>

#include "agent/agent.h"
#include "agent/agent_channel_client.h"
#include "agent/controller_links.h"
#include "agent/testing/fake_agent_channel.h"
#include "agent/testing/fake_controller.h"
#include "api/json_fields.h"

namespace tessera {

// Failures show the structs as their JSON.
void PrintTo(const HeartbeatRequest& r, std::ostream* os) { *os << DumpJson(ToJson(r)); }
void PrintTo(const HeartbeatResponse& r, std::ostream* os) { *os << DumpJson(ToJson(r)); }

namespace {

enum class Transport { kHttp, kChannel };

std::string TransportText(Transport t) { return t == Transport::kHttp ? "http" : "channel"; }
std::string TransportTestName(const ::testing::TestParamInfo<Transport>& info) {
  return TransportText(info.param);
}
void PrintTo(Transport t, std::ostream* os) { *os << TransportText(t); }

constexpr Micros kTransportWait = 5'000'000;

// A heartbeat with every field of every struct set.
HeartbeatRequest EveryFieldRequest() {
  HeartbeatRequest r;
  r.node = "n1";
  r.agent_id = "agent-1";
  TaskReport t;
  t.key = {42, 3, 2};
  t.state = TaskState::kExited;
  t.exit_code = 3;
  t.signal = 9;
  t.checkpointed = true;
  t.message = "killed";
  t.log_offset = 4096;
  t.log_chunk = std::string("out\n\xff\x00 bytes", 12);
  t.pty_port = 40000;
  r.tasks = {t};
  GpuTelemetry g;
  g.index = 1;
  g.uuid = "GPU-1";
  g.lost = true;
  g.util_pct = 50;
  g.fb_used_mib = 10;
  g.fb_free_mib = 20;
  g.temp_c = 60;
  g.power_mw = 300'000;
  g.sm_clock_mhz = 1980;
  g.xid_count = 1;
  g.last_xid = 79;
  g.ecc_sbe_volatile = 1;
  g.ecc_dbe_volatile = 2;
  g.ecc_sbe_aggregate = 3;
  g.ecc_dbe_aggregate = 4;
  g.mig = {{"MIG-1", "3g.40gb", 4, 1, 5, 6}};
  r.gpus = {g};
  return r;
}

HeartbeatResponse EveryFieldResponse() {
  HeartbeatResponse r;
  TaskLaunch l;
  l.key = {7, 1, 1};
  l.job_name = "train";
  l.command = {"python", "train.py"};
  l.env = {{"RANK", "1"}};
  l.gpus = {0};
  l.mig = {{0, "1g.10gb", 6}};
  l.cpu_milli = 2000;
  l.memory_mib = 4096;
  l.gpu_milli = 1000;
  l.gpu_memory_mib = 1024;
  l.numa_nodes = {0};
  l.working_dir = "/work";
  l.checkpoint_dir = "/ckpt";
  l.checkpoint_managed = true;
  l.submit_dir = "/home/u";
  l.uid = 1000;
  l.gid = 1000;
  l.pty_secret = "secret";
  r.launch = {l};
  r.stop = {TaskStop{{8, 0, 1}, 100, 2}};
  r.heartbeat_interval_ms = 2000;
  return r;
}

class HeartbeatTransportTest : public ::testing::TestWithParam<Transport> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(controller_->ok());
    if (!stream()) {
      ControllerLinksOptions o;
      o.answer_timeout = kTransportWait;
      StatusOr<std::unique_ptr<ControllerLinks>> links =
          ControllerLinks::Create(controller_->url(), o);
      ASSERT_TRUE(links.ok()) << links.status().ToString();
      links_ = std::move(links).value();
      transport_ = std::make_unique<HttpHeartbeatTransport>(links_.get());
      return;
    }
    channel_ = std::make_unique<FakeAgentChannel>(*controller_);
    ASSERT_TRUE(channel_->ok());
    auto client = std::make_unique<AgentChannelClient>([](const HeartbeatResponse&) {}, [] {});
    AgentChannelTarget target;
    target.host = "127.0.0.1";
    target.port = channel_->port();
    target.credential = "credential";
    target.node = "n1";
    target.agent_id = "agent-1";
    StatusOr<HeartbeatResponse> hello = client->Open(target, kTransportWait);
    ASSERT_TRUE(hello.ok()) << hello.status().ToString();
    EXPECT_EQ(*hello, HeartbeatResponse{});
    client_ = client.get();
    transport_ = std::move(client);
  }

  bool stream() const { return GetParam() == Transport::kChannel; }
  HeartbeatResult Beat(const HeartbeatRequest& request) {
    return transport_->Exchange(request, kTransportWait);
  }
  // The controller (and its channel) go away.
  void StopController() {
    channel_.reset();
    controller_.reset();
  }

  std::unique_ptr<FakeController> controller_ = std::make_unique<FakeController>();
  std::unique_ptr<FakeAgentChannel> channel_;  // for the stream only
  std::unique_ptr<ControllerLinks> links_;
  AgentChannelClient* client_ = nullptr;
  std::unique_ptr<HeartbeatTransport> transport_;  // last: goes first
};

TEST_P(HeartbeatTransportTest, CarriesEveryFieldBothWays) {
  controller_->Answer(EveryFieldResponse());
  HeartbeatResult r = Beat(EveryFieldRequest());
  ASSERT_TRUE(r.answer.ok()) << r.answer.status().ToString();
  EXPECT_EQ(*r.answer, EveryFieldResponse());
  EXPECT_FALSE(r.store_failed);
  EXPECT_FALSE(r.lost);
  ASSERT_EQ(controller_->requests().size(), 1u);
  EXPECT_EQ(controller_->requests()[0], EveryFieldRequest());
  // Nothing queued: an empty answer.
  r = Beat(EveryFieldRequest());
  ASSERT_TRUE(r.answer.ok()) << r.answer.status().ToString();
  EXPECT_EQ(*r.answer, HeartbeatResponse{});
  EXPECT_EQ(controller_->requests().size(), 2u);
  if (stream()) {
    EXPECT_EQ(channel_->heartbeats(), 2);
  }
}

TEST_P(HeartbeatTransportTest, StoreFailureKeepsTheTransport) {
  controller_->FailNext();
  HeartbeatResult r = Beat(EveryFieldRequest());
  ASSERT_FALSE(r.answer.ok());
  EXPECT_EQ(r.answer.status().code(), StatusCode::kUnavailable) << r.answer.status().ToString();
  EXPECT_TRUE(r.store_failed);
  EXPECT_FALSE(r.lost);
  EXPECT_TRUE(controller_->requests().empty());
  // The same transport takes the next one.
  r = Beat(EveryFieldRequest());
  ASSERT_TRUE(r.answer.ok()) << r.answer.status().ToString();
  EXPECT_EQ(controller_->requests().size(), 1u);
  if (stream()) {
    EXPECT_TRUE(client_->open());
    EXPECT_EQ(channel_->streams(), 1);
  }
}

TEST_P(HeartbeatTransportTest, ReregisterComesThrough) {
  HeartbeatResponse again;
  again.reregister = true;
  controller_->Answer(again);
  HeartbeatResult r = Beat(EveryFieldRequest());
  ASSERT_TRUE(r.answer.ok()) << r.answer.status().ToString();
  EXPECT_TRUE(r.answer->reregister);
}

// A controller's answer that its codec refuses (a stop with no signal) is refused on both
// transports, naming the field; the stream that carried it is dropped.
TEST_P(HeartbeatTransportTest, RefusesAnAnswerThatDoesNotDecode) {
  HeartbeatResponse bad;
  bad.stop = {TaskStop{{8, 0, 1}, 100, 0}};
  controller_->Answer(bad);
  HeartbeatResult r = Beat(EveryFieldRequest());
  ASSERT_FALSE(r.answer.ok());
  EXPECT_EQ(r.answer.status().code(), StatusCode::kInvalidArgument) << r.answer.status().ToString();
  EXPECT_NE(r.answer.status().message().find("stop[0].signal"), std::string::npos)
      << r.answer.status().ToString();
  EXPECT_FALSE(r.store_failed);
  EXPECT_EQ(r.lost, stream());
  if (stream()) {
    EXPECT_FALSE(client_->open());
  }
}

TEST_P(HeartbeatTransportTest, ControllerGoneIsUnavailable) {
  StopController();
  HeartbeatResult r = Beat(EveryFieldRequest());
  ASSERT_FALSE(r.answer.ok());
  EXPECT_EQ(r.answer.status().code(), StatusCode::kUnavailable) << r.answer.status().ToString();
  EXPECT_FALSE(r.store_failed);
  EXPECT_EQ(r.lost, stream());  // a stream must be opened again; HTTP tries afresh each time
}

INSTANTIATE_TEST_SUITE_P(AgentTransports, HeartbeatTransportTest,
                         ::testing::Values(Transport::kHttp, Transport::kChannel),
                         TransportTestName);

// An agent over each transport: it registers, gets a launch in a heartbeat's answer, and
// reports its task's exit code until the controller has it.
class AgentOverTransportTest : public ::testing::TestWithParam<Transport> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(controller_.ok());
    if (GetParam() == Transport::kChannel) {
      channel_ = std::make_unique<FakeAgentChannel>(controller_);
      ASSERT_TRUE(channel_->ok());
    }
    char dir[] = "/tmp/tessera_agent_transport_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    agent_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  FakeController controller_;
  std::unique_ptr<FakeAgentChannel> channel_;
  std::string dir_;
  std::unique_ptr<Agent> agent_;
};

TEST_P(AgentOverTransportTest, LaunchesAndReportsTheExit) {
  AgentOptions o;
  o.server_url = controller_.url();
  o.token = "join-token";
  o.node_name = "n1";
  o.data_dir = dir_;
  o.fake_gpus = "1xH100-80GB";
  o.use_cgroups = false;
  o.telemetry_interval = 0;
  o.allow_root_tasks = true;  // the stand-in gives no uid
  StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(o, GpuCatalog::Default());
  ASSERT_TRUE(agent.ok()) << agent.status().ToString();
  agent_ = std::move(agent).value();
  ASSERT_TRUE(agent_->RunOnce().ok());  // registers (and opens the stream)

  TaskLaunch launch;
  launch.key = {5, 0, 1};
  launch.job_name = "exit3";
  launch.command = {"sh", "-c", "exit 3"};
  launch.gpus = {0};
  launch.gpu_milli = 1000;
  controller_.AnswerWithLaunch(launch);
  bool reported = false;
  for (int i = 0; i < 200 && !reported; ++i) {
    Status s = agent_->RunOnce();
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (const HeartbeatRequest& hb : controller_.requests()) {
      for (const TaskReport& t : hb.tasks) {
        if (t.key == launch.key && t.state == TaskState::kExited) {
          EXPECT_EQ(t.exit_code, 3);
          reported = true;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(reported);
  if (channel_ != nullptr) {
    EXPECT_EQ(static_cast<size_t>(channel_->heartbeats()), controller_.requests().size())
        << "heartbeats went over HTTP, not the channel";
    EXPECT_EQ(channel_->streams(), 1);
  }
}

INSTANTIATE_TEST_SUITE_P(AgentTransports, AgentOverTransportTest,
                         ::testing::Values(Transport::kHttp, Transport::kChannel),
                         TransportTestName);

}  // namespace
}  // namespace tessera
