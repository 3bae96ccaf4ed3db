#include "api/agent_protocol.h"

#include <gtest/gtest.h>

#include <string>
#include <unordered_set>

#include "api/json_fields.h"
#include "model/testing/test_catalog.h"

namespace tessera {
namespace {

using testing::Catalog;

NodeInventory MigNode() {
  NodeInventory inv;
  inv.spec = MakeUniformNode("node-a", MilliCpu(64000), MiB(512 * 1024),
                             *Catalog().Find("A100-80GB"), 2, SharingMode::kMig,
                             /*numa_nodes=*/2, /*nvlink=*/true);
  inv.spec.gpus[1].mode = SharingMode::kShared;
  inv.spec.labels = {{"rack", "r1"}, {"zone", "z"}};  // sorted, as they come back
  inv.gpu_uuids = {"GPU-0000", "GPU-0001"};
  inv.mig_instances = {{{"MIG-aaaa", "3g.40gb", 4}, {"MIG-bbbb", "1g.10gb", 0}}, {}};
  return inv;
}

TaskReport Report() {
  TaskReport r;
  r.key = {42, 1, 3};
  r.state = TaskState::kExited;
  r.exit_code = 137;
  r.signal = 9;
  r.checkpointed = true;
  r.message = "killed";
  r.log_offset = 4096;
  r.log_chunk = std::string("step 1\n\xff\x00\x01 binary", 16);
  return r;
}

TaskLaunch Launch() {
  TaskLaunch l;
  l.key = {7, 0, 1};
  l.job_name = "train";
  l.command = {"python", "train.py"};
  l.env = {{"RANK", "0"}, {"WORLD_SIZE", "2"}};
  l.gpus = {0, 1};
  l.mig = {{0, "1g.10gb", 6}};
  l.cpu_milli = 4000;
  l.memory_mib = 8192;
  l.gpu_milli = 1000;
  l.gpu_memory_mib = 0;
  l.numa_nodes = {0};
  l.working_dir = "/work";
  l.checkpoint_dir = "/ckpt/7";
  return l;
}

// Through text, as on the wire.
Json Wire(const Json& j) { return Json::parse(j.dump()); }

TEST(AgentProtocolTest, AContainerLaunchRoundTripsAndMayLeaveTheCommandToTheImage) {
  TaskLaunch l = Launch();
  l.command.clear();
  l.container.image = "docker.io/library/ubuntu:22.04";
  l.container.mounts = {{"/data", "/in", true}};
  l.container.entrypoint_set = true;  // cleared: the command alone runs
  HeartbeatResponse response;
  response.launch = {l};
  StatusOr<HeartbeatResponse> back = HeartbeatResponseFromJson(Wire(ToJson(response)));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->launch.size(), 1U);
  EXPECT_EQ(back->launch[0], l);
  Json j = ToJson(response);
  j["launch"][0]["container"]["image"] = "Not An Image";
  EXPECT_NE(HeartbeatResponseFromJson(Wire(j)).status().message().find("launch[0].container.image"),
            std::string::npos);
  j["launch"][0].erase("container");
  EXPECT_NE(HeartbeatResponseFromJson(Wire(j)).status().message().find("command"),
            std::string::npos);
}

TEST(AgentProtocolTest, InventoryRoundTrips) {
  NodeInventory inv = MigNode();
  Json j = ToJson(inv, Catalog());
  EXPECT_EQ(j["gpus"][0]["model"], "A100-80GB");
  EXPECT_EQ(j["gpus"][0]["mode"], "mig");
  EXPECT_EQ(j["gpus"][1]["numa_node"], 1);
  EXPECT_EQ(j["gpus"][0]["mig_instances"][0]["profile"], "3g.40gb");
  EXPECT_EQ(j["labels"]["rack"], "r1");
  StatusOr<NodeInventory> back = NodeInventoryFromJson(Wire(j), Catalog());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, inv);
}

