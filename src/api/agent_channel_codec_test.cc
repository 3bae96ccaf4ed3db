#include "api/agent_channel_codec.h"

#include <gtest/gtest.h>

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "api/job_codec.h"
#include "api/json_fields.h"
#include "api/testing/heartbeat_samples.h"

namespace tessera {

namespace {


// Through bytes, as on the stream.
template <typename M>
M Wire(const M& m) {
  std::string bytes;
  EXPECT_TRUE(m.SerializeToString(&bytes));
  M out;
  EXPECT_TRUE(out.ParseFromString(bytes));
  return out;
}

// Fails the test for each field of `m` (and of the messages in it) left at its default:
// the values above set every field, and ToProto writes every one.
void ExpectEveryFieldSet(const google::protobuf::Message& m, const std::string& path) {
  const google::protobuf::Descriptor* d = m.GetDescriptor();
  const google::protobuf::Reflection* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    const std::string at = path + "." + f->name();
    if (f->is_map()) {
      EXPECT_GT(r->FieldSize(m, f), 0) << at;
    } else if (f->is_repeated()) {
      EXPECT_GT(r->FieldSize(m, f), 0) << at;
      if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
        for (int k = 0; k < r->FieldSize(m, f); ++k) {
          ExpectEveryFieldSet(r->GetRepeatedMessage(m, f, k), at + "[" + std::to_string(k) + "]");
        }
      }
    } else {
      EXPECT_TRUE(r->HasField(m, f)) << at << " is not set";
      if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE &&
          r->HasField(m, f)) {
        ExpectEveryFieldSet(r->GetMessage(m, f), at);
      }
    }
  }
}

TEST(AgentChannelCodec, EveryFieldIsWritten) {
  ExpectEveryFieldSet(ToProto(FullHeartbeatRequest()), "request");
  ExpectEveryFieldSet(ToProto(FullHeartbeatResponse()), "response");
}

TEST(AgentChannelCodec, RequestRoundTrip) {
  const HeartbeatRequest in = FullHeartbeatRequest();
  StatusOr<HeartbeatRequest> out = FromProto(Wire(ToProto(in)));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, in);
}

TEST(AgentChannelCodec, ResponseRoundTrip) {
  const HeartbeatResponse in = FullHeartbeatResponse();
  StatusOr<HeartbeatResponse> out = FromProto(Wire(ToProto(in)));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, in);
}

TEST(AgentChannelCodec, DefaultsRoundTrip) {
  // Zeros are not written in proto3, and -1s are: both come back.
  HeartbeatRequest req;
  req.node = "n";
  req.agent_id = "a";
  req.tasks.emplace_back();
  req.gpus.emplace_back();
  req.gpus[0].mig.push_back(MigTelemetry{"MIG-x", "", -1, -1, 0, 0});
  StatusOr<HeartbeatRequest> r = FromProto(Wire(ToProto(req)));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, req);

  HeartbeatResponse resp;
  resp.launch.emplace_back();
  resp.launch[0].command = {"true"};
  resp.launch[0].mig.push_back(MigRequest{0, "1g.10gb", -1});
  resp.stop.emplace_back();
  resp.stop[0].grace_ms = 0;  // at once: not the default's 30 s
  StatusOr<HeartbeatResponse> s = FromProto(Wire(ToProto(resp)));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(*s, resp);
  EXPECT_EQ(s->launch[0].uid, -1);
  EXPECT_EQ(s->stop[0].grace_ms, 0);
}

