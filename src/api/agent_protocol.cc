#include "api/agent_protocol.h"

#include <algorithm>
#include <array>
#include <exception>
#include <limits>
#include <optional>
#include <utility>

#include "api/agent_protocol_limits.h"
#include "api/job_codec.h"
#include "api/job_codec_container.h"
#include "api/json_fields.h"

namespace tessera {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
using namespace agent_limits;  // NOLINT: the protocol's bounds, shared with its other codec

// A string made safe to dump.
std::string Utf8(const std::string& s) { return IsValidUtf8(s) ? s : ToValidUtf8(s); }

Json Strings(const std::vector<std::string>& items) {
  Json out = Json::array();
  for (const std::string& s : items) {
    out.push_back(Utf8(s));
  }
  return out;
}

Json StringMap(const std::map<std::string, std::string>& items) {
  Json out = Json::object();
  for (const auto& [k, v] : items) {
    out[Utf8(k)] = Utf8(v);
  }
  return out;
}

// Reads the protocol's messages; `r` keeps the error path.
class Decoder {
 public:
  explicit Decoder(FieldReader* r) : r_(*r) {}

  const Json* Required(const Json& obj, std::string_view path, std::string_view key,
                       Status* status) {
    const Json* v = FindField(obj, key);
    if (v == nullptr) {
      *status = r_.Error(ChildPath(path, key), "is required");
    }
    return v;
  }

  StatusOr<std::string> RequiredString(const Json& obj, const std::string& path,
                                       std::string_view key, size_t max) {
    Status missing;
    const Json* v = Required(obj, path, key, &missing);
    if (v == nullptr) {
      return missing;
    }
    const std::string at = ChildPath(path, key);
    TESSERA_ASSIGN_OR_RETURN(std::string s, r_.String(*v, at, max));
    if (s.empty()) {
      return r_.Error(at, "must not be empty");
    }
    return s;
  }

  Status OptString(const Json& obj, const std::string& path, std::string_view key, size_t max,
                   std::string* out) {
    if (const Json* v = FindField(obj, key)) {
      TESSERA_ASSIGN_OR_RETURN(*out, r_.String(*v, ChildPath(path, key), max));
    }
    return Status::Ok();
  }

  template <typename T>
  Status OptInt(const Json& obj, const std::string& path, std::string_view key, int64_t min,
                int64_t max, T* out) {
    if (const Json* v = FindField(obj, key)) {
      TESSERA_ASSIGN_OR_RETURN(int64_t x, r_.Int(*v, ChildPath(path, key), min, max));
      *out = static_cast<T>(x);
    }
    return Status::Ok();
  }

  Status OptBool(const Json& obj, const std::string& path, std::string_view key, bool* out) {
    if (const Json* v = FindField(obj, key)) {
      TESSERA_ASSIGN_OR_RETURN(*out, r_.Bool(*v, ChildPath(path, key)));
    }
    return Status::Ok();
  }

  // Calls read(item, path) for each item of the optional list `key`.
  template <typename F>
  Status List(const Json& obj, const std::string& path, std::string_view key, size_t max, F read) {
    const Json* v = FindField(obj, key);
    if (v == nullptr) {
      return Status::Ok();
    }
    const std::string at = ChildPath(path, key);
    TESSERA_RETURN_IF_ERROR(r_.CheckArray(*v, at, max));
    for (size_t i = 0; i < v->size(); ++i) {
      TESSERA_RETURN_IF_ERROR(read((*v)[i], IndexPath(at, i)));
    }
    return Status::Ok();
  }