TEST(AgentProtocolTest, TimesliceGpusCarryReplicasAndOthersDoNot) {
  NodeInventory inv = MigNode();
  inv.spec.gpus[1].mode = SharingMode::kTimeslice;
  inv.spec.gpus[1].replicas = 4;
  Json j = ToJson(inv, Catalog());
  EXPECT_EQ(j["gpus"][1]["mode"], "timeslice");
  EXPECT_EQ(j["gpus"][1]["replicas"], 4);
  EXPECT_FALSE(j["gpus"][0].contains("replicas"));  // as older agents and controllers had it
  StatusOr<NodeInventory> back = NodeInventoryFromJson(Wire(j), Catalog());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, inv);
  Json bad = j;
  bad["gpus"][1].erase("replicas");
  StatusOr<NodeInventory> missing = NodeInventoryFromJson(bad, Catalog());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("GPU 1 is in timeslice mode with replicas 0"),
            std::string::npos)
      << missing.status().message();
  bad["gpus"][1]["replicas"] = 65;
  EXPECT_NE(NodeInventoryFromJson(bad, Catalog()).status().message().find("gpus[1].replicas"),
            std::string::npos);
}

TEST(AgentProtocolTest, InventoryIsValidated) {
  Json j = ToJson(MigNode(), Catalog());
  auto error = [](const Json& bad) {
    StatusOr<NodeInventory> inv = NodeInventoryFromJson(bad, Catalog());
    EXPECT_FALSE(inv.ok());
    EXPECT_EQ(inv.status().code(), StatusCode::kInvalidArgument);
    return inv.status().message();
  };
  Json bad = j;
  bad["gpus"][1]["model"] = "Z9000";
  EXPECT_NE(error(bad).find("gpus[1].model: unknown GPU model 'Z9000'"), std::string::npos);
  bad = j;
  bad["gpus"][0]["mig_instances"][0]["profile"] = "5g.50gb";
  EXPECT_NE(error(bad).find("gpus[0].mig_instances[0].profile"), std::string::npos);
  bad = j;
  bad["gpus"][0]["mig_instances"][0]["start"] = 2;  // 3g starts at 0 or 4
  EXPECT_NE(error(bad).find("gpus[0].mig_instances[0].start: slot 2"), std::string::npos);
  bad = j;
  bad["gpus"][1]["mig_instances"] = Json::array({{{"profile", "1g.10gb"}}});
  EXPECT_NE(error(bad).find("not in mig mode"), std::string::npos);
  bad = j;
  bad["gpus"][1]["numa_node"] = 5;  // of 2
  EXPECT_NE(error(bad).find("NUMA node 5 of 2"), std::string::npos);
  bad = j;
  bad["gpus"][0]["mode"] = "sliced";
  EXPECT_NE(error(bad).find("gpus[0].mode: unknown sharing mode"), std::string::npos);
  bad = j;
  bad.erase("name");
  EXPECT_EQ(error(bad), "name: is required");
  bad = j;
  bad["cpu_milli"] = -1;
  EXPECT_NE(error(bad).find("cpu_milli: must be between 0"), std::string::npos);
  bad = j;
  bad["labels"] = Json::array();
  EXPECT_NE(error(bad).find("labels: expected an object"), std::string::npos);
  EXPECT_NE(error(Json("node")).find("expected an object"), std::string::npos);
  // Unknown keys are ignored (a newer agent may send more).
  Json newer = j;
  newer["driver_version"] = "550.54";
  newer["gpus"][0]["temperature"] = 41;
  EXPECT_TRUE(NodeInventoryFromJson(newer, Catalog()).ok());
}

TEST(AgentProtocolTest, ReportCarriesBinaryLogs) {
  TaskReport r = Report();
  Json j = ToJson(r);
  EXPECT_EQ(j["state"], "exited");
  EXPECT_EQ(j["key"], Json({{"job", 42}, {"task", 1}, {"attempt", 3}}));
  EXPECT_TRUE(j["log_b64"].is_string());
  StatusOr<TaskReport> back = TaskReportFromJson(Wire(j));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  EXPECT_EQ(back->log_chunk.size(), 16U);

  // A message that is not UTF-8 still dumps.
  r.message = "bad \xc3";
  EXPECT_NO_THROW(ToJson(r).dump());
}