TEST(AgentChannelCodec, AbsentOptionalFieldsTakeTheStructDefaults) {
  channel::HeartbeatResponse p;
  channel::TaskLaunch* l = p.add_launch();
  l->mutable_key()->set_job(1);
  l->mutable_key()->set_task(0);
  l->add_command("true");
  l->add_mig()->set_gpu(0);
  l->mutable_mig(0)->set_profile("1g.10gb");
  channel::TaskStop* s = p.add_stop();
  s->mutable_key()->set_job(1);
  s->mutable_key()->set_task(0);
  StatusOr<HeartbeatResponse> r = FromProto(p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->launch[0].uid, -1);
  EXPECT_EQ(r->launch[0].gid, -1);
  EXPECT_EQ(r->launch[0].mig[0].start, -1);
  EXPECT_EQ(r->stop[0].grace_ms, TaskStop{}.grace_ms);
  EXPECT_EQ(r->stop[0].signal, TaskStop{}.signal);
}

// The same struct through the channel's codec and through JSON (as the HTTP heartbeat
// carries it) comes back the same.
template <typename T, typename FromJson>
void ExpectTransportsAgree(const T& in, FromJson from_json) {
  StatusOr<T> via_proto = FromProto(Wire(ToProto(in)));
  StatusOr<T> via_json = from_json(Json::parse(DumpJson(ToJson(in))));
  ASSERT_TRUE(via_proto.ok()) << via_proto.status().ToString();
  ASSERT_TRUE(via_json.ok()) << via_json.status().ToString();
  EXPECT_EQ(*via_proto, *via_json);
}

TEST(AgentChannelCodec, AgreesWithTheJsonCodec) {
  ExpectTransportsAgree(FullHeartbeatRequest(), HeartbeatRequestFromJson);
  ExpectTransportsAgree(FullHeartbeatResponse(), HeartbeatResponseFromJson);
  // Text that is not UTF-8 is repaired the same way by both.
  HeartbeatRequest bad_text = FullHeartbeatRequest();
  bad_text.tasks[0].message = "bad \xc3\x28 byte \xff";
  bad_text.gpus[0].uuid = "GPU-\xe2\x82";
  ExpectTransportsAgree(bad_text, HeartbeatRequestFromJson);
  HeartbeatResponse bad_launch = FullHeartbeatResponse();
  bad_launch.launch[0].command.push_back("\xff\xfe");
  bad_launch.launch[0].env["X"] = "v\x80";
  ExpectTransportsAgree(bad_launch, HeartbeatResponseFromJson);
  // Nothing but what is required; and a pty_port or interval below zero is left out by both.
  HeartbeatRequest minimal;
  minimal.node = "n";
  minimal.agent_id = "a";
  ExpectTransportsAgree(minimal, HeartbeatRequestFromJson);
  HeartbeatRequest negative_port = FullHeartbeatRequest();
  negative_port.tasks[0].pty_port = -1;
  ExpectTransportsAgree(negative_port, HeartbeatRequestFromJson);
  HeartbeatResponse empty;
  empty.heartbeat_interval_ms = -5;
  ExpectTransportsAgree(empty, HeartbeatResponseFromJson);
}

// ---- refusals ------------------------------------------------------------------------

struct Refusal {
  std::string field;  // the error names it: "tasks[0].key.task"
  std::function<void(channel::HeartbeatRequest&)> spoil;
};

struct ResponseRefusal {
  std::string field;
  std::function<void(channel::HeartbeatResponse&)> spoil;
};

void ExpectRefused(const Status& s, const std::string& field) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << field << ": " << s.ToString();
  EXPECT_NE(s.message().find(field + ":"), std::string::npos) << s.message();
}

