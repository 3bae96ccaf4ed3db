#include "api/agent_channel_codec.h"

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include "api/agent_protocol_limits.h"
#include "api/job_codec.h"
#include "api/json_fields.h"

namespace tessera {
namespace {

using namespace agent_limits;  // NOLINT: the protocol's bounds, shared with the JSON codec

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
// As the JSON codec: its base64 text is bounded so that a chunk holds about this much.
constexpr size_t kMaxLogChunkOnWire = 16 * kMaxLogChunkBytes;

// ---- ToProto -------------------------------------------------------------------------

// A proto3 string must be UTF-8: invalid sequences are replaced, as ToJson does.
std::string Utf8(const std::string& s) { return IsValidUtf8(s) ? s : ToValidUtf8(s); }

channel::TaskState StateToProto(TaskState state) {
  switch (state) {
    case TaskState::kRunning:
      return channel::TASK_STATE_RUNNING;
    case TaskState::kExited:
      return channel::TASK_STATE_EXITED;
    case TaskState::kFailedToStart:
      return channel::TASK_STATE_FAILED_TO_START;
    case TaskState::kLost:
      return channel::TASK_STATE_LOST;
  }
  return channel::TASK_STATE_RUNNING;
}

void Put(const TaskKey& key, channel::TaskKey* out) {
  out->set_job(key.job);
  out->set_task(key.task);
  out->set_attempt(key.attempt);
}

void Put(const TaskReport& r, channel::TaskReport* out) {
  Put(r.key, out->mutable_key());
  out->set_state(StateToProto(r.state));
  out->set_exit_code(r.exit_code);
  out->set_signal(r.signal);
  out->set_checkpointed(r.checkpointed);
  out->set_message(Utf8(r.message));
  out->set_log_offset(r.log_offset);
  out->set_log_chunk(r.log_chunk);
  if (r.pty_port > 0) {  // as ToJson: none otherwise
    out->set_pty_port(r.pty_port);
  }
}

void Put(const MigRequest& m, channel::MigRequest* out) {
  out->set_gpu(m.gpu);
  out->set_profile(Utf8(m.profile));
  out->set_start(m.start);
}

void Put(const TaskLaunch& l, channel::TaskLaunch* out) {
  Put(l.key, out->mutable_key());
  out->set_job_name(Utf8(l.job_name));
  for (const std::string& arg : l.command) {
    out->add_command(Utf8(arg));
  }
  auto& env = *out->mutable_env();
  for (const auto& [name, value] : l.env) {
    env[Utf8(name)] = Utf8(value);
  }
  out->mutable_gpus()->Add(l.gpus.begin(), l.gpus.end());
  for (const MigRequest& m : l.mig) {
    Put(m, out->add_mig());
  }
  out->set_cpu_milli(l.cpu_milli);
  out->set_memory_mib(l.memory_mib);
  out->set_gpu_milli(l.gpu_milli);
  out->set_gpu_memory_mib(l.gpu_memory_mib);
  out->mutable_numa_nodes()->Add(l.numa_nodes.begin(), l.numa_nodes.end());
  out->set_working_dir(Utf8(l.working_dir));
  out->set_checkpoint_dir(Utf8(l.checkpoint_dir));
  out->set_checkpoint_managed(l.checkpoint_managed);
  out->set_submit_dir(Utf8(l.submit_dir));
  out->set_uid(l.uid);
  out->set_gid(l.gid);
  out->set_pty_secret(Utf8(l.pty_secret));
  out->set_registry_auth(Utf8(l.registry_auth));
  if (!l.container.empty()) {
    channel::ContainerSpec* c = out->mutable_container();
    c->set_image(Utf8(l.container.image));
    for (const ContainerMount& m : l.container.mounts) {
      c->add_mounts(Utf8(ContainerMountText(m)));
    }
    c->set_workdir(Utf8(l.container.workdir));
    for (const std::string& arg : l.container.entrypoint) {
      c->add_entrypoint(Utf8(arg));
    }
    c->set_entrypoint_set(l.container.entrypoint_set);
    c->set_no_mount_home(!l.container.mount_home);
  }
}

void Put(const TaskStop& s, channel::TaskStop* out) {
  Put(s.key, out->mutable_key());
  out->set_grace_ms(s.grace_ms);
  out->set_signal(s.signal);
}

void Put(const MigTelemetry& m, channel::MigTelemetry* out) {
  out->set_uuid(Utf8(m.uuid));
  out->set_profile(Utf8(m.profile));
  out->set_start(m.start);
  out->set_gi_id(m.gi_id);
  out->set_fb_used_mib(m.fb_used_mib);
  out->set_fb_free_mib(m.fb_free_mib);
}

void Put(const GpuTelemetry& t, channel::GpuTelemetry* out) {
  out->set_index(t.index);
  out->set_uuid(Utf8(t.uuid));
  out->set_lost(t.lost);
  out->set_util_pct(t.util_pct);
  out->set_fb_used_mib(t.fb_used_mib);
  out->set_fb_free_mib(t.fb_free_mib);
  out->set_temp_c(t.temp_c);
  out->set_power_mw(t.power_mw);
  out->set_sm_clock_mhz(t.sm_clock_mhz);
  out->set_xid_count(t.xid_count);
  out->set_last_xid(t.last_xid);
  out->set_ecc_sbe_volatile(t.ecc_sbe_volatile);
  out->set_ecc_dbe_volatile(t.ecc_dbe_volatile);
  out->set_ecc_sbe_aggregate(t.ecc_sbe_aggregate);
  out->set_ecc_dbe_aggregate(t.ecc_dbe_aggregate);
  for (const MigTelemetry& m : t.mig) {
    Put(m, out->add_mig());
  }
}

// ---- FromProto -----------------------------------------------------------------------

// Where a field is: a chain on the stack, made into text ("tasks[1].key.job") only when
// an error names it.
struct Path {
  const Path* parent = nullptr;
  std::string_view key;  // "": an item of the parent list
  size_t index = 0;