  StatusOr<TaskKey> Key(const Json& j, const std::string& path) {
    TESSERA_RETURN_IF_ERROR(r_.CheckObject(j, path));
    TaskKey key;
    Status missing;
    const Json* job = Required(j, path, "job", &missing);
    if (job == nullptr) {
      return missing;
    }
    TESSERA_ASSIGN_OR_RETURN(key.job, r_.Uint64(*job, ChildPath(path, "job")));
    const Json* task = Required(j, path, "task", &missing);
    if (task == nullptr) {
      return missing;
    }
    TESSERA_ASSIGN_OR_RETURN(int64_t t, r_.Int(*task, ChildPath(path, "task"), 0, kInt32Max));
    key.task = static_cast<int>(t);
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "attempt", 0, kInt32Max, &key.attempt));
    return key;
  }

  StatusOr<TaskKey> KeyField(const Json& j, const std::string& path) {
    Status missing;
    const Json* v = Required(j, path, "key", &missing);
    if (v == nullptr) {
      return missing;
    }
    return Key(*v, ChildPath(path, "key"));
  }

  StatusOr<TaskReport> Report(const Json& j, const std::string& path) {
    TESSERA_RETURN_IF_ERROR(r_.CheckObject(j, path));
    TaskReport report;
    TESSERA_ASSIGN_OR_RETURN(report.key, KeyField(j, path));
    TESSERA_ASSIGN_OR_RETURN(std::string state, RequiredString(j, path, "state", 64));
    StatusOr<TaskState> parsed = ParseTaskState(state);
    if (!parsed.ok()) {
      return r_.Error(ChildPath(path, "state"), parsed.status().message());
    }
    report.state = *parsed;
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "exit_code", kInt32Min, kInt32Max, &report.exit_code));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "signal", 0, kMaxReportSignal, &report.signal));
    TESSERA_RETURN_IF_ERROR(OptBool(j, path, "checkpointed", &report.checkpointed));
    TESSERA_RETURN_IF_ERROR(OptString(j, path, "message", kMaxMessageBytes, &report.message));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "log_offset", 0, kInt64Max, &report.log_offset));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "pty_port", 0, kMaxPort, &report.pty_port));
    if (const Json* v = FindField(j, "log_b64")) {
      const std::string at = ChildPath(path, "log_b64");
      TESSERA_ASSIGN_OR_RETURN(std::string b64,
                               r_.String(*v, at, (16 * kMaxLogChunkBytes / 3 + 1) * 4));
      StatusOr<std::string> bytes = Base64Decode(b64);
      if (!bytes.ok()) {
        return r_.Error(at, bytes.status().message());
      }
      report.log_chunk = std::move(*bytes);
    }
    return report;
  }

  StatusOr<MigRequest> Mig(const Json& j, const std::string& path) {
    TESSERA_RETURN_IF_ERROR(r_.CheckObject(j, path));
    MigRequest mig;
    Status missing;
    const Json* gpu = Required(j, path, "gpu", &missing);
    if (gpu == nullptr) {
      return missing;
    }
    TESSERA_ASSIGN_OR_RETURN(int64_t g, r_.Int(*gpu, ChildPath(path, "gpu"), 0, kMaxGpuIndex));
    mig.gpu = static_cast<int>(g);
    TESSERA_ASSIGN_OR_RETURN(mig.profile, RequiredString(j, path, "profile", kMaxProfileLength));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "start", -1, kMigMemorySlots - 1, &mig.start));
    return mig;
  }

  StatusOr<TaskLaunch> Launch(const Json& j, const std::string& path) {
    TESSERA_RETURN_IF_ERROR(r_.CheckObject(j, path));
    TaskLaunch launch;
    TESSERA_ASSIGN_OR_RETURN(launch.key, KeyField(j, path));
    TESSERA_RETURN_IF_ERROR(OptString(j, path, "job_name", kMaxIdLength, &launch.job_name));
    size_t total = 0;
    if (Status listed = List(j, path, "command", kMaxCommandItems,
                             [&](const Json& v, const std::string& at) {
                               TESSERA_ASSIGN_OR_RETURN(std::string arg,
                                                        r_.String(v, at, kMaxCommandBytes));
                               if (arg.empty()) {
                                 return r_.Error(at, "must not be empty");
                               }
                               total += arg.size();
                               if (total > kMaxCommandBytes) {
                                 return r_.Error(ChildPath(path, "command"), "too long");
                               }
                               launch.command.push_back(std::move(arg));
                               return Status::Ok();
                             });
        !listed.ok()) {
      return listed;
    }
    if (const Json* c = FindField(j, "container")) {
      TESSERA_ASSIGN_OR_RETURN(launch.container,
                               ContainerSpecFromJson(*c, r_, ChildPath(path, "container")));
    }
    if (launch.command.empty() && launch.container.empty()) {
      return r_.Error(ChildPath(path, "command"), "is required and must not be empty");
    }
    if (const Json* env = FindField(j, "env")) {
      const std::string at = ChildPath(path, "env");
      TESSERA_RETURN_IF_ERROR(r_.CheckObject(*env, at));
      size_t bytes = 0;
      for (const auto& [k, v] : env->items()) {
        const std::string item = ChildPath(at, k);
        if (!IsValidEnvName(k)) {
          return r_.Error(item, "not a variable name");
        }
        TESSERA_ASSIGN_OR_RETURN(std::string value, r_.String(v, item, kMaxLaunchEnvBytes));
        bytes += k.size() + value.size() + 2;
        if (bytes > kMaxLaunchEnvBytes) {
          return r_.Error(at, "too large");
        }
        launch.env[k] = std::move(value);
      }
    }
    if (Status listed = List(j, path, "gpus", kMaxGpusPerNode,
                             [&](const Json& v, const std::string& at) {
                               TESSERA_ASSIGN_OR_RETURN(int64_t g, r_.Int(v, at, 0, kMaxGpuIndex));
                               launch.gpus.push_back(static_cast<int>(g));
                               return Status::Ok();
                             });
        !listed.ok()) {
      return listed;
    }
    if (Status listed = List(j, path, "mig", kMaxGpusPerNode,
                             [&](const Json& v, const std::string& at) {
                               TESSERA_ASSIGN_OR_RETURN(MigRequest m, Mig(v, at));
                               launch.mig.push_back(std::move(m));
                               return Status::Ok();
                             });
        !listed.ok()) {
      return listed;
    }
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "cpu_milli", 0, kInt64Max, &launch.cpu_milli));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "memory_mib", 0, kInt64Max, &launch.memory_mib));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "gpu_milli", 0, kMilliPerGpu, &launch.gpu_milli));
    TESSERA_RETURN_IF_ERROR(
        OptInt(j, path, "gpu_memory_mib", 0, kInt64Max, &launch.gpu_memory_mib));
    if (Status listed = List(j, path, "numa_nodes", kMaxNumaNodes,
                             [&](const Json& v, const std::string& at) {
                               TESSERA_ASSIGN_OR_RETURN(int64_t n,
                                                        r_.Int(v, at, 0, kMaxNumaNodes - 1));
                               launch.numa_nodes.push_back(static_cast<int>(n));
                               return Status::Ok();
                             });
        !listed.ok()) {
      return listed;
    }
    TESSERA_RETURN_IF_ERROR(OptString(j, path, "working_dir", kMaxPathLength, &launch.working_dir));
    TESSERA_RETURN_IF_ERROR(
        OptString(j, path, "checkpoint_dir", kMaxPathLength, &launch.checkpoint_dir));
    TESSERA_RETURN_IF_ERROR(OptString(j, path, "submit_dir", kMaxPathLength, &launch.submit_dir));
    TESSERA_RETURN_IF_ERROR(OptBool(j, path, "checkpoint_managed", &launch.checkpoint_managed));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "uid", -1, kMaxUnixId, &launch.uid));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "gid", -1, kMaxUnixId, &launch.gid));
    TESSERA_RETURN_IF_ERROR(
        OptString(j, path, "pty_secret", kMaxPtySecretLength, &launch.pty_secret));
    TESSERA_RETURN_IF_ERROR(
        OptString(j, path, "registry_auth", kMaxRegistryAuthLength, &launch.registry_auth));
    return launch;
  }

  StatusOr<TaskStop> Stop(const Json& j, const std::string& path) {
    TESSERA_RETURN_IF_ERROR(r_.CheckObject(j, path));
    TaskStop stop;
    TESSERA_ASSIGN_OR_RETURN(stop.key, KeyField(j, path));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "grace_ms", 0, kMaxGraceMs, &stop.grace_ms));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "signal", 1, kMaxStopSignal, &stop.signal));
    return stop;
  }

  StatusOr<MigTelemetry> MigSample(const Json& j, const std::string& path) {
    TESSERA_RETURN_IF_ERROR(r_.CheckObject(j, path));
    MigTelemetry m;
    TESSERA_ASSIGN_OR_RETURN(m.uuid, RequiredString(j, path, "uuid", kMaxIdLength));
    TESSERA_RETURN_IF_ERROR(OptString(j, path, "profile", kMaxProfileLength, &m.profile));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "start", -1, kMigMemorySlots - 1, &m.start));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "gi_id", -1, kInt32Max, &m.gi_id));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "fb_used_mib", 0, kInt64Max, &m.fb_used_mib));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "fb_free_mib", 0, kInt64Max, &m.fb_free_mib));
    return m;
  }

  StatusOr<GpuTelemetry> GpuSample(const Json& j, const std::string& path) {
    TESSERA_RETURN_IF_ERROR(r_.CheckObject(j, path));
    GpuTelemetry t;
    Status missing;
    const Json* index = Required(j, path, "index", &missing);
    if (index == nullptr) {
      return missing;
    }
    TESSERA_ASSIGN_OR_RETURN(int64_t i, r_.Int(*index, ChildPath(path, "index"), 0, kMaxGpuIndex));
    t.index = static_cast<int>(i);
    TESSERA_RETURN_IF_ERROR(OptString(j, path, "uuid", kMaxIdLength, &t.uuid));
    TESSERA_RETURN_IF_ERROR(OptBool(j, path, "lost", &t.lost));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "util_pct", 0, 100, &t.util_pct));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "fb_used_mib", 0, kInt64Max, &t.fb_used_mib));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "fb_free_mib", 0, kInt64Max, &t.fb_free_mib));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "temp_c", kMinTempC, kMaxTempC, &t.temp_c));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "power_mw", 0, kInt64Max, &t.power_mw));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "sm_clock_mhz", 0, kInt32Max, &t.sm_clock_mhz));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "xid_count", 0, kInt64Max, &t.xid_count));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "last_xid", 0, kInt32Max, &t.last_xid));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "ecc_sbe_volatile", 0, kInt64Max, &t.ecc_sbe_volatile));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "ecc_dbe_volatile", 0, kInt64Max, &t.ecc_dbe_volatile));
    TESSERA_RETURN_IF_ERROR(
        OptInt(j, path, "ecc_sbe_aggregate", 0, kInt64Max, &t.ecc_sbe_aggregate));
    TESSERA_RETURN_IF_ERROR(
        OptInt(j, path, "ecc_dbe_aggregate", 0, kInt64Max, &t.ecc_dbe_aggregate));
    if (Status listed = List(j, path, "mig", kMaxMigPerGpu,
                             [&](const Json& v, const std::string& at) {
                               TESSERA_ASSIGN_OR_RETURN(MigTelemetry m, MigSample(v, at));
                               t.mig.push_back(std::move(m));
                               return Status::Ok();
                             });
        !listed.ok()) {
      return listed;
    }
    return t;
  }

  StatusOr<NodeInventory> Inventory(const Json& j, const std::string& path,
                                    const GpuCatalog& catalog) {
    TESSERA_RETURN_IF_ERROR(r_.CheckObject(j, path));
    NodeInventory inv;
    NodeSpec& spec = inv.spec;
    TESSERA_ASSIGN_OR_RETURN(spec.name, RequiredString(j, path, "name", kMaxIdLength));
    int64_t cpu = 0;
    int64_t memory = 0;
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "cpu_milli", 0, kInt64Max, &cpu));
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "memory_mib", 0, kInt64Max, &memory));
    spec.cpu = MilliCpu(cpu);
    spec.memory = MiB(memory);
    TESSERA_RETURN_IF_ERROR(OptInt(j, path, "numa_nodes", 1, 64, &spec.numa_nodes));
    if (const Json* labels = FindField(j, "labels")) {
      const std::string at = ChildPath(path, "labels");
      TESSERA_RETURN_IF_ERROR(r_.CheckObject(*labels, at));
      if (labels->size() > kMaxLabels) {
        return r_.Error(at, "more than " + std::to_string(kMaxLabels) + " labels");
      }
      for (const auto& [k, v] : labels->items()) {
        const std::string item = ChildPath(at, k);
        if (k.empty() || k.size() > kMaxLabelLength || !IsValidUtf8(k)) {
          return r_.Error(at, "a label key is empty, too long or not UTF-8");
        }
        TESSERA_ASSIGN_OR_RETURN(std::string value, r_.String(v, item, kMaxLabelLength));
        spec.labels.emplace_back(k, std::move(value));
      }
    }
    if (Status listed = List(
            j, path, "gpus", kMaxGpusPerNode,
            [&](const Json& g, const std::string& at) {
              TESSERA_RETURN_IF_ERROR(r_.CheckObject(g, at));
              GpuSpec gpu;
              TESSERA_ASSIGN_OR_RETURN(std::string model, RequiredString(g, at, "model", 128));
              StatusOr<GpuModelId> id = catalog.Find(model);
              if (!id.ok()) {
                return r_.Error(ChildPath(at, "model"), id.status().message());
              }
              gpu.model = *id;
              if (const Json* mode = FindField(g, "mode")) {
                TESSERA_ASSIGN_OR_RETURN(std::string name,
                                         r_.String(*mode, ChildPath(at, "mode"), 64));
                StatusOr<SharingMode> parsed = ParseSharingMode(name);
                if (!parsed.ok()) {
                  return r_.Error(ChildPath(at, "mode"), parsed.status().message());
                }
                gpu.mode = *parsed;
              }
              TESSERA_RETURN_IF_ERROR(OptInt(g, at, "replicas", 0, kMaxTimesliceReplicas,
                                             &gpu.replicas));  // timeslice only
              TESSERA_RETURN_IF_ERROR(OptInt(g, at, "numa_node", 0, 63, &gpu.numa_node));
              TESSERA_RETURN_IF_ERROR(
                  OptInt(g, at, "nvlink_domain", -1, kInt32Max, &gpu.nvlink_domain));
              std::string uuid;
              TESSERA_RETURN_IF_ERROR(OptString(g, at, "uuid", kMaxIdLength, &uuid));
              std::vector<NodeMigInstance> instances;
              const GpuModel& m = catalog.Get(gpu.model);
              if (Status listed_mig = List(
                      g, at, "mig_instances", kMaxMigPerGpu,
                      [&](const Json& mi, const std::string& mat) {
                        TESSERA_RETURN_IF_ERROR(r_.CheckObject(mi, mat));
                        NodeMigInstance instance;
                        TESSERA_RETURN_IF_ERROR(
                            OptString(mi, mat, "uuid", kMaxIdLength, &instance.uuid));
                        TESSERA_ASSIGN_OR_RETURN(instance.profile,
                                                 RequiredString(mi, mat, "profile", 64));
                        TESSERA_RETURN_IF_ERROR(
                            OptInt(mi, mat, "start", -1, kMigMemorySlots - 1, &instance.start));
                        std::optional<int> p = m.FindMigProfile(instance.profile);
                        if (!p) {
                          return r_.Error(
                              ChildPath(mat, "profile"),
                              "'" + instance.profile + "' is not a MIG profile of " + m.name);
                        }
                        const std::vector<int>& starts = m.mig_profiles[*p].starts;
                        if (instance.start != -1 && std::find(starts.begin(), starts.end(),
                                                              instance.start) == starts.end()) {
                          return r_.Error(ChildPath(mat, "start"),
                                          "slot " + std::to_string(instance.start) +
                                              " is not a legal start of " + instance.profile);
                        }
                        instances.push_back(std::move(instance));
                        return Status::Ok();
                      });
                  !listed_mig.ok()) {
                return listed_mig;
              }
              if (!instances.empty() && gpu.mode != SharingMode::kMig) {
                return r_.Error(ChildPath(at, "mig_instances"), "the GPU is not in mig mode");
              }
              spec.gpus.push_back(gpu);
              inv.gpu_uuids.push_back(std::move(uuid));
              inv.mig_instances.push_back(std::move(instances));
              return Status::Ok();
            });
        !listed.ok()) {
      return listed;
    }
    Status valid = ValidateNodeSpec(spec, catalog);
    if (!valid.ok()) {
      return r_.Error(path, valid.message());
    }
    return inv;
  }

  Status Reports(const Json& j, const std::string& path, std::vector<TaskReport>* out) {
    return List(j, path, "tasks", kMaxTasksPerMessage, [&](const Json& v, const std::string& at) {
      TESSERA_ASSIGN_OR_RETURN(TaskReport report, Report(v, at));
      out->push_back(std::move(report));
      return Status::Ok();
    });
  }

 private:
  FieldReader& r_;
};