// Checks of a report and of the request around it.
std::vector<Refusal> ReportRefusals() {
  using R = channel::HeartbeatRequest;
  auto task = [](R& r) { return r.mutable_tasks(0); };
  return {
      {"node", [](R& r) { r.clear_node(); }},
      {"node", [](R& r) { r.set_node(std::string(257, 'n')); }},
      {"node", [](R& r) { r.set_node(std::string("a\0b", 3)); }},
      {"node", [](R& r) { r.set_node("bad \xff"); }},
      {"agent_id", [](R& r) { r.clear_agent_id(); }},
      {"tasks[0].key", [=](R& r) { task(r)->clear_key(); }},
      {"tasks[0].key.job", [=](R& r) { task(r)->mutable_key()->clear_job(); }},
      {"tasks[0].key.task", [=](R& r) { task(r)->mutable_key()->clear_task(); }},
      {"tasks[0].key.task", [=](R& r) { task(r)->mutable_key()->set_task(-1); }},
      {"tasks[0].key.attempt", [=](R& r) { task(r)->mutable_key()->set_attempt(-1); }},
      {"tasks[0].state", [=](R& r) { task(r)->set_state(channel::TASK_STATE_UNSPECIFIED); }},
      {"tasks[0].state", [=](R& r) { task(r)->set_state(static_cast<channel::TaskState>(9)); }},
      {"tasks[0].signal", [=](R& r) { task(r)->set_signal(129); }},
      {"tasks[0].signal", [=](R& r) { task(r)->set_signal(-1); }},
      {"tasks[0].message", [=](R& r) { task(r)->set_message(std::string(64 * 1024 + 1, 'm')); }},
      {"tasks[0].message", [=](R& r) { task(r)->set_message(std::string("\0", 1)); }},
      {"tasks[0].log_offset", [=](R& r) { task(r)->set_log_offset(-1); }},
      {"tasks[0].log_chunk",
       [=](R& r) { task(r)->set_log_chunk(std::string(16 * kMaxLogChunkBytes + 1, 'x')); }},
      {"tasks[0].pty_port", [=](R& r) { task(r)->set_pty_port(65536); }},
      {"tasks[4].key", [](R& r) { r.add_tasks(); }},
      {"tasks",
       [](R& r) {
         r.mutable_tasks()->Reserve(65537);
         while (r.tasks_size() <= 65536) r.add_tasks();
       }},
  };
}

// Checks of GPU telemetry.
std::vector<Refusal> TelemetryRefusals() {
  using R = channel::HeartbeatRequest;
  auto gpu = [](R& r) { return r.mutable_gpus(0); };
  auto mig = [](R& r) { return r.mutable_gpus(0)->mutable_mig(0); };
  return {
      {"gpus",
       [](R& r) {
         while (r.gpus_size() <= 64) r.add_gpus()->set_index(0);
       }},
      {"gpus[0].index", [=](R& r) { gpu(r)->clear_index(); }},
      {"gpus[0].index", [=](R& r) { gpu(r)->set_index(1024); }},
      {"gpus[0].uuid", [=](R& r) { gpu(r)->set_uuid(std::string(257, 'u')); }},
      {"gpus[0].util_pct", [=](R& r) { gpu(r)->set_util_pct(101); }},
      {"gpus[0].fb_used_mib", [=](R& r) { gpu(r)->set_fb_used_mib(-1); }},
      {"gpus[0].fb_free_mib", [=](R& r) { gpu(r)->set_fb_free_mib(-1); }},
      {"gpus[0].temp_c", [=](R& r) { gpu(r)->set_temp_c(-274); }},
      {"gpus[0].temp_c", [=](R& r) { gpu(r)->set_temp_c(1001); }},
      {"gpus[0].power_mw", [=](R& r) { gpu(r)->set_power_mw(-1); }},
      {"gpus[0].sm_clock_mhz", [=](R& r) { gpu(r)->set_sm_clock_mhz(-1); }},
      {"gpus[0].xid_count", [=](R& r) { gpu(r)->set_xid_count(-1); }},
      {"gpus[0].last_xid", [=](R& r) { gpu(r)->set_last_xid(-1); }},
      {"gpus[0].ecc_sbe_volatile", [=](R& r) { gpu(r)->set_ecc_sbe_volatile(-1); }},
      {"gpus[0].ecc_dbe_volatile", [=](R& r) { gpu(r)->set_ecc_dbe_volatile(-1); }},
      {"gpus[0].ecc_sbe_aggregate", [=](R& r) { gpu(r)->set_ecc_sbe_aggregate(-1); }},
      {"gpus[0].ecc_dbe_aggregate", [=](R& r) { gpu(r)->set_ecc_dbe_aggregate(-1); }},
      {"gpus[0].mig",
       [=](R& r) {
         while (gpu(r)->mig_size() <= 16) gpu(r)->add_mig();
       }},
      {"gpus[0].mig[0].uuid", [=](R& r) { mig(r)->clear_uuid(); }},
      {"gpus[0].mig[0].profile", [=](R& r) { mig(r)->set_profile(std::string(65, 'p')); }},
      {"gpus[0].mig[0].start", [=](R& r) { mig(r)->set_start(8); }},
      {"gpus[0].mig[0].start", [=](R& r) { mig(r)->set_start(-2); }},
      {"gpus[0].mig[0].gi_id", [=](R& r) { mig(r)->set_gi_id(-2); }},
      {"gpus[0].mig[0].fb_used_mib", [=](R& r) { mig(r)->set_fb_used_mib(-1); }},
      {"gpus[0].mig[0].fb_free_mib", [=](R& r) { mig(r)->set_fb_free_mib(-1); }},
  };
}