  Path Child(std::string_view k) const { return Path{this, k, 0}; }
  Path Item(int i) const { return Path{this, {}, static_cast<size_t>(i)}; }
  std::string Text() const {
    if (parent == nullptr) {
      return std::string(key);
    }
    const std::string above = parent->Text();
    return key.empty() ? IndexPath(above, index) : ChildPath(above, key);
  }
};

// InvalidArgument "path: message", as the JSON codec's FieldReader words it.
Status Bad(const Path& at, std::string_view message) {
  const std::string where = at.Text();
  return InvalidArgumentError(where.empty() ? std::string(message)
                                            : where + ": " + std::string(message));
}

Status Required(const Path& at) { return Bad(at, "is required"); }

Status CheckInt(int64_t v, const Path& at, int64_t min, int64_t max) {
  if (v < min || v > max) {
    return Bad(at, "must be between " + std::to_string(min) + " and " + std::to_string(max) +
                       ", got " + std::to_string(v));
  }
  return Status::Ok();
}

// Checks `v` and stores it in `*out`.
template <typename T>
Status Int(int64_t v, const Path& at, int64_t min, int64_t max, T* out) {
  TESSERA_RETURN_IF_ERROR(CheckInt(v, at, min, max));
  *out = static_cast<T>(v);
  return Status::Ok();
}

// A string as FieldReader::String takes one: at most max bytes, UTF-8, no NUL byte.
Status String(const std::string& s, const Path& at, size_t max, std::string* out) {
  if (s.size() > max) {
    return Bad(at, "longer than " + std::to_string(max) + " bytes");
  }
  if (!IsValidUtf8(s)) {
    return Bad(at, "not valid UTF-8");
  }
  if (s.find('\0') != std::string::npos) {
    return Bad(at, "contains a NUL byte");
  }
  *out = s;
  return Status::Ok();
}

// A string that names something: "" is refused.
Status RequiredString(const std::string& s, const Path& at, size_t max, std::string* out) {
  if (s.empty()) {
    return Required(at);
  }
  return String(s, at, max, out);
}

Status Count(int n, const Path& at, size_t max) {
  if (static_cast<size_t>(n) > max) {
    return Bad(at, "more than " + std::to_string(max) + " items (" + std::to_string(n) + ")");
  }
  return Status::Ok();
}

StatusOr<TaskKey> KeyFrom(const channel::TaskKey& k, const Path& at) {
  TaskKey key;
  if (!k.has_job()) {
    return Required(at.Child("job"));
  }
  key.job = k.job();
  if (!k.has_task()) {
    return Required(at.Child("task"));
  }
  TESSERA_RETURN_IF_ERROR(Int(k.task(), at.Child("task"), 0, kInt32Max, &key.task));
  TESSERA_RETURN_IF_ERROR(Int(k.attempt(), at.Child("attempt"), 0, kInt32Max, &key.attempt));
  return key;
}

// The `key` of a report, launch or stop.
template <typename M>
StatusOr<TaskKey> KeyOf(const M& m, const Path& at) {
  const Path key = at.Child("key");
  if (!m.has_key()) {
    return Required(key);
  }
  return KeyFrom(m.key(), key);
}

StatusOr<TaskState> StateFrom(int state, const Path& at) {
  switch (state) {
    case channel::TASK_STATE_RUNNING:
      return TaskState::kRunning;
    case channel::TASK_STATE_EXITED:
      return TaskState::kExited;
    case channel::TASK_STATE_FAILED_TO_START:
      return TaskState::kFailedToStart;
    case channel::TASK_STATE_LOST:
      return TaskState::kLost;
    case channel::TASK_STATE_UNSPECIFIED:
      return Required(at);
    default:
      return Bad(at,
                 "expected running, exited, failed_to_start or lost, got " + std::to_string(state));
  }
}

StatusOr<TaskReport> ReportFrom(const channel::TaskReport& p, const Path& at) {
  TaskReport r;
  TESSERA_ASSIGN_OR_RETURN(r.key, KeyOf(p, at));
  TESSERA_ASSIGN_OR_RETURN(r.state, StateFrom(p.state(), at.Child("state")));
  r.exit_code = p.exit_code();  // any int32
  TESSERA_RETURN_IF_ERROR(Int(p.signal(), at.Child("signal"), 0, kMaxReportSignal, &r.signal));
  r.checkpointed = p.checkpointed();
  TESSERA_RETURN_IF_ERROR(String(p.message(), at.Child("message"), kMaxMessageBytes, &r.message));
  TESSERA_RETURN_IF_ERROR(Int(p.log_offset(), at.Child("log_offset"), 0, kInt64Max, &r.log_offset));
  if (p.log_chunk().size() > kMaxLogChunkOnWire) {
    return Bad(at.Child("log_chunk"),
               "longer than " + std::to_string(kMaxLogChunkOnWire) + " bytes");
  }
  r.log_chunk = p.log_chunk();  // raw bytes
  TESSERA_RETURN_IF_ERROR(Int(p.pty_port(), at.Child("pty_port"), 0, kMaxPort, &r.pty_port));
  return r;
}

StatusOr<MigRequest> MigFrom(const channel::MigRequest& p, const Path& at) {
  MigRequest m;
  if (!p.has_gpu()) {
    return Required(at.Child("gpu"));
  }
  TESSERA_RETURN_IF_ERROR(Int(p.gpu(), at.Child("gpu"), 0, kMaxGpuIndex, &m.gpu));
  TESSERA_RETURN_IF_ERROR(
      RequiredString(p.profile(), at.Child("profile"), kMaxProfileLength, &m.profile));
  if (p.has_start()) {
    TESSERA_RETURN_IF_ERROR(Int(p.start(), at.Child("start"), -1, kMigMemorySlots - 1, &m.start));
  }
  return m;
}

// A launch's image and container settings, checked as the job file's.
Status ContainerFrom(const channel::TaskLaunch& p, const Path& at, TaskLaunch* l) {
  if (!p.has_container()) {
    return Status::Ok();
  }
  const channel::ContainerSpec& c = p.container();
  const Path path = at.Child("container");
  ContainerSpec spec;
  TESSERA_RETURN_IF_ERROR(
      RequiredString(c.image(), path.Child("image"), kMaxImageReferenceLength, &spec.image));
  if (StatusOr<std::string> normal = NormalizeImageReference(spec.image); !normal.ok()) {
    return Bad(path.Child("image"), normal.status().message());
  } else if (*normal != spec.image) {
    return Bad(path.Child("image"), "is not normalised (" + *normal + ")");
  }
  TESSERA_RETURN_IF_ERROR(Count(c.mounts_size(), path.Child("mounts"), kMaxContainerMounts));
  for (int i = 0; i < c.mounts_size(); ++i) {
    StatusOr<ContainerMount> m = ParseContainerMount(c.mounts(i));
    if (!m.ok()) {
      return Bad(path.Child("mounts").Item(i), m.status().message());
    }
    spec.mounts.push_back(std::move(*m));
  }
  TESSERA_RETURN_IF_ERROR(
      String(c.workdir(), path.Child("workdir"), kMaxPathLength, &spec.workdir));
  TESSERA_RETURN_IF_ERROR(Count(c.entrypoint_size(), path.Child("entrypoint"), 64));
  for (int i = 0; i < c.entrypoint_size(); ++i) {
    std::string arg;
    TESSERA_RETURN_IF_ERROR(
        String(c.entrypoint(i), path.Child("entrypoint").Item(i), kMaxCommandBytes, &arg));
    spec.entrypoint.push_back(std::move(arg));
  }
  spec.entrypoint_set = c.entrypoint_set();
  spec.mount_home = !c.no_mount_home();
  if (Status s = ValidateContainerSpec(spec); !s.ok()) {
    return Bad(path, s.message());
  }
  l->container = std::move(spec);
  return Status::Ok();
}

// A launch's command: at least one item (unless it runs an image's own), none empty,
// kMaxCommandBytes in all.
Status CommandFrom(const channel::TaskLaunch& p, const Path& at, TaskLaunch* l) {
  const Path command = at.Child("command");
  TESSERA_RETURN_IF_ERROR(Count(p.command_size(), command, kMaxCommandItems));
  if (p.command_size() == 0 && l->container.empty()) {
    return Bad(command, "is required and must not be empty");
  }
  size_t total = 0;
  for (int i = 0; i < p.command_size(); ++i) {
    std::string arg;
    TESSERA_RETURN_IF_ERROR(RequiredString(p.command(i), command.Item(i), kMaxCommandBytes, &arg));
    total += arg.size();
    if (total > kMaxCommandBytes) {
      return Bad(command, "too long");
    }
    l->command.push_back(std::move(arg));
  }
  return Status::Ok();
}

// A launch's environment: variable names, kMaxLaunchEnvBytes in all.
Status EnvFrom(const channel::TaskLaunch& p, const Path& at, TaskLaunch* l) {
  const Path env = at.Child("env");
  size_t bytes = 0;
  for (const auto& [name, value] : p.env()) {
    if (!IsValidEnvName(name)) {
      return Bad(env, "'" + ToValidUtf8(std::string_view(name).substr(0, 80)) +
                          "' is not a variable name");
    }
    std::string text;
    TESSERA_RETURN_IF_ERROR(String(value, env.Child(name), kMaxLaunchEnvBytes, &text));
    bytes += name.size() + text.size() + 2;
    if (bytes > kMaxLaunchEnvBytes) {
      return Bad(env, "too large");
    }
    l->env[name] = std::move(text);
  }
  return Status::Ok();
}

// A launch's GPUs, MIG instances and NUMA nodes.
Status PlacementFrom(const channel::TaskLaunch& p, const Path& at, TaskLaunch* l) {
  const Path gpus = at.Child("gpus");
  TESSERA_RETURN_IF_ERROR(Count(p.gpus_size(), gpus, kMaxGpusPerNode));
  for (int i = 0; i < p.gpus_size(); ++i) {
    TESSERA_RETURN_IF_ERROR(CheckInt(p.gpus(i), gpus.Item(i), 0, kMaxGpuIndex));
    l->gpus.push_back(p.gpus(i));
  }
  const Path mig = at.Child("mig");
  TESSERA_RETURN_IF_ERROR(Count(p.mig_size(), mig, kMaxGpusPerNode));
  for (int i = 0; i < p.mig_size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(MigRequest m, MigFrom(p.mig(i), mig.Item(i)));
    l->mig.push_back(std::move(m));
  }
  const Path numa = at.Child("numa_nodes");
  TESSERA_RETURN_IF_ERROR(Count(p.numa_nodes_size(), numa, kMaxNumaNodes));
  for (int i = 0; i < p.numa_nodes_size(); ++i) {
    TESSERA_RETURN_IF_ERROR(CheckInt(p.numa_nodes(i), numa.Item(i), 0, kMaxNumaNodes - 1));
    l->numa_nodes.push_back(p.numa_nodes(i));
  }
  return Status::Ok();
}

StatusOr<TaskLaunch> LaunchFrom(const channel::TaskLaunch& p, const Path& at) {
  TaskLaunch l;
  TESSERA_ASSIGN_OR_RETURN(l.key, KeyOf(p, at));
  TESSERA_RETURN_IF_ERROR(String(p.job_name(), at.Child("job_name"), kMaxIdLength, &l.job_name));
  TESSERA_RETURN_IF_ERROR(ContainerFrom(p, at, &l));
  TESSERA_RETURN_IF_ERROR(CommandFrom(p, at, &l));
  TESSERA_RETURN_IF_ERROR(EnvFrom(p, at, &l));
  TESSERA_RETURN_IF_ERROR(PlacementFrom(p, at, &l));
  TESSERA_RETURN_IF_ERROR(Int(p.cpu_milli(), at.Child("cpu_milli"), 0, kInt64Max, &l.cpu_milli));
  TESSERA_RETURN_IF_ERROR(Int(p.memory_mib(), at.Child("memory_mib"), 0, kInt64Max, &l.memory_mib));
  TESSERA_RETURN_IF_ERROR(Int(p.gpu_milli(), at.Child("gpu_milli"), 0, kMilliPerGpu, &l.gpu_milli));
  TESSERA_RETURN_IF_ERROR(
      Int(p.gpu_memory_mib(), at.Child("gpu_memory_mib"), 0, kInt64Max, &l.gpu_memory_mib));
  TESSERA_RETURN_IF_ERROR(
      String(p.working_dir(), at.Child("working_dir"), kMaxPathLength, &l.working_dir));
  TESSERA_RETURN_IF_ERROR(
      String(p.checkpoint_dir(), at.Child("checkpoint_dir"), kMaxPathLength, &l.checkpoint_dir));
  TESSERA_RETURN_IF_ERROR(
      String(p.submit_dir(), at.Child("submit_dir"), kMaxPathLength, &l.submit_dir));
  l.checkpoint_managed = p.checkpoint_managed();
  if (p.has_uid()) {
    TESSERA_RETURN_IF_ERROR(Int(p.uid(), at.Child("uid"), -1, kMaxUnixId, &l.uid));
  }
  if (p.has_gid()) {
    TESSERA_RETURN_IF_ERROR(Int(p.gid(), at.Child("gid"), -1, kMaxUnixId, &l.gid));
  }
  TESSERA_RETURN_IF_ERROR(
      String(p.pty_secret(), at.Child("pty_secret"), kMaxPtySecretLength, &l.pty_secret));
  TESSERA_RETURN_IF_ERROR(String(p.registry_auth(), at.Child("registry_auth"),
                                 kMaxRegistryAuthLength, &l.registry_auth));
  return l;
}

StatusOr<TaskStop> StopFrom(const channel::TaskStop& p, const Path& at) {
  TaskStop s;
  TESSERA_ASSIGN_OR_RETURN(s.key, KeyOf(p, at));
  if (p.has_grace_ms()) {
    TESSERA_RETURN_IF_ERROR(Int(p.grace_ms(), at.Child("grace_ms"), 0, kMaxGraceMs, &s.grace_ms));
  }
  if (p.has_signal()) {
    TESSERA_RETURN_IF_ERROR(Int(p.signal(), at.Child("signal"), 1, kMaxStopSignal, &s.signal));
  }
  return s;
}

StatusOr<MigTelemetry> MigSampleFrom(const channel::MigTelemetry& p, const Path& at) {
  MigTelemetry m;
  TESSERA_RETURN_IF_ERROR(RequiredString(p.uuid(), at.Child("uuid"), kMaxIdLength, &m.uuid));
  TESSERA_RETURN_IF_ERROR(String(p.profile(), at.Child("profile"), kMaxProfileLength, &m.profile));
  if (p.has_start()) {
    TESSERA_RETURN_IF_ERROR(Int(p.start(), at.Child("start"), -1, kMigMemorySlots - 1, &m.start));
  }
  if (p.has_gi_id()) {
    TESSERA_RETURN_IF_ERROR(Int(p.gi_id(), at.Child("gi_id"), -1, kInt32Max, &m.gi_id));
  }
  TESSERA_RETURN_IF_ERROR(
      Int(p.fb_used_mib(), at.Child("fb_used_mib"), 0, kInt64Max, &m.fb_used_mib));
  TESSERA_RETURN_IF_ERROR(
      Int(p.fb_free_mib(), at.Child("fb_free_mib"), 0, kInt64Max, &m.fb_free_mib));
  return m;
}

// The readings that cannot be negative, and the ECC counters.
Status ReadingsFrom(const channel::GpuTelemetry& p, const Path& at, GpuTelemetry* t) {
  TESSERA_RETURN_IF_ERROR(Int(p.util_pct(), at.Child("util_pct"), 0, 100, &t->util_pct));
  TESSERA_RETURN_IF_ERROR(
      Int(p.fb_used_mib(), at.Child("fb_used_mib"), 0, kInt64Max, &t->fb_used_mib));
  TESSERA_RETURN_IF_ERROR(
      Int(p.fb_free_mib(), at.Child("fb_free_mib"), 0, kInt64Max, &t->fb_free_mib));
  TESSERA_RETURN_IF_ERROR(Int(p.temp_c(), at.Child("temp_c"), kMinTempC, kMaxTempC, &t->temp_c));
  TESSERA_RETURN_IF_ERROR(Int(p.power_mw(), at.Child("power_mw"), 0, kInt64Max, &t->power_mw));
  TESSERA_RETURN_IF_ERROR(
      Int(p.sm_clock_mhz(), at.Child("sm_clock_mhz"), 0, kInt32Max, &t->sm_clock_mhz));
  TESSERA_RETURN_IF_ERROR(Int(p.xid_count(), at.Child("xid_count"), 0, kInt64Max, &t->xid_count));
  TESSERA_RETURN_IF_ERROR(Int(p.last_xid(), at.Child("last_xid"), 0, kInt32Max, &t->last_xid));
  TESSERA_RETURN_IF_ERROR(
      Int(p.ecc_sbe_volatile(), at.Child("ecc_sbe_volatile"), 0, kInt64Max, &t->ecc_sbe_volatile));
  TESSERA_RETURN_IF_ERROR(
      Int(p.ecc_dbe_volatile(), at.Child("ecc_dbe_volatile"), 0, kInt64Max, &t->ecc_dbe_volatile));
  TESSERA_RETURN_IF_ERROR(Int(p.ecc_sbe_aggregate(), at.Child("ecc_sbe_aggregate"), 0, kInt64Max,
                              &t->ecc_sbe_aggregate));
  TESSERA_RETURN_IF_ERROR(Int(p.ecc_dbe_aggregate(), at.Child("ecc_dbe_aggregate"), 0, kInt64Max,
                              &t->ecc_dbe_aggregate));
  return Status::Ok();
}

StatusOr<GpuTelemetry> GpuSampleFrom(const channel::GpuTelemetry& p, const Path& at) {
  GpuTelemetry t;
  if (!p.has_index()) {
    return Required(at.Child("index"));
  }
  TESSERA_RETURN_IF_ERROR(Int(p.index(), at.Child("index"), 0, kMaxGpuIndex, &t.index));
  TESSERA_RETURN_IF_ERROR(String(p.uuid(), at.Child("uuid"), kMaxIdLength, &t.uuid));
  t.lost = p.lost();
  TESSERA_RETURN_IF_ERROR(ReadingsFrom(p, at, &t));
  const Path mig = at.Child("mig");
  TESSERA_RETURN_IF_ERROR(Count(p.mig_size(), mig, kMaxMigPerGpu));
  for (int i = 0; i < p.mig_size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(MigTelemetry m, MigSampleFrom(p.mig(i), mig.Item(i)));
    t.mig.push_back(std::move(m));
  }
  return t;
}

// Decodes each item of a repeated field with `from`, after checking how many there are.
template <typename T, typename Items, typename From>
Status ListFrom(const Items& items, const Path& at, size_t max, From from, std::vector<T>* out) {
  TESSERA_RETURN_IF_ERROR(Count(items.size(), at, max));
  out->reserve(static_cast<size_t>(items.size()));
  for (int i = 0; i < items.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(T item, from(items.Get(i), at.Item(i)));
    out->push_back(std::move(item));
  }
  return Status::Ok();
}

}  // namespace

void ToProto(const HeartbeatRequest& request, channel::HeartbeatRequest* out) {
  out->Clear();
  out->set_node(Utf8(request.node));
  out->set_agent_id(Utf8(request.agent_id));
  out->mutable_tasks()->Reserve(static_cast<int>(request.tasks.size()));
  for (const TaskReport& t : request.tasks) {
    Put(t, out->add_tasks());
  }
  for (const GpuTelemetry& g : request.gpus) {
    Put(g, out->add_gpus());
  }
}

void ToProto(const HeartbeatResponse& response, channel::HeartbeatResponse* out) {
  out->Clear();
  for (const TaskLaunch& l : response.launch) {
    Put(l, out->add_launch());
  }
  for (const TaskStop& s : response.stop) {
    Put(s, out->add_stop());
  }
  out->set_reregister(response.reregister);
  if (response.heartbeat_interval_ms > 0) {  // as ToJson: 0 otherwise
    out->set_heartbeat_interval_ms(response.heartbeat_interval_ms);
  }
}

channel::HeartbeatRequest ToProto(const HeartbeatRequest& request) {
  channel::HeartbeatRequest out;
  ToProto(request, &out);
  return out;
}

channel::HeartbeatResponse ToProto(const HeartbeatResponse& response) {
  channel::HeartbeatResponse out;
  ToProto(response, &out);
  return out;
}

StatusOr<HeartbeatRequest> FromProto(const channel::HeartbeatRequest& p) {
  const Path root;
  HeartbeatRequest request;
  TESSERA_RETURN_IF_ERROR(
      RequiredString(p.node(), root.Child("node"), kMaxIdLength, &request.node));
  TESSERA_RETURN_IF_ERROR(
      RequiredString(p.agent_id(), root.Child("agent_id"), kMaxIdLength, &request.agent_id));
  TESSERA_RETURN_IF_ERROR(ListFrom<TaskReport>(p.tasks(), root.Child("tasks"), kMaxTasksPerMessage,
                                               ReportFrom, &request.tasks));
  TESSERA_RETURN_IF_ERROR(ListFrom<GpuTelemetry>(p.gpus(), root.Child("gpus"), kMaxGpusPerNode,
                                                 GpuSampleFrom, &request.gpus));
  return request;
}

StatusOr<HeartbeatResponse> FromProto(const channel::HeartbeatResponse& p) {
  const Path root;
  HeartbeatResponse response;
  TESSERA_RETURN_IF_ERROR(ListFrom<TaskLaunch>(p.launch(), root.Child("launch"),
                                               kMaxTasksPerMessage, LaunchFrom, &response.launch));
  TESSERA_RETURN_IF_ERROR(ListFrom<TaskStop>(p.stop(), root.Child("stop"), kMaxTasksPerMessage,
                                             StopFrom, &response.stop));
  response.reregister = p.reregister();
  TESSERA_RETURN_IF_ERROR(Int(p.heartbeat_interval_ms(), root.Child("heartbeat_interval_ms"), 0,
                              kMaxHeartbeatMs, &response.heartbeat_interval_ms));
  return response;
}

}  // namespace tessera