// Runs decode(decoder) with a fresh reader and no exception escaping.
template <typename T, typename F>
StatusOr<T> Decode(std::string_view what, F decode) {
  try {
    FieldReader reader;
    Decoder decoder(&reader);
    return decode(decoder);
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string(what) + ": " + ToValidUtf8(e.what()));
  }
}

}  // namespace

bool operator==(const NodeInventory& a, const NodeInventory& b) {
  if (a.gpu_uuids != b.gpu_uuids || a.mig_instances != b.mig_instances) {
    return false;
  }
  const NodeSpec& x = a.spec;
  const NodeSpec& y = b.spec;
  if (x.name != y.name || x.cpu != y.cpu || x.memory != y.memory || x.numa_nodes != y.numa_nodes ||
      x.labels != y.labels || x.gpus.size() != y.gpus.size()) {
    return false;
  }
  for (size_t i = 0; i < x.gpus.size(); ++i) {
    const GpuSpec& g = x.gpus[i];
    const GpuSpec& h = y.gpus[i];
    if (g.model != h.model || g.mode != h.mode || g.numa_node != h.numa_node ||
        g.nvlink_domain != h.nvlink_domain) {
      return false;
    }
  }
  return true;
}

nlohmann::json ToJson(const NodeMigInstance& m) {
  return {{"uuid", Utf8(m.uuid)}, {"profile", Utf8(m.profile)}, {"start", m.start}};
}