TEST(AgentProtocolTest, ReportIsValidated) {
  Json j = ToJson(Report());
  Json bad = j;
  bad["state"] = "zombie";
  EXPECT_NE(TaskReportFromJson(bad).status().message().find("state: expected running, exited"),
            std::string::npos);
  bad = j;
  bad["key"]["job"] = -1;
  EXPECT_EQ(TaskReportFromJson(bad).status().message(),
            "key.job: expected a non-negative integer, got -1");
  bad = j;
  bad["key"].erase("task");
  EXPECT_EQ(TaskReportFromJson(bad).status().message(), "key.task: is required");
  bad = j;
  bad["log_b64"] = "abc";
  EXPECT_NE(TaskReportFromJson(bad).status().message().find("log_b64: "), std::string::npos);
  bad = j;
  bad.erase("key");
  EXPECT_EQ(TaskReportFromJson(bad).status().message(), "key: is required");
  bad = j;
  bad["signal"] = 500;
  EXPECT_NE(TaskReportFromJson(bad).status().message().find("signal: must be between 0 and 128"),
            std::string::npos);
}

TEST(AgentProtocolTest, RegisterRoundTrips) {
  RegisterRequest req;
  req.agent_id = "agent-1";
  req.inventory = MigNode();
  req.tasks = {Report()};
  StatusOr<RegisterRequest> back = RegisterRequestFromJson(Wire(ToJson(req, Catalog())), Catalog());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->agent_id, "agent-1");
  EXPECT_EQ(back->inventory, req.inventory);
  EXPECT_EQ(back->tasks, req.tasks);

  Json bad = ToJson(req, Catalog());
  bad["inventory"]["gpus"][0]["model"] = 5;
  EXPECT_NE(RegisterRequestFromJson(bad, Catalog())
                .status()
                .message()
                .find("inventory.gpus[0].model: expected a string"),
            std::string::npos);
  bad = ToJson(req, Catalog());
  bad["tasks"][0]["state"] = 1;
  EXPECT_NE(RegisterRequestFromJson(bad, Catalog()).status().message().find("tasks[0].state"),
            std::string::npos);

  RegisterResponse resp;
  resp.node = "node-a";
  resp.heartbeat_interval_ms = 500;
  resp.node_timeout_ms = 10'000;
  StatusOr<RegisterResponse> resp_back = RegisterResponseFromJson(Wire(ToJson(resp)));
  ASSERT_TRUE(resp_back.ok());
  EXPECT_EQ(*resp_back, resp);
  EXPECT_FALSE(RegisterResponseFromJson(Json{{"node", "n"}, {"heartbeat_interval_ms", 0}}).ok());
  EXPECT_EQ(RegisterResponseFromJson(Json{{"node", "n"}})->heartbeat_interval_ms, 1000);
}

TEST(AgentProtocolTest, HeartbeatRoundTrips) {
  HeartbeatRequest req{"node-a", "agent-1", {Report(), TaskReport{}}, {}};
  StatusOr<HeartbeatRequest> back = HeartbeatRequestFromJson(Wire(ToJson(req)));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, req);

  HeartbeatResponse resp;
  resp.launch = {Launch()};
  resp.stop = {TaskStop{{7, 0, 1}, 5000, 2}, TaskStop{}};
  resp.reregister = true;
  resp.heartbeat_interval_ms = 5000;
  StatusOr<HeartbeatResponse> resp_back = HeartbeatResponseFromJson(Wire(ToJson(resp)));
  ASSERT_TRUE(resp_back.ok()) << resp_back.status().ToString();
  EXPECT_EQ(*resp_back, resp);
  EXPECT_EQ(resp_back->stop[1].grace_ms, 30000);
  EXPECT_EQ(resp_back->stop[1].signal, 15);

  // Empty lists may be left out.
  StatusOr<HeartbeatResponse> empty = HeartbeatResponseFromJson(Json::object());
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->launch.empty());
  EXPECT_FALSE(empty->reregister);
  EXPECT_EQ(empty->heartbeat_interval_ms, 0);  // a push, or an older controller: unchanged
  EXPECT_FALSE(ToJson(*empty).contains("heartbeat_interval_ms"));
  EXPECT_FALSE(HeartbeatResponseFromJson(Json{{"heartbeat_interval_ms", -1}}).ok());
  EXPECT_EQ(HeartbeatRequestFromJson(Json{{"node", "n"}}).status().message(),
            "agent_id: is required");
}

