// The controller <-> node agent protocol: JSON messages over HTTP, and the agent channel
// (api/agent_channel.proto), a stream that carries the same heartbeats as protobuf
// messages (their codec, api/agent_channel_codec.h, checks what this one checks) and
// pushes launches and stops the moment they are durable. The bounds both codecs check
// are in api/agent_protocol_limits.h.
//
//   agent -> controller  POST register   RegisterRequest  -> RegisterResponse
//   agent -> controller  POST heartbeat  HeartbeatRequest -> HeartbeatResponse
//                        (or the channel, when RegisterResponse names its port)
//
// The agent registers with its inventory and the tasks it still runs (after a restart
// of either side), then heartbeats every heartbeat_interval_ms with the state of its
// tasks and new log output; the controller answers with tasks to launch and to stop,
// or asks it to register again (it lost the agent's state). A task attempt is named by
// TaskKey {job, task index, attempt}; reports for an older attempt are stale.
//
// Encoding (field names as in the structs unless noted):
//   NodeInventory  {"name", "cpu_milli", "memory_mib", "numa_nodes", "labels": {k: v},
//                   "gpus": [{"model": "H100-80GB", "mode": "exclusive|mig|shared|timeslice",
//                             "replicas" (timeslice only, 2..64), "numa_node",
//                             "nvlink_domain", "uuid",
//                             "mig_instances": [{"uuid", "profile", "start"}]}]}
//   TaskKey        {"job", "task", "attempt"}
//   TaskReport     {"key", "state": "running|exited|failed_to_start|lost", "exit_code", "signal",
//                   "checkpointed", "message", "log_offset", "log_b64", "pty_port"}: the log
//                   chunk is raw bytes (process output need not be UTF-8), so it travels in
//                   base64; pty_port only when the task has a terminal.
//   GpuTelemetry   {"index", "uuid", "lost", "util_pct", "fb_used_mib", "fb_free_mib", "temp_c",
//                   "power_mw", "sm_clock_mhz", "xid_count", "last_xid", "ecc_sbe_volatile",
//                   "ecc_dbe_volatile", "ecc_sbe_aggregate", "ecc_dbe_aggregate",
//                   "mig": [{"uuid", "profile", "start", "gi_id", "fb_used_mib", "fb_free_mib"}]}
//                   in HeartbeatRequest "gpus" (left out when there is no new sample).
//   TaskLaunch, TaskStop, MigRequest, Register*, Heartbeat*: plain fields; lists as arrays.
//
// FromJson functions check types and ranges and return InvalidArgument naming the field
// ("tasks[1].key.job: expected a non-negative integer, got -1"). Unknown keys are
// ignored, so that a newer peer may add fields; fields left out take the struct's
// default, except the ones that identify something (keys, names, models), which are
// required. Labels come back sorted by key. ToJson never throws: text fields that may
// hold arbitrary bytes (messages) are made valid UTF-8.
// Thread safety: values and pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "api/container_spec.h"
#include "base/status.h"
#include "model/gpu_catalog.h"
#include "model/node.h"