nlohmann::json ToJson(const NodeInventory& inventory, const GpuCatalog& catalog) {
  const NodeSpec& spec = inventory.spec;
  Json labels = Json::object();
  for (const auto& [k, v] : spec.labels) {
    labels[Utf8(k)] = Utf8(v);
  }
  Json gpus = Json::array();
  for (size_t i = 0; i < spec.gpus.size(); ++i) {
    const GpuSpec& g = spec.gpus[i];
    Json gpu = {
        {"model", g.model.valid() && g.model.value() < catalog.size() ? catalog.Get(g.model).name
                                                                      : std::string()},
        {"mode", std::string(SharingModeName(g.mode))},
        {"numa_node", g.numa_node},
        {"nvlink_domain", g.nvlink_domain},
        {"uuid", i < inventory.gpu_uuids.size() ? Utf8(inventory.gpu_uuids[i]) : ""}};
    Json instances = Json::array();
    if (i < inventory.mig_instances.size()) {
      for (const NodeMigInstance& m : inventory.mig_instances[i]) {
        instances.push_back(ToJson(m));
      }
    }
    if (g.mode == SharingMode::kTimeslice) {
      gpu["replicas"] = g.replicas;  // absent otherwise: older controllers see what they knew
    }
    gpu["mig_instances"] = std::move(instances);
    gpus.push_back(std::move(gpu));
  }
  return {{"name", Utf8(spec.name)},           {"cpu_milli", spec.cpu.value()},
          {"memory_mib", spec.memory.value()}, {"numa_nodes", spec.numa_nodes},
          {"labels", std::move(labels)},       {"gpus", std::move(gpus)}};
}