GpuTelemetry Telemetry() {
  GpuTelemetry t;
  t.index = 3;
  t.uuid = "GPU-0003";
  t.util_pct = 87;
  t.fb_used_mib = 40000;
  t.fb_free_mib = 41920;
  t.temp_c = 71;
  t.power_mw = 512345;
  t.sm_clock_mhz = 1980;
  t.xid_count = 2;
  t.last_xid = 79;
  t.ecc_sbe_volatile = 5;
  t.ecc_dbe_volatile = 1;
  t.ecc_sbe_aggregate = 17;
  t.ecc_dbe_aggregate = 3;
  t.mig = {{"MIG-aaaa", "1g.10gb", 0, 7, 512, 9216}, {"MIG-bbbb", "3g.40gb", 4, 2, 0, 40192}};
  return t;
}

TEST(AgentProtocolTest, TelemetryRoundTrips) {
  GpuTelemetry t = Telemetry();
  Json j = ToJson(t);
  EXPECT_EQ(j["index"], 3);
  EXPECT_EQ(j["util_pct"], 87);
  EXPECT_EQ(j["power_mw"], 512345);
  EXPECT_EQ(j["last_xid"], 79);
  EXPECT_EQ(j["ecc_dbe_aggregate"], 3);
  EXPECT_EQ(j["lost"], false);
  EXPECT_EQ(j["mig"][1]["gi_id"], 2);
  EXPECT_EQ(j["mig"][0]["fb_free_mib"], 9216);
  StatusOr<GpuTelemetry> back = GpuTelemetryFromJson(Wire(j));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, t);
  StatusOr<MigTelemetry> mig = MigTelemetryFromJson(Wire(ToJson(t.mig[1])));
  ASSERT_TRUE(mig.ok()) << mig.status().ToString();
  EXPECT_EQ(*mig, t.mig[1]);

  GpuTelemetry lost;
  lost.index = 0;
  lost.uuid = "GPU-0000";
  lost.lost = true;
  back = GpuTelemetryFromJson(Wire(ToJson(lost)));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, lost);

  // Fields left out take their defaults; unknown keys are ignored.
  back = GpuTelemetryFromJson(Json{{"index", 1}, {"pcie_replay", 4}});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->index, 1);
  EXPECT_EQ(back->util_pct, 0);
  EXPECT_TRUE(back->mig.empty());
  EXPECT_EQ(MigTelemetryFromJson(Json{{"uuid", "MIG-x"}})->gi_id, -1);

  // In a heartbeat: "gpus" only when there is a sample.
  HeartbeatRequest req{"node-a", "agent-1", {}, {t, lost}};
  Json hb = ToJson(req);
  ASSERT_TRUE(hb.contains("gpus"));
  EXPECT_EQ(hb["gpus"].size(), 2U);
  StatusOr<HeartbeatRequest> hb_back = HeartbeatRequestFromJson(Wire(hb));
  ASSERT_TRUE(hb_back.ok()) << hb_back.status().ToString();
  EXPECT_EQ(*hb_back, req);
  req.gpus.clear();
  EXPECT_FALSE(ToJson(req).contains("gpus"));
  hb_back = HeartbeatRequestFromJson(Wire(ToJson(req)));
  ASSERT_TRUE(hb_back.ok());
  EXPECT_TRUE(hb_back->gpus.empty());
}

