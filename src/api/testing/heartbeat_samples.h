// Heartbeat values for the agent protocol's tests (the codecs, the agent's transports):
// every field of every struct set to something other than its default, and PrintTo so
// that a failure shows the structs as their JSON.
#pragma once

#include <ostream>
#include <string>

#include "api/agent_protocol.h"
#include "api/json_fields.h"

namespace tessera {

inline void PrintTo(const HeartbeatRequest& r, std::ostream* os) { *os << DumpJson(ToJson(r)); }
inline void PrintTo(const HeartbeatResponse& r, std::ostream* os) { *os << DumpJson(ToJson(r)); }

// Every field of every struct set to something other than its default.
inline HeartbeatRequest FullHeartbeatRequest() {
  HeartbeatRequest r;
  r.node = "node-a";
  r.agent_id = "agent-7";
  TaskReport exited;
  exited.key = {42, 3, 2};
  exited.state = TaskState::kExited;
  exited.exit_code = -3;
  exited.signal = 9;
  exited.checkpointed = true;
  exited.message = "killed";
  exited.log_offset = 4096;
  exited.log_chunk = std::string("step 1\n\xff\x00\x01 binary", 16);
  exited.pty_port = 40000;
  r.tasks.push_back(exited);
  for (TaskState s : {TaskState::kRunning, TaskState::kFailedToStart, TaskState::kLost}) {
    TaskReport other = exited;
    other.key.task += 1 + static_cast<int>(s);
    other.state = s;
    r.tasks.push_back(other);
  }
  GpuTelemetry g;
  g.index = 3;
  g.uuid = "GPU-3";
  g.lost = true;
  g.util_pct = 77;
  g.fb_used_mib = 1000;
  g.fb_free_mib = 2000;
  g.temp_c = -5;
  g.power_mw = 250'000;
  g.sm_clock_mhz = 1410;
  g.xid_count = 2;
  g.last_xid = 79;
  g.ecc_sbe_volatile = 1;
  g.ecc_dbe_volatile = 2;
  g.ecc_sbe_aggregate = 3;
  g.ecc_dbe_aggregate = 4;
  g.mig = {{"MIG-a", "3g.40gb", 4, 2, 10, 20}, {"MIG-b", "1g.10gb", 0, 9, 1, 2}};
  r.gpus = {g};
  return r;
}

inline HeartbeatResponse FullHeartbeatResponse() {
  HeartbeatResponse r;
  TaskLaunch l;
  l.key = {7, 1, 1};
  l.job_name = "train";
  l.command = {"python", "train.py"};
  l.env = {{"RANK", "0"}, {"WORLD_SIZE", "2"}};
  l.gpus = {0, 1};
  l.mig = {{1, "1g.10gb", 6}};
  l.cpu_milli = 4000;
  l.memory_mib = 8192;
  l.gpu_milli = 500;
  l.gpu_memory_mib = 20480;
  l.numa_nodes = {0, 1};
  l.working_dir = "/work";
  l.checkpoint_dir = "/ckpt/7";
  l.checkpoint_managed = true;
  l.submit_dir = "/home/u";
  l.uid = 1000;
  l.gid = 1001;
  l.pty_secret = "s3cret";
  l.container.image = "127.0.0.1:5000/team/img:v1";
  l.container.mounts = {{"/data", "/data", true}, {"/scratch/a", "/scratch", false}};
  l.container.workdir = "/workspace";
  l.container.entrypoint = {"python", "-u"};
  l.container.entrypoint_set = true;
  l.container.mount_home = false;
  l.registry_auth = R"({"auths": {"127.0.0.1:5000": {"auth": "YTpi"}}})";
  r.launch.push_back(l);
  TaskStop s;
  s.key = {8, 2, 5};
  s.grace_ms = 5000;
  s.signal = 2;
  r.stop.push_back(s);
  r.reregister = true;
  r.heartbeat_interval_ms = 2500;
  return r;
}

}  // namespace tessera