nlohmann::json ToJson(const TaskKey& key) {
  return {{"job", key.job}, {"task", key.task}, {"attempt", key.attempt}};
}

nlohmann::json ToJson(const TaskReport& report) {
  Json j = {
      {"key", ToJson(report.key)},           {"state", std::string(TaskStateName(report.state))},
      {"exit_code", report.exit_code},       {"signal", report.signal},
      {"checkpointed", report.checkpointed}, {"message", Utf8(report.message)},
      {"log_offset", report.log_offset}};
  if (!report.log_chunk.empty()) {
    j["log_b64"] = Base64Encode(report.log_chunk);
  }
  if (report.pty_port > 0) {
    j["pty_port"] = report.pty_port;
  }
  return j;
}

nlohmann::json ToJson(const MigRequest& mig) {
  return {{"gpu", mig.gpu}, {"profile", Utf8(mig.profile)}, {"start", mig.start}};
}

nlohmann::json ToJson(const TaskLaunch& launch) {
  Json mig = Json::array();
  for (const MigRequest& m : launch.mig) {
    mig.push_back(ToJson(m));
  }
  Json j = {{"key", ToJson(launch.key)},
          {"job_name", Utf8(launch.job_name)},
          {"command", Strings(launch.command)},
          {"env", StringMap(launch.env)},
          {"gpus", launch.gpus},
          {"mig", std::move(mig)},
          {"cpu_milli", launch.cpu_milli},
          {"memory_mib", launch.memory_mib},
          {"gpu_milli", launch.gpu_milli},
          {"gpu_memory_mib", launch.gpu_memory_mib},
          {"numa_nodes", launch.numa_nodes},
          {"working_dir", Utf8(launch.working_dir)},
          {"checkpoint_dir", Utf8(launch.checkpoint_dir)},
          {"submit_dir", Utf8(launch.submit_dir)},
          {"checkpoint_managed", launch.checkpoint_managed},
          {"uid", launch.uid},
          {"gid", launch.gid}};
  if (!launch.pty_secret.empty()) {
    j["pty_secret"] = Utf8(launch.pty_secret);
  }
  if (!launch.container.empty()) {
    j["container"] = ContainerSpecToJson(launch.container);
  }
  if (!launch.registry_auth.empty()) {
    j["registry_auth"] = Utf8(launch.registry_auth);
  }
  return j;
}