TEST(AgentProtocolTest, TelemetryIsValidated) {
  Json j = ToJson(Telemetry());
  auto error = [](const Json& bad) {
    StatusOr<GpuTelemetry> t = GpuTelemetryFromJson(bad);
    EXPECT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    return t.status().message();
  };
  Json bad = j;
  bad["util_pct"] = 101;
  EXPECT_EQ(error(bad), "util_pct: must be between 0 and 100, got 101");
  bad = j;
  bad["util_pct"] = -1;
  EXPECT_NE(error(bad).find("util_pct: must be between 0 and 100"), std::string::npos);
  bad = j;
  bad.erase("index");
  EXPECT_EQ(error(bad), "index: is required");
  bad = j;
  bad["index"] = -2;
  EXPECT_NE(error(bad).find("index: must be between 0"), std::string::npos);
  bad = j;
  bad["xid_count"] = -1;
  EXPECT_NE(error(bad).find("xid_count: must be between 0"), std::string::npos);
  bad = j;
  bad["ecc_dbe_volatile"] = "many";
  EXPECT_NE(error(bad).find("ecc_dbe_volatile: expected an integer"), std::string::npos)
      << error(bad);
  bad = j;
  bad["lost"] = 1;
  EXPECT_NE(error(bad).find("lost: expected"), std::string::npos) << error(bad);
  bad = j;
  bad["mig"][1]["fb_used_mib"] = -5;
  EXPECT_NE(error(bad).find("mig[1].fb_used_mib: must be between 0"), std::string::npos);
  bad = j;
  bad["mig"][0].erase("uuid");
  EXPECT_EQ(error(bad), "mig[0].uuid: is required");
  bad = j;
  bad["mig"][0]["start"] = 8;
  EXPECT_NE(error(bad).find("mig[0].start"), std::string::npos);
  EXPECT_NE(error(Json::array()).find("expected an object"), std::string::npos);

  // Inside a heartbeat, the error names the GPU's place.
  HeartbeatRequest req{"node-a", "agent-1", {}, {Telemetry(), Telemetry()}};
  Json hb = ToJson(req);
  hb["gpus"][1]["power_mw"] = -3;
  EXPECT_NE(HeartbeatRequestFromJson(hb).status().message().find("gpus[1].power_mw: must be"),
            std::string::npos)
      << HeartbeatRequestFromJson(hb).status().message();
  hb = ToJson(req);
  hb["gpus"][0]["mig"][1]["gi_id"] = "two";
  EXPECT_NE(HeartbeatRequestFromJson(hb).status().message().find("gpus[0].mig[1].gi_id"),
            std::string::npos);
  hb = ToJson(req);
  hb["gpus"] = Json::object();
  EXPECT_NE(HeartbeatRequestFromJson(hb).status().message().find("gpus: expected a list"),
            std::string::npos)
      << HeartbeatRequestFromJson(hb).status().message();
}

TEST(AgentProtocolTest, LaunchIsValidated) {
  Json j = ToJson(Launch());
  auto error = [](const Json& bad) {
    StatusOr<TaskLaunch> l = TaskLaunchFromJson(bad);
    EXPECT_FALSE(l.ok());
    return l.status().message();
  };
  Json bad = j;
  bad["command"] = Json::array();
  EXPECT_NE(error(bad).find("command: is required"), std::string::npos);
  bad = j;
  bad["gpus"] = {0, -1};
  EXPECT_NE(error(bad).find("gpus[1]: must be between 0 and 1023"), std::string::npos);
  bad = j;
  bad["gpu_milli"] = 1500;
  EXPECT_NE(error(bad).find("gpu_milli: must be between 0 and 1000"), std::string::npos);
  bad = j;
  bad["mig"][0]["start"] = 8;
  EXPECT_NE(error(bad).find("mig[0].start"), std::string::npos);
  bad = j;
  bad["env"]["BAD-NAME"] = "x";
  EXPECT_NE(error(bad).find("env.BAD-NAME: not a variable name"), std::string::npos);
  bad = j;
  bad["env"]["X"] = 3;
  EXPECT_NE(error(bad).find("env.X: expected a string"), std::string::npos);

  Json stop = ToJson(TaskStop{});
  stop["signal"] = 0;
  EXPECT_FALSE(TaskStopFromJson(stop).ok());
  stop["signal"] = 9;
  stop["grace_ms"] = -5;
  EXPECT_FALSE(TaskStopFromJson(stop).ok());
}