// Checks of a launch's key, command and environment.
std::vector<ResponseRefusal> LaunchRefusals() {
  using R = channel::HeartbeatResponse;
  auto launch = [](R& r) { return r.mutable_launch(0); };
  return {
      {"launch[0].key", [=](R& r) { launch(r)->clear_key(); }},
      {"launch[0].key.job", [=](R& r) { launch(r)->mutable_key()->clear_job(); }},
      {"launch[0].job_name", [=](R& r) { launch(r)->set_job_name(std::string(257, 'j')); }},
      // Only a launch in an image may leave its command to the image.
      {"launch[0].command",
       [=](R& r) {
         launch(r)->clear_command();
         launch(r)->clear_container();
       }},
      {"launch[0].container.image", [=](R& r) { launch(r)->mutable_container()->set_image("A"); }},
      {"launch[0].container.mounts[0]",
       [=](R& r) { launch(r)->mutable_container()->set_mounts(0, "/x:/proc"); }},
      {"launch[0].command[1]", [=](R& r) { launch(r)->set_command(1, ""); }},
      {"launch[0].command[0]", [=](R& r) { launch(r)->set_command(0, "bad \xc0"); }},
      {"launch[0].command",
       [=](R& r) {
         while (launch(r)->command_size() <= 4096) launch(r)->add_command("x");
       }},
      {"launch[0].command",
       [=](R& r) {
         launch(r)->add_command(std::string(40 * 1024, 'a'));
         launch(r)->add_command(std::string(40 * 1024, 'b'));
       }},
      {"launch[0].env", [=](R& r) { (*launch(r)->mutable_env())["1BAD"] = "x"; }},
      {"launch[0].env", [=](R& r) { (*launch(r)->mutable_env())["A-B"] = "x"; }},
      {"launch[0].env.BIG",
       [=](R& r) { (*launch(r)->mutable_env())["BIG"] = std::string((1 << 20) + 1, 'v'); }},
      {"launch[0].env",
       [=](R& r) {
         (*launch(r)->mutable_env())["HALF1"] = std::string(1 << 19, 'v');
         (*launch(r)->mutable_env())["HALF2"] = std::string(1 << 19, 'v');
       }},
      {"launch[0].env.NUL",
       [=](R& r) { (*launch(r)->mutable_env())["NUL"] = std::string(1, '\0'); }},
  };
}