nlohmann::json ToJson(const TaskStop& stop) {
  return {{"key", ToJson(stop.key)}, {"grace_ms", stop.grace_ms}, {"signal", stop.signal}};
}

nlohmann::json ToJson(const MigTelemetry& m) {
  return {{"uuid", Utf8(m.uuid)}, {"profile", Utf8(m.profile)},   {"start", m.start},
          {"gi_id", m.gi_id},     {"fb_used_mib", m.fb_used_mib}, {"fb_free_mib", m.fb_free_mib}};
}

nlohmann::json ToJson(const GpuTelemetry& t) {
  Json mig = Json::array();
  for (const MigTelemetry& m : t.mig) {
    mig.push_back(ToJson(m));
  }
  return {{"index", t.index},
          {"uuid", Utf8(t.uuid)},
          {"lost", t.lost},
          {"util_pct", t.util_pct},
          {"fb_used_mib", t.fb_used_mib},
          {"fb_free_mib", t.fb_free_mib},
          {"temp_c", t.temp_c},
          {"power_mw", t.power_mw},
          {"sm_clock_mhz", t.sm_clock_mhz},
          {"xid_count", t.xid_count},
          {"last_xid", t.last_xid},
          {"ecc_sbe_volatile", t.ecc_sbe_volatile},
          {"ecc_dbe_volatile", t.ecc_dbe_volatile},
          {"ecc_sbe_aggregate", t.ecc_sbe_aggregate},
          {"ecc_dbe_aggregate", t.ecc_dbe_aggregate},
          {"mig", std::move(mig)}};
}