TEST(AgentProtocolTest, LaunchCarriesTheSubmitDir) {
  TaskLaunch l = Launch();
  l.submit_dir = "/home/alice/run";
  StatusOr<TaskLaunch> back = TaskLaunchFromJson(Wire(ToJson(l)));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->submit_dir, "/home/alice/run");
  EXPECT_EQ(*back, l);
  // A controller that predates the field sends none: the agent reads "".
  Json old = ToJson(Launch());
  old.erase("submit_dir");
  StatusOr<TaskLaunch> plain = TaskLaunchFromJson(old);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->submit_dir, "");
  Json bad = ToJson(l);
  bad["submit_dir"] = 3;
  StatusOr<TaskLaunch> refused = TaskLaunchFromJson(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("submit_dir: expected a string"), std::string::npos)
      << refused.status().message();
}

TEST(AgentProtocolTest, LaunchCarriesTheUnixIdentityAndReportsMayBeLost) {
  TaskLaunch l = Launch();
  l.uid = 200'001;
  l.gid = 200'002;
  StatusOr<TaskLaunch> back = TaskLaunchFromJson(Wire(ToJson(l)));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->uid, 200'001);
  EXPECT_EQ(back->gid, 200'002);
  Json old = ToJson(l);
  old.erase("uid");
  old.erase("gid");
  StatusOr<TaskLaunch> plain = TaskLaunchFromJson(old);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->uid, -1) << "an older controller's launch names no identity";
  Json bad = ToJson(l);
  bad["uid"] = -5;
  EXPECT_NE(TaskLaunchFromJson(bad).status().message().find("uid"), std::string::npos);

  TaskReport lost;
  lost.key = TaskKey{1, 0, 1};
  lost.state = TaskState::kLost;
  lost.message = "the agent stopped and killed it";
  StatusOr<TaskReport> r = TaskReportFromJson(Wire(ToJson(lost)));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->state, TaskState::kLost);
  EXPECT_EQ(ToJson(lost)["state"], "lost");
}

TEST(AgentProtocolTest, LaunchCarriesThePtySecretAndReportsItsPort) {
  TaskLaunch l = Launch();
  EXPECT_FALSE(ToJson(l).contains("pty_secret"));  // no terminal: as before
  l.pty_secret = "0123abcd";
  StatusOr<TaskLaunch> back = TaskLaunchFromJson(Wire(ToJson(l)));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->pty_secret, "0123abcd");
  EXPECT_EQ(*back, l);

  TaskReport r;
  r.key = TaskKey{4, 0, 1};
  EXPECT_FALSE(ToJson(r).contains("pty_port"));
  r.pty_port = 40001;
  StatusOr<TaskReport> report = TaskReportFromJson(Wire(ToJson(r)));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->pty_port, 40001);
  Json bad = ToJson(r);
  bad["pty_port"] = 70000;
  EXPECT_NE(TaskReportFromJson(bad).status().message().find("pty_port"), std::string::npos);
}

TEST(AgentProtocolTest, TaskKeysHashAndPrint) {
  std::unordered_set<TaskKey> keys = {{1, 0, 0}, {1, 1, 0}, {1, 0, 1}, {1, 0, 0}};
  EXPECT_EQ(keys.size(), 3U);
  EXPECT_EQ(ToString(TaskKey{42, 1, 0}), "job 42 task 1 attempt 0");
  EXPECT_EQ(TaskKeyFromJson(Json{{"job", 18446744073709551615ULL}, {"task", 2}})->job,
            18446744073709551615ULL);
  EXPECT_EQ(TaskKeyFromJson(Json{{"job", 1}, {"task", 2}})->attempt, 0);
}

TEST(AgentProtocolTest, Base64) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(*Base64Decode("Zm9vYg=="), "foob");
  EXPECT_EQ(*Base64Decode("Zm9vYmE="), "fooba");
  std::string all;
  for (int i = 0; i < 256; ++i) {
    all += static_cast<char>(i);
  }
  EXPECT_EQ(*Base64Decode(Base64Encode(all)), all);
  for (const char* bad : {"Zg=", "Z===", "Zg=a", "Zm9v!A==", "=Zg=", "Zg==Zg=="}) {
    EXPECT_FALSE(Base64Decode(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace tessera