namespace tessera {

// Recommended largest log chunk per report; FromJson refuses chunks over 16 times this.
inline constexpr size_t kMaxLogChunkBytes = 1 << 20;

struct NodeMigInstance {
  std::string uuid;
  std::string profile;
  int start = -1;  // first memory slot; -1: unknown
  bool operator==(const NodeMigInstance&) const = default;
};

struct NodeInventory {
  NodeSpec spec;  // GPUs encoded by model NAME, mode name, numa_node, nvlink_domain
  std::vector<std::string> gpu_uuids;  // parallel to spec.gpus
  std::vector<std::vector<NodeMigInstance>>
      mig_instances;  // parallel to spec.gpus: existing instances
};
bool operator==(const NodeInventory& a, const NodeInventory& b);

struct TaskKey {
  uint64_t job = 0;
  int task = 0;
  int attempt = 0;
  bool operator==(const TaskKey&) const = default;
};
// "job 42 task 1 attempt 0"
std::string ToString(const TaskKey& key);

// kLost: the task is gone and how it ended is not known (its agent killed it when it
// stopped, fenced it after losing the controller, or its supervisor was killed); the
// controller requeues the job as it does for a lost node.
enum class TaskState : uint8_t { kRunning, kExited, kFailedToStart, kLost };
std::string_view TaskStateName(TaskState state);
StatusOr<TaskState> ParseTaskState(std::string_view name);

struct TaskReport {
  TaskKey key;
  TaskState state = TaskState::kRunning;
  int exit_code = 0;          // when exited
  int signal = 0;             // when exited (signal != 0: killed by it)
  bool checkpointed = false;  // the task reported a checkpoint since its preemption signal
  std::string message;        // e.g. why it failed to start
  int64_t log_offset = 0;     // offset of log_chunk in the task's output
  std::string log_chunk;      // new output since log_offset (raw bytes)
  int pty_port = 0;           // the task's terminal listens here (agent/launch/pty_relay.h);
                              // 0: none
  bool operator==(const TaskReport&) const = default;
};

struct MigRequest {
  int gpu = -1;  // GPU index on the node
  std::string profile;
  int start = -1;  // first memory slot; -1: the agent's choice
  bool operator==(const MigRequest&) const = default;
};

struct TaskLaunch {
  TaskKey key;
  std::string job_name;
  std::vector<std::string> command;
  std::map<std::string, std::string>
      env;                      // env set by the controller (torchrun, TESSERA_*, MPS limits)
  std::vector<int> gpus;        // GPU indices on the node, whole cards or the card of a share
  std::vector<MigRequest> mig;  // MIG instances to create (CUDA_VISIBLE_DEVICES gets their UUIDs)
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int64_t gpu_milli = 0;        // per GPU; 1000 for whole cards
  int64_t gpu_memory_mib = 0;   // per GPU; 0: no cap
  std::vector<int> numa_nodes;  // for CPU affinity
  std::string working_dir;
  std::string checkpoint_dir;
  // The controller chose checkpoint_dir (its checkpoint root and the job id): the agent
  // may make it as root for the task. A directory the job's spec named is made and
  // touched only with the task's own identity.
  bool checkpoint_managed = false;
  // Where the job was submitted from (absolute; "": unknown): the default working
  // directory when it exists on the node and working_dir is not given.
  std::string submit_dir;
  // The Unix identity the task runs as (the tenant's); -1: the agent's own (an agent
  // that is root refuses that, and uid 0, unless its admin allows root tasks).
  int64_t uid = -1;
  int64_t gid = -1;
  // Non-empty: the task runs on a pseudo-terminal that a client sending this secret may
  // attach to (`tessera run --pty`, agent/launch/pty_relay.h). Made by the controller.
  std::string pty_secret;
  // Non-empty: the task runs in this image (agent/runtime/container_runtime.h); an empty
  // command then runs the image's own.
  ContainerSpec container;
  // A Podman auth file with the tenant's credential for the image's registry ("":
  // none); the agent uses it for the pull alone and never records it.
  std::string registry_auth;
  bool operator==(const TaskLaunch&) const = default;
};

struct TaskStop {
  TaskKey key;
  int64_t grace_ms = 30000;  // then SIGKILL
  int signal = 15;
  bool operator==(const TaskStop&) const = default;
};

// What the agent reads off one GPU (NVML, or the fake source) for the controller's
// /metrics (DCGM exporter names) and its health checks. Counters count since the
// agent started; the controller notices increases. Decoding requires "index" and each
// MIG instance's "uuid"; util_pct is 0..100, memory, power, clock and counters are
// non-negative; a lost GPU carries zero readings.
struct MigTelemetry {
  std::string uuid;     // "MIG-..."
  std::string profile;  // catalog profile name, e.g. "3g.40gb"
  int start = -1;       // first memory slot (matches the controller's grant)
  int gi_id = -1;       // NVML's GPU instance id (DCGM's GPU_I_ID)
  int64_t fb_used_mib = 0;
  int64_t fb_free_mib = 0;
  bool operator==(const MigTelemetry&) const = default;
};

struct GpuTelemetry {
  int index = 0;          // GPU index on the node (as in the inventory)
  std::string uuid;
  bool lost = false;      // the driver cannot reach the GPU (fell off the bus, ...)
  int util_pct = 0;       // 0..100
  int64_t fb_used_mib = 0;
  int64_t fb_free_mib = 0;
  int temp_c = 0;
  int64_t power_mw = 0;
  int sm_clock_mhz = 0;
  int64_t xid_count = 0;  // XID events seen since the agent started
  int last_xid = 0;       // the last one's code; 0: none yet
  int64_t ecc_sbe_volatile = 0;  // corrected (single-bit) errors since the driver loaded
  int64_t ecc_dbe_volatile = 0;  // uncorrected (double-bit) errors since the driver loaded
  int64_t ecc_sbe_aggregate = 0;  // over the card's life
  int64_t ecc_dbe_aggregate = 0;
  std::vector<MigTelemetry> mig;  // MIG instances, ascending start
  bool operator==(const GpuTelemetry&) const = default;
};

struct RegisterRequest {
  std::string agent_id;  // stable per agent process start
  NodeInventory inventory;
  std::vector<TaskReport> tasks;  // tasks the agent still runs
};

struct RegisterResponse {
  std::string node;  // the name the controller knows the node by
  int64_t heartbeat_interval_ms = 1000;
  // The controller declares the node lost after this long without a heartbeat. The
  // agent kills its tasks itself before then when it cannot reach the controller
  // (AgentLease), so a lost node's work never runs twice. 0: no fencing.
  int64_t node_timeout_ms = 0;
  // The node's credential, only in the answer to a name's first registration (with the
  // join token); "" otherwise. The agent keeps it (<data_dir>/node.credential, 0600)
  // and sends it as its bearer token from then on; the controller keeps its hash only.
  std::string credential;
  // The agent channel's port on the controller's host (api/agent_channel.proto): the
  // agent opens its stream there. 0: no channel; the agent heartbeats over HTTP.
  int64_t channel_port = 0;
  bool operator==(const RegisterResponse&) const = default;
};

struct HeartbeatRequest {
  std::string node;
  std::string agent_id;
  std::vector<TaskReport> tasks;
  std::vector<GpuTelemetry> gpus;  // empty: no new sample this heartbeat
  bool operator==(const HeartbeatRequest&) const = default;
};

struct HeartbeatResponse {
  std::vector<TaskLaunch> launch;
  std::vector<TaskStop> stop;
  bool reregister = false;  // the controller does not know this agent: register again
  // In answers: the interval from now on (the controller stretches it as its fleet
  // grows). 0: unchanged (pushes, older controllers).
  int64_t heartbeat_interval_ms = 0;
  bool operator==(const HeartbeatResponse&) const = default;
};

nlohmann::json ToJson(const NodeMigInstance& m);
nlohmann::json ToJson(const NodeInventory& inventory, const GpuCatalog& catalog);
nlohmann::json ToJson(const TaskKey& key);
nlohmann::json ToJson(const TaskReport& report);
nlohmann::json ToJson(const MigRequest& mig);
nlohmann::json ToJson(const TaskLaunch& launch);
nlohmann::json ToJson(const TaskStop& stop);
nlohmann::json ToJson(const MigTelemetry& m);
nlohmann::json ToJson(const GpuTelemetry& t);
nlohmann::json ToJson(const RegisterRequest& request, const GpuCatalog& catalog);
nlohmann::json ToJson(const RegisterResponse& response);
nlohmann::json ToJson(const HeartbeatRequest& request);
nlohmann::json ToJson(const HeartbeatResponse& response);

StatusOr<NodeInventory> NodeInventoryFromJson(const nlohmann::json& j, const GpuCatalog& catalog);
StatusOr<TaskKey> TaskKeyFromJson(const nlohmann::json& j);
StatusOr<TaskReport> TaskReportFromJson(const nlohmann::json& j);
StatusOr<TaskLaunch> TaskLaunchFromJson(const nlohmann::json& j);
StatusOr<TaskStop> TaskStopFromJson(const nlohmann::json& j);
StatusOr<MigTelemetry> MigTelemetryFromJson(const nlohmann::json& j);
StatusOr<GpuTelemetry> GpuTelemetryFromJson(const nlohmann::json& j);
StatusOr<RegisterRequest> RegisterRequestFromJson(const nlohmann::json& j,
                                                  const GpuCatalog& catalog);
StatusOr<RegisterResponse> RegisterResponseFromJson(const nlohmann::json& j);
StatusOr<HeartbeatRequest> HeartbeatRequestFromJson(const nlohmann::json& j);
StatusOr<HeartbeatResponse> HeartbeatResponseFromJson(const nlohmann::json& j);

// Base64 (RFC 4648, with padding), as used for log chunks.
std::string Base64Encode(std::string_view bytes);
StatusOr<std::string> Base64Decode(std::string_view text);

}  // namespace tessera

template <>
struct std::hash<tessera::TaskKey> {
  size_t operator()(const tessera::TaskKey& k) const noexcept {
    size_t h = std::hash<uint64_t>{}(k.job);
    h = h * 1'000'003 ^ std::hash<int>{}(k.task);
    return h * 1'000'003 ^ std::hash<int>{}(k.attempt);
  }
};