nlohmann::json ToJson(const RegisterRequest& request, const GpuCatalog& catalog) {
  Json tasks = Json::array();
  for (const TaskReport& t : request.tasks) {
    tasks.push_back(ToJson(t));
  }
  return {{"agent_id", Utf8(request.agent_id)},
          {"inventory", ToJson(request.inventory, catalog)},
          {"tasks", std::move(tasks)}};
}

nlohmann::json ToJson(const RegisterResponse& response) {
  Json j = {{"node", Utf8(response.node)},
          {"heartbeat_interval_ms", response.heartbeat_interval_ms},
          {"node_timeout_ms", response.node_timeout_ms}};
  if (!response.credential.empty()) {
    j["credential"] = response.credential;
  }
  if (response.channel_port > 0) {
    j["channel_port"] = response.channel_port;
  }
  return j;
}

nlohmann::json ToJson(const HeartbeatRequest& request) {
  Json tasks = Json::array();
  for (const TaskReport& t : request.tasks) {
    tasks.push_back(ToJson(t));
  }
  Json j = {{"node", Utf8(request.node)},
            {"agent_id", Utf8(request.agent_id)},
            {"tasks", std::move(tasks)}};
  if (!request.gpus.empty()) {
    Json gpus = Json::array();
    for (const GpuTelemetry& g : request.gpus) {
      gpus.push_back(ToJson(g));
    }
    j["gpus"] = std::move(gpus);
  }
  return j;
}

nlohmann::json ToJson(const HeartbeatResponse& response) {
  Json launch = Json::array();
  for (const TaskLaunch& l : response.launch) {
    launch.push_back(ToJson(l));
  }
  Json stop = Json::array();
  for (const TaskStop& s : response.stop) {
    stop.push_back(ToJson(s));
  }
  Json j = {{"launch", std::move(launch)},
            {"stop", std::move(stop)},
            {"reregister", response.reregister}};
  if (response.heartbeat_interval_ms > 0) {
    j["heartbeat_interval_ms"] = response.heartbeat_interval_ms;
  }
  return j;
}

StatusOr<NodeInventory> NodeInventoryFromJson(const nlohmann::json& j, const GpuCatalog& catalog) {
  return Decode<NodeInventory>("inventory",
                               [&](Decoder& d) { return d.Inventory(j, "", catalog); });
}

StatusOr<TaskKey> TaskKeyFromJson(const nlohmann::json& j) {
  return Decode<TaskKey>("task key", [&](Decoder& d) { return d.Key(j, ""); });
}

StatusOr<TaskReport> TaskReportFromJson(const nlohmann::json& j) {
  return Decode<TaskReport>("task report", [&](Decoder& d) { return d.Report(j, ""); });
}

StatusOr<TaskLaunch> TaskLaunchFromJson(const nlohmann::json& j) {
  return Decode<TaskLaunch>("task launch", [&](Decoder& d) { return d.Launch(j, ""); });
}

StatusOr<TaskStop> TaskStopFromJson(const nlohmann::json& j) {
  return Decode<TaskStop>("task stop", [&](Decoder& d) { return d.Stop(j, ""); });
}

StatusOr<MigTelemetry> MigTelemetryFromJson(const nlohmann::json& j) {
  return Decode<MigTelemetry>("MIG telemetry", [&](Decoder& d) { return d.MigSample(j, ""); });
}

StatusOr<GpuTelemetry> GpuTelemetryFromJson(const nlohmann::json& j) {
  return Decode<GpuTelemetry>("GPU telemetry", [&](Decoder& d) { return d.GpuSample(j, ""); });
}