// Checks of a launch's resources, directories and identity, of stops and of the answer.
std::vector<ResponseRefusal> ResourceRefusals() {
  using R = channel::HeartbeatResponse;
  auto launch = [](R& r) { return r.mutable_launch(0); };
  auto stop = [](R& r) { return r.mutable_stop(0); };
  const std::string long_path(kMaxPathLength + 1, 'd');
  return {
      {"launch[0].gpus[1]", [=](R& r) { launch(r)->set_gpus(1, 1024); }},
      {"launch[0].gpus[0]", [=](R& r) { launch(r)->set_gpus(0, -1); }},
      {"launch[0].gpus",
       [=](R& r) {
         while (launch(r)->gpus_size() <= 64) launch(r)->add_gpus(0);
       }},
      {"launch[0].mig[0].gpu", [=](R& r) { launch(r)->mutable_mig(0)->clear_gpu(); }},
      {"launch[0].mig[0].gpu", [=](R& r) { launch(r)->mutable_mig(0)->set_gpu(1024); }},
      {"launch[0].mig[0].profile", [=](R& r) { launch(r)->mutable_mig(0)->clear_profile(); }},
      {"launch[0].mig[0].start", [=](R& r) { launch(r)->mutable_mig(0)->set_start(8); }},
      {"launch[0].mig",
       [=](R& r) {
         while (launch(r)->mig_size() <= 64) launch(r)->add_mig();
       }},
      {"launch[0].cpu_milli", [=](R& r) { launch(r)->set_cpu_milli(-1); }},
      {"launch[0].memory_mib", [=](R& r) { launch(r)->set_memory_mib(-1); }},
      {"launch[0].gpu_milli", [=](R& r) { launch(r)->set_gpu_milli(1001); }},
      {"launch[0].gpu_memory_mib", [=](R& r) { launch(r)->set_gpu_memory_mib(-1); }},
      {"launch[0].numa_nodes[0]", [=](R& r) { launch(r)->set_numa_nodes(0, 64); }},
      {"launch[0].numa_nodes",
       [=](R& r) {
         while (launch(r)->numa_nodes_size() <= 64) launch(r)->add_numa_nodes(0);
       }},
      {"launch[0].working_dir", [=](R& r) { launch(r)->set_working_dir(long_path); }},
      {"launch[0].checkpoint_dir", [=](R& r) { launch(r)->set_checkpoint_dir(long_path); }},
      {"launch[0].submit_dir", [=](R& r) { launch(r)->set_submit_dir(long_path); }},
      {"launch[0].uid", [=](R& r) { launch(r)->set_uid(-2); }},
      {"launch[0].uid", [=](R& r) { launch(r)->set_uid(4'294'967'295); }},
      {"launch[0].gid", [=](R& r) { launch(r)->set_gid(-2); }},
      {"launch[0].pty_secret", [=](R& r) { launch(r)->set_pty_secret(std::string(257, 's')); }},
      {"launch",
       [](R& r) {
         while (r.launch_size() <= 65536) r.add_launch();
       }},
      {"stop[0].key.task", [=](R& r) { stop(r)->mutable_key()->clear_task(); }},
      {"stop[0].grace_ms", [=](R& r) { stop(r)->set_grace_ms(-1); }},
      {"stop[0].grace_ms", [=](R& r) { stop(r)->set_grace_ms(int64_t{7} * 24 * 3600 * 1000 + 1); }},
      {"stop[0].signal", [=](R& r) { stop(r)->set_signal(0); }},
      {"stop[0].signal", [=](R& r) { stop(r)->set_signal(65); }},
      {"stop",
       [](R& r) {
         while (r.stop_size() <= 65536) r.add_stop();
       }},
      {"heartbeat_interval_ms", [](R& r) { r.set_heartbeat_interval_ms(-1); }},
      {"heartbeat_interval_ms", [](R& r) { r.set_heartbeat_interval_ms(3'600'001); }},
  };
}

TEST(AgentChannelCodec, RefusesBadRequests) {
  std::vector<Refusal> cases = ReportRefusals();
  for (Refusal& r : TelemetryRefusals()) {
    cases.push_back(std::move(r));
  }
  for (const Refusal& c : cases) {
    channel::HeartbeatRequest p = ToProto(FullHeartbeatRequest());
    c.spoil(p);
    StatusOr<HeartbeatRequest> out = FromProto(p);
    ASSERT_FALSE(out.ok()) << c.field << " was taken";
    ExpectRefused(out.status(), c.field);
  }
}

TEST(AgentChannelCodec, RefusesBadResponses) {
  std::vector<ResponseRefusal> cases = LaunchRefusals();
  for (ResponseRefusal& r : ResourceRefusals()) {
    cases.push_back(std::move(r));
  }
  for (const ResponseRefusal& c : cases) {
    channel::HeartbeatResponse p = ToProto(FullHeartbeatResponse());
    c.spoil(p);
    StatusOr<HeartbeatResponse> out = FromProto(p);
    ASSERT_FALSE(out.ok()) << c.field << " was taken";
    ExpectRefused(out.status(), c.field);
  }
}

// What a struct can say wrongly, both codecs refuse, naming the same field.
TEST(AgentChannelCodec, RefusesWhatTheJsonCodecRefuses) {
  std::vector<std::pair<std::string, std::function<void(HeartbeatRequest&)>>> requests = {
      {"tasks[0].key.task", [](HeartbeatRequest& r) { r.tasks[0].key.task = -1; }},
      {"tasks[0].signal", [](HeartbeatRequest& r) { r.tasks[0].signal = 200; }},
      {"tasks[0].message", [](HeartbeatRequest& r) { r.tasks[0].message = std::string(2, '\0'); }},
      {"gpus[0].util_pct", [](HeartbeatRequest& r) { r.gpus[0].util_pct = 101; }},
      {"gpus[0].mig[1].start", [](HeartbeatRequest& r) { r.gpus[0].mig[1].start = 8; }},
      {"node", [](HeartbeatRequest& r) { r.node.clear(); }},
  };
  for (const auto& [field, spoil] : requests) {
    HeartbeatRequest bad = FullHeartbeatRequest();
    spoil(bad);
    StatusOr<HeartbeatRequest> via_proto = FromProto(ToProto(bad));
    StatusOr<HeartbeatRequest> via_json = HeartbeatRequestFromJson(ToJson(bad));
    ASSERT_FALSE(via_proto.ok()) << field;
    ASSERT_FALSE(via_json.ok()) << field;
    ExpectRefused(via_proto.status(), field);
    ExpectRefused(via_json.status(), field);
  }
  std::vector<std::pair<std::string, std::function<void(HeartbeatResponse&)>>> responses = {
      {"launch[0].command",
       [](HeartbeatResponse& r) {
         r.launch[0].command.clear();
         r.launch[0].container = {};
       }},
      {"launch[0].gpu_milli", [](HeartbeatResponse& r) { r.launch[0].gpu_milli = 1001; }},
      {"launch[0].uid", [](HeartbeatResponse& r) { r.launch[0].uid = -7; }},
      {"launch[0].mig[0].profile",
       [](HeartbeatResponse& r) { r.launch[0].mig[0].profile.clear(); }},
      {"stop[0].signal", [](HeartbeatResponse& r) { r.stop[0].signal = 0; }},
      {"stop[0].grace_ms", [](HeartbeatResponse& r) { r.stop[0].grace_ms = -1; }},
  };
  for (const auto& [field, spoil] : responses) {
    HeartbeatResponse bad = FullHeartbeatResponse();
    spoil(bad);
    StatusOr<HeartbeatResponse> via_proto = FromProto(ToProto(bad));
    StatusOr<HeartbeatResponse> via_json = HeartbeatResponseFromJson(ToJson(bad));
    ASSERT_FALSE(via_proto.ok()) << field;
    ASSERT_FALSE(via_json.ok()) << field;
    ExpectRefused(via_proto.status(), field);
    ExpectRefused(via_json.status(), field);
  }
}

}  // namespace
}  // namespace tessera