StatusOr<RegisterRequest> RegisterRequestFromJson(const nlohmann::json& j,
                                                  const GpuCatalog& catalog) {
  return Decode<RegisterRequest>("register request", [&](Decoder& d) -> StatusOr<RegisterRequest> {
    FieldReader check;
    TESSERA_RETURN_IF_ERROR(check.CheckObject(j, ""));
    RegisterRequest request;
    TESSERA_ASSIGN_OR_RETURN(request.agent_id, d.RequiredString(j, "", "agent_id", kMaxIdLength));
    Status missing;
    const Json* inventory = d.Required(j, "", "inventory", &missing);
    if (inventory == nullptr) {
      return missing;
    }
    TESSERA_ASSIGN_OR_RETURN(request.inventory, d.Inventory(*inventory, "inventory", catalog));
    TESSERA_RETURN_IF_ERROR(d.Reports(j, "", &request.tasks));
    return request;
  });
}

StatusOr<RegisterResponse> RegisterResponseFromJson(const nlohmann::json& j) {
  return Decode<RegisterResponse>(
      "register response", [&](Decoder& d) -> StatusOr<RegisterResponse> {
        FieldReader check;
        TESSERA_RETURN_IF_ERROR(check.CheckObject(j, ""));
        RegisterResponse response;
        TESSERA_ASSIGN_OR_RETURN(response.node, d.RequiredString(j, "", "node", kMaxIdLength));
        TESSERA_RETURN_IF_ERROR(d.OptInt(j, "", "heartbeat_interval_ms", 1, kMaxHeartbeatMs,
                                         &response.heartbeat_interval_ms));
        TESSERA_RETURN_IF_ERROR(d.OptInt(j, "", "node_timeout_ms", 0, kMaxNodeTimeoutMs,
                                         &response.node_timeout_ms));
        TESSERA_RETURN_IF_ERROR(
            d.OptString(j, "", "credential", kMaxIdLength, &response.credential));
        TESSERA_RETURN_IF_ERROR(
            d.OptInt(j, "", "channel_port", 0, kMaxPort, &response.channel_port));
        return response;
      });
}

StatusOr<HeartbeatRequest> HeartbeatRequestFromJson(const nlohmann::json& j) {
  return Decode<HeartbeatRequest>(
      "heartbeat request", [&](Decoder& d) -> StatusOr<HeartbeatRequest> {
        FieldReader check;
        TESSERA_RETURN_IF_ERROR(check.CheckObject(j, ""));
        HeartbeatRequest request;
        TESSERA_ASSIGN_OR_RETURN(request.node, d.RequiredString(j, "", "node", kMaxIdLength));
        TESSERA_ASSIGN_OR_RETURN(request.agent_id,
                                 d.RequiredString(j, "", "agent_id", kMaxIdLength));
        TESSERA_RETURN_IF_ERROR(d.Reports(j, "", &request.tasks));
        if (Status listed = d.List(j, "", "gpus", kMaxGpusPerNode,
                                   [&](const Json& v, const std::string& at) {
                                     TESSERA_ASSIGN_OR_RETURN(GpuTelemetry g, d.GpuSample(v, at));
                                     request.gpus.push_back(std::move(g));
                                     return Status::Ok();
                                   });
            !listed.ok()) {
          return listed;
        }
        return request;
      });
}

StatusOr<HeartbeatResponse> HeartbeatResponseFromJson(const nlohmann::json& j) {
  return Decode<HeartbeatResponse>(
      "heartbeat response", [&](Decoder& d) -> StatusOr<HeartbeatResponse> {
        FieldReader check;
        TESSERA_RETURN_IF_ERROR(check.CheckObject(j, ""));
        HeartbeatResponse response;
        if (Status listed = d.List(j, "", "launch", kMaxTasksPerMessage,
                                   [&](const Json& v, const std::string& at) {
                                     TESSERA_ASSIGN_OR_RETURN(TaskLaunch l, d.Launch(v, at));
                                     response.launch.push_back(std::move(l));
                                     return Status::Ok();
                                   });
            !listed.ok()) {
          return listed;
        }
        if (Status listed = d.List(j, "", "stop", kMaxTasksPerMessage,
                                   [&](const Json& v, const std::string& at) {
                                     TESSERA_ASSIGN_OR_RETURN(TaskStop s, d.Stop(v, at));
                                     response.stop.push_back(std::move(s));
                                     return Status::Ok();
                                   });
            !listed.ok()) {
          return listed;
        }
        TESSERA_RETURN_IF_ERROR(d.OptBool(j, "", "reregister", &response.reregister));
        TESSERA_RETURN_IF_ERROR(d.OptInt(j, "", "heartbeat_interval_ms", 0, kMaxHeartbeatMs,
                                         &response.heartbeat_interval_ms));
        return response;
      });
}

}  // namespace tessera
