#include "api/job_codec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "api/job_codec_container.h"
#include "api/job_codec_relations.h"
#include "api/job_keys.h"
#include "api/json_fields.h"
#include "api/units.h"
#include "api/yaml_reader.h"
#include "base/strings.h"

namespace tessera {
namespace {

namespace keys = job_keys;

constexpr int64_t kDefaultCpuMilli = 1000;
constexpr int64_t kDefaultMemoryMiB = 1024;
constexpr size_t kMaxUserLength = 128;
constexpr size_t kMaxMigProfileLength = 64;
// A YAML document may share nodes through aliases; its JSON form must stay small.
constexpr size_t kMaxYamlNodes = 100'000;
constexpr size_t kMaxYamlBytes = 4 << 20;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// Reads a JSON document (from JSON text, YAML or code) into a JobSubmission.
class JobDecoder {
 public:
  // `embedded`: the job sits in another format's document (may be null).
  // `yaml_scalars`: the document came from YAML, whose plain scalars (`name: 7`) become
  // numbers; from JSON a name must be a string.
  explicit JobDecoder(const GpuCatalog& catalog, const EmbeddedJobOptions* embedded = nullptr,
                      bool yaml_scalars = false)
      : catalog_(catalog), embedded_(embedded), yaml_scalars_(yaml_scalars || embedded != nullptr) {}

  const std::string& error_path() const { return r_.error_path(); }

  StatusOr<JobSubmission> Decode(const Json& j) {
    JobSubmission job;
    TESSERA_RETURN_IF_ERROR(Top(j, &job));
    return job;
  }

 private:
  Status Top(const Json& j, JobSubmission* job) {
    std::vector<std::string_view> allowed(keys::kTopLevel.begin(), keys::kTopLevel.end());
    if (embedded_ != nullptr) {
      allowed.insert(allowed.end(), embedded_->extra_keys.begin(), embedded_->extra_keys.end());
    }
    TESSERA_RETURN_IF_ERROR(r_.CheckObject(j, "", allowed));
    JobSpec& spec = job->spec;
    if (const Json* v = FindField(j, keys::kName)) {
      TESSERA_ASSIGN_OR_RETURN(spec.name, Name(*v, "name"));
    }
    if (const Json* v = FindField(j, keys::kQueue)) {
      TESSERA_ASSIGN_OR_RETURN(spec.queue, Name(*v, "queue"));
    }
    if (const Json* v = FindField(j, keys::kUser)) {
      TESSERA_ASSIGN_OR_RETURN(spec.user, yaml_scalars_ ? r_.ScalarText(*v, "user", kMaxUserLength)
                                                        : r_.String(*v, "user", kMaxUserLength));
      for (char c : spec.user) {
        if (!IsNameChar(c) && c != '@') {
          return r_.Error("user",
                          "'" + spec.user + "' has characters other than A-Z a-z 0-9 . _ - @");
        }
      }
    }
    if (const Json* v = FindField(j, keys::kPriority)) {
      TESSERA_ASSIGN_OR_RETURN(spec.priority, Priority(*v));
    }
    TESSERA_RETURN_IF_ERROR(ReadJobContainer(j, r_, job));
    if (const Json* command = FindField(j, keys::kCommand)) {
      TESSERA_RETURN_IF_ERROR(Command(*command, &job->command));
    } else if ((embedded_ == nullptr || embedded_->require_command) && job->container.empty()) {
      // An image has a command of its own.
      return r_.Error("command", "is required: a list of arguments, or one string run by /bin/sh");
    }
    if (const Json* v = FindField(j, keys::kEnv)) {
      TESSERA_RETURN_IF_ERROR(Env(*v, &job->env));
    }
    if (const Json* v = FindField(j, keys::kWorkingDir)) {
      TESSERA_ASSIGN_OR_RETURN(job->working_dir, Path(*v, "working_dir"));
    }
    if (const Json* v = FindField(j, keys::kSubmitDir)) {
      TESSERA_ASSIGN_OR_RETURN(job->submit_dir, Path(*v, "submit_dir"));
    }
    int64_t replicas = 1;
    if (const Json* v = FindField(j, keys::kReplicas)) {
      TESSERA_ASSIGN_OR_RETURN(replicas, r_.Int(*v, "replicas", 1, kMaxReplicas));
    }
    TaskRequest task;
    const Json* resources = FindField(j, keys::kResources);
    TESSERA_RETURN_IF_ERROR(Resources(resources, &task));
    // The server fills these per GPU (queue_resource_defaults.h); others keep 1 core, 1 GiB.
    job->cpu_defaulted = resources == nullptr || FindField(*resources, keys::kCpu) == nullptr;
    job->memory_defaulted = resources == nullptr || FindField(*resources, keys::kMemory) == nullptr;
    if (const Json* v = FindField(j, keys::kTopology)) {
      TESSERA_RETURN_IF_ERROR(Topology(*v, &spec.topology));
    }
    if (const Json* v = FindField(j, keys::kCheckpoint)) {
      TESSERA_RETURN_IF_ERROR(Checkpoint(*v, job));
    }
    if (const Json* v = FindField(j, keys::kRuntimeLimit)) {
      TESSERA_ASSIGN_OR_RETURN(spec.runtime_limit,
                               r_.Quantity(*v, "runtime_limit", &ParseDurationMicros));
    }
    if (const Json* v = FindField(j, keys::kPreemptible)) {
      TESSERA_ASSIGN_OR_RETURN(spec.preemptible, r_.Bool(*v, "preemptible"));
    }
    if (const Json* v = FindField(j, keys::kHoldIfUnfit)) {
      TESSERA_ASSIGN_OR_RETURN(job->hold_if_unfit, r_.Bool(*v, "hold_if_unfit"));
    }
    if (const Json* v = FindField(j, keys::kRestart); v != nullptr && !v->is_null()) {
      RestartPolicy restart;
      TESSERA_RETURN_IF_ERROR(Restart(*v, &restart));
      job->restart = restart;
    }
    TESSERA_RETURN_IF_ERROR(ReadJobRelations(j, r_, job));
    task.needs_containers = !job->container.empty();
    spec.tasks.assign(static_cast<size_t>(replicas), task);

    // The queue may be left to the server; check everything else.
    JobSpec check = spec;
    if (check.queue.empty()) {
      check.queue = "default";
    }
    Status valid = ValidateJobSpec(check, catalog_);
    if (!valid.ok()) {
      return r_.Error("", valid.message());
    }
    return Status::Ok();
  }

  // A number, or where the enclosing format names them, a priority class.
  StatusOr<int32_t> Priority(const Json& v) {
    if (v.is_string() && embedded_ != nullptr && embedded_->priority_class) {
      const std::string& name = v.get_ref<const std::string&>();
      if (std::optional<int32_t> p = embedded_->priority_class(name)) {
        return *p;
      }
      if (!ParseInt64(name).ok()) {
        return r_.Error("priority", "'" + ToValidUtf8(name.substr(0, 80)) +
                                        "' is neither a number nor a priority class");
      }
    }
    if (v.is_string() && embedded_ == nullptr && !ParseInt64(v.get_ref<const std::string&>()).ok()) {
      return 0;  // a class name: ReadJobRelations keeps it for the server
    }
    TESSERA_ASSIGN_OR_RETURN(int64_t p, r_.Int(v, "priority", std::numeric_limits<int32_t>::min(),
                                               std::numeric_limits<int32_t>::max()));
    return static_cast<int32_t>(p);
  }

  StatusOr<std::string> Name(const Json& v, std::string_view path) {
    TESSERA_ASSIGN_OR_RETURN(std::string name, yaml_scalars_
                                                   ? r_.ScalarText(v, path, kMaxNameLength * 4)
                                                   : r_.String(v, path, kMaxNameLength * 4));
    if (!name.empty() && !IsValidJobName(name)) {
      return r_.Error(path,
                      "'" + ToValidUtf8(name.substr(0, 160)) +
                          "' is not a valid name: use 1 to 128 characters of A-Z a-z 0-9 . _ -");
    }
    return name;
  }

  StatusOr<std::string> Path(const Json& v, std::string_view path) {
    TESSERA_ASSIGN_OR_RETURN(std::string p, r_.String(v, path, kMaxPathLength));
    if (!p.empty() && p[0] != '/') {
      return r_.Error(path, "must be an absolute path, got '" + p.substr(0, 160) + "'");
    }
    return p;
  }

  Status Command(const Json& v, std::vector<std::string>* out) {
    if (v.is_string()) {
      TESSERA_ASSIGN_OR_RETURN(std::string text, r_.String(v, "command", kMaxCommandBytes));
      if (Trim(text).empty()) {
        return r_.Error("command", "must not be empty");
      }
      *out = {"/bin/sh", "-c", std::move(text)};
      return Status::Ok();
    }
    if (!v.is_array()) {
      return r_.Error("command",
                      "expected a list of arguments or a string, got " + DescribeJson(v));
    }
    TESSERA_RETURN_IF_ERROR(r_.CheckArray(v, "command", kMaxCommandItems));
    if (v.empty()) {
      return r_.Error("command", "must not be empty");
    }
    size_t total = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string path = IndexPath("command", i);
      TESSERA_ASSIGN_OR_RETURN(std::string arg, r_.ScalarText(v[i], path, kMaxCommandBytes));
      if (arg.empty()) {
        return r_.Error(path, "must not be empty");
      }
      total += arg.size();
      if (total > kMaxCommandBytes) {
        return r_.Error("command", "longer than " + std::to_string(kMaxCommandBytes) + " bytes");
      }
      out->push_back(std::move(arg));
    }
    return Status::Ok();
  }

  Status Env(const Json& v, std::map<std::string, std::string>* out) {
    TESSERA_RETURN_IF_ERROR(r_.CheckObject(v, "env"));
    size_t total = 0;
    for (const auto& [key, value] : v.items()) {
      const std::string path = ChildPath("env", key);
      if (!IsValidEnvName(key)) {
        return r_.Error(path, "'" + ToValidUtf8(key.substr(0, 80)) +
                                  "' is not a variable name: use [A-Za-z_][A-Za-z0-9_]*");
      }
      std::string text;
      if (!value.is_null()) {
        TESSERA_ASSIGN_OR_RETURN(text, r_.ScalarText(value, path, kMaxEnvBytes));
      }
      total += key.size() + text.size() + 2;
      if (total > kMaxEnvBytes) {
        return r_.Error("env", "more than " + std::to_string(kMaxEnvBytes) + " bytes in all");
      }
      (*out)[key] = std::move(text);
    }
    return Status::Ok();
  }

  Status GpuModels(const Json& v, GpuModelSet* out) {
    const std::string path = "resources.gpu_model";
    auto add = [&](std::string_view name, const std::string& at) -> Status {
      StatusOr<GpuModelSet> set = catalog_.ParseModelSet(name);
      if (!set.ok()) {
        return r_.Error(at, set.status().message());
      }
      for (const GpuModel& m : catalog_.models()) {
        if (set->Contains(m.id)) {
          out->Add(m.id);
        }
      }
      return Status::Ok();
    };
    if (v.is_array()) {
      TESSERA_RETURN_IF_ERROR(r_.CheckArray(v, path, GpuModelSet::kMaxModels));
      for (size_t i = 0; i < v.size(); ++i) {
        const std::string at = IndexPath(path, i);
        TESSERA_ASSIGN_OR_RETURN(std::string name, r_.String(v[i], at, 128));
        if (Trim(name).empty()) {
          return r_.Error(at, "must not be empty");
        }
        TESSERA_RETURN_IF_ERROR(add(name, at));
      }
    } else {
      TESSERA_ASSIGN_OR_RETURN(std::string name, r_.String(v, path, 1024));
      TESSERA_RETURN_IF_ERROR(add(name, path));
    }
    if (out->empty()) {
      return r_.Error(path, "names no GPU model; leave it out to allow any model");
    }
    return Status::Ok();
  }

  // The MIG profile names the allowed models offer, for messages.
  std::string MigProfilesOf(const GpuModelSet& models) const {
    std::vector<std::string> names;
    for (const GpuModel& m : catalog_.models()) {
      if (!models.Allows(m.id)) {
        continue;
      }
      for (const MigProfile& p : m.mig_profiles) {
        if (std::find(names.begin(), names.end(), p.name) == names.end()) {
          names.push_back(p.name);
        }
      }
    }
    return names.empty() ? std::string("none") : Join(names, ", ");
  }

  Status Resources(const Json* v, TaskRequest* task) {
    task->cpu = MilliCpu(kDefaultCpuMilli);
    task->memory = MiB(kDefaultMemoryMiB);
    if (v == nullptr) {
      return Status::Ok();
    }
    TESSERA_RETURN_IF_ERROR(r_.CheckObject(*v, "resources", keys::kResourceKeys));
    const RequestLimits limits;
    std::optional<int64_t> gpus;
    if (const Json* f = FindField(*v, keys::kGpus)) {
      TESSERA_ASSIGN_OR_RETURN(gpus, r_.Int(*f, "resources.gpus", 0, limits.max_gpus_per_task));
    }
    if (const Json* f = FindField(*v, keys::kGpuModel)) {
      TESSERA_RETURN_IF_ERROR(GpuModels(*f, &task->models));
    }
    std::optional<int64_t> share;
    std::string share_path;
    if (const Json* f = FindField(*v, keys::kGpuFraction)) {
      share_path = "resources.gpu_fraction";
      TESSERA_ASSIGN_OR_RETURN(share, r_.Quantity(*f, share_path, &ParseGpuMilli));
    }
    if (const Json* f = FindField(*v, keys::kGpuMilli)) {
      if (share) {
        return r_.Error("resources.gpu_milli", "give gpu_fraction or gpu_milli, not both");
      }
      share_path = "resources.gpu_milli";
      TESSERA_ASSIGN_OR_RETURN(share, r_.Int(*f, share_path, 1, kMilliPerGpu));
    }
    std::optional<int64_t> gpu_memory;
    if (const Json* f = FindField(*v, keys::kGpuMemory)) {
      TESSERA_ASSIGN_OR_RETURN(gpu_memory,
                               r_.Quantity(*f, "resources.gpu_memory", &ParseMemoryMiB));
    }
    if (const Json* f = FindField(*v, keys::kMig)) {
      TESSERA_ASSIGN_OR_RETURN(task->mig_profile,
                               r_.String(*f, "resources.mig", kMaxMigProfileLength));
      if (Trim(task->mig_profile).empty()) {
        return r_.Error("resources.mig", "must not be empty");
      }
    }
    if (const Json* f = FindField(*v, keys::kCpu)) {
      TESSERA_ASSIGN_OR_RETURN(int64_t cpu, r_.Quantity(*f, "resources.cpu", &ParseCpuMilli));
      task->cpu = MilliCpu(cpu);
    }
    if (const Json* f = FindField(*v, keys::kMemory)) {
      TESSERA_ASSIGN_OR_RETURN(int64_t mem, r_.Quantity(*f, "resources.memory", &ParseMemoryMiB));
      task->memory = MiB(mem);
    }
    if (const Json* f = FindField(*v, keys::kGpuTopology)) {
      TESSERA_ASSIGN_OR_RETURN(std::string t, r_.String(*f, "resources.gpu_topology", 64));
      if (t == "prefer-local") {
        task->topology = GpuTopology::kPreferLocal;
      } else if (t == "require-local") {
        task->topology = GpuTopology::kRequireLocal;
      } else if (t == "any") {
        task->topology = GpuTopology::kAny;
      } else {
        return r_.Error(
            "resources.gpu_topology",
            "expected prefer-local, require-local or any, got '" + t.substr(0, 64) + "'");
      }
    }

    if (task->wants_mig()) {
      if (gpus && *gpus != 1) {
        return r_.Error("resources.gpus",
                        "a MIG task takes exactly one instance: set gpus to 1 "
                        "or leave it out, got " +
                            std::to_string(*gpus));
      }
      if (share) {
        return r_.Error(share_path, "mig and a GPU share exclude each other");
      }
      if (gpu_memory) {
        return r_.Error("resources.gpu_memory", "the MIG profile fixes the memory; leave it out");
      }
      bool found = false;
      for (const GpuModel& m : catalog_.models()) {
        found |= task->models.Allows(m.id) && m.FindMigProfile(task->mig_profile).has_value();
      }
      if (!found) {
        return r_.Error("resources.mig", "no allowed GPU model has the MIG profile '" +
                                             task->mig_profile +
                                             "'; profiles there: " + MigProfilesOf(task->models));
      }
      task->gpu_count = 1;
      task->gpu_milli = MilliGpu(0);
    } else if (share) {
      if (gpus && *gpus != 1) {
        return r_.Error("resources.gpus",
                        "a GPU share takes one GPU: set gpus to 1 or leave it "
                        "out, got " +
                            std::to_string(*gpus));
      }
      task->gpu_count = 1;
      task->gpu_milli = MilliGpu(*share);
    } else {
      task->gpu_count = static_cast<int>(gpus.value_or(0));
      task->gpu_milli = MilliGpu(task->gpu_count > 0 ? kMilliPerGpu : 0);
    }
    if (task->gpu_count == 0) {
      if (gpu_memory) {
        return r_.Error("resources.gpu_memory", "needs gpus >= 1");
      }
      if (!task->models.empty()) {
        return r_.Error("resources.gpu_model", "needs gpus >= 1");
      }
    }
    task->gpu_memory = MiB(gpu_memory.value_or(0));
    Status valid = ValidateTaskRequest(*task, catalog_, limits);
    if (!valid.ok()) {
      return r_.Error("resources", valid.message());
    }
    return Status::Ok();
  }

  Status Topology(const Json& v, TopologyPolicy* out) {
    TESSERA_RETURN_IF_ERROR(r_.CheckObject(v, "topology", keys::kTopologyKeys));
    if (const Json* f = FindField(v, keys::kScope)) {
      TESSERA_ASSIGN_OR_RETURN(std::string scope, r_.String(*f, "topology.scope", 64));
      StatusOr<TopologyScope> parsed = ParseTopologyScope(scope);
      if (!parsed.ok()) {
        return r_.Error("topology.scope", "expected node, nvlink, rack, block or any, got '" +
                                              scope.substr(0, 64) + "'");
      }
      out->scope = *parsed;
    }
    if (const Json* f = FindField(v, keys::kHard)) {
      TESSERA_ASSIGN_OR_RETURN(out->hard, r_.Bool(*f, "topology.hard"));
    }
    return Status::Ok();
  }

  Status Checkpoint(const Json& v, JobSubmission* job) {
    TESSERA_RETURN_IF_ERROR(r_.CheckObject(v, "checkpoint", keys::kCheckpointKeys));
    if (const Json* f = FindField(v, keys::kInterval)) {
      TESSERA_ASSIGN_OR_RETURN(job->spec.checkpoint_interval,
                               r_.Quantity(*f, "checkpoint.interval", &ParseDurationMicros));
    }
    if (const Json* f = FindField(v, keys::kOnSignal)) {
      TESSERA_ASSIGN_OR_RETURN(job->spec.checkpoint_on_signal, r_.Bool(*f, "checkpoint.on_signal"));
    }
    if (const Json* f = FindField(v, keys::kDir)) {
      TESSERA_ASSIGN_OR_RETURN(job->checkpoint_dir, Path(*f, "checkpoint.dir"));
    }
    return Status::Ok();
  }

  Status Restart(const Json& v, RestartPolicy* out) {
    TESSERA_RETURN_IF_ERROR(r_.CheckObject(v, "restart", keys::kRestartKeys));
    if (const Json* f = FindField(v, keys::kMax)) {
      TESSERA_ASSIGN_OR_RETURN(int64_t max, r_.Int(*f, "restart.max", 0, kMaxRestarts));
      out->max = static_cast<int>(max);
    }
    if (const Json* f = FindField(v, keys::kOn)) {
      if (f->is_string()) {
        TESSERA_ASSIGN_OR_RETURN(out->on, ParseRestartOnList(f->get<std::string>(), "restart.on"));
      } else {
        TESSERA_RETURN_IF_ERROR(r_.CheckArray(*f, "restart.on", 3));
        if (f->empty()) {
          return r_.Error("restart.on", "must name at least one of failure, node-lost, gpu-fault");
        }
        out->on = 0;
        for (size_t i = 0; i < f->size(); ++i) {
          const std::string path = IndexPath("restart.on", i);
          TESSERA_ASSIGN_OR_RETURN(std::string name, r_.String((*f)[i], path, 64));
          TESSERA_ASSIGN_OR_RETURN(uint8_t bit, ParseRestartOnList(name, path));
          out->on |= bit;
        }
      }
    }
    if (const Json* f = FindField(v, keys::kBackoff)) {
      TESSERA_ASSIGN_OR_RETURN(out->backoff,
                               r_.Quantity(*f, "restart.backoff", &ParseDurationMicros));
      if (out->backoff < 0 || out->backoff > kMaxRestartBackoff) {
        return r_.Error("restart.backoff",
                        "must be between 0s and 1h, got " + FormatDuration(out->backoff));
      }
    }
    return Status::Ok();
  }

  const GpuCatalog& catalog_;
  const EmbeddedJobOptions* embedded_;
  const bool yaml_scalars_;
  FieldReader r_;
};

// ---- YAML to JSON -------------------------------------------------------------------

// Converts a YAML tree to JSON with the YAML 1.2 core schema for plain scalars: null,
// true/false and decimal integers get their types; anything else (quoted scalars,
// floats, durations) stays a string, so "0.25" keeps its exact text. Records the
// position of each value by its path.
class YamlConverter {
 public:
  StatusOr<Json> Convert(const YAML::Node& node, const std::string& path, int depth) {
    if (++nodes_ > kMaxYamlNodes) {
      return Fail(
          path, node,
          "document has more than " + std::to_string(kMaxYamlNodes) + " values (aliases included)");
    }
    if (depth > kMaxJobNesting) {
      return Fail(path, node, "nested deeper than " + std::to_string(kMaxJobNesting) + " levels");
    }
    marks_.emplace(path, node.Mark());
    switch (node.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        return Json(nullptr);
      case YAML::NodeType::Scalar:
        return Scalar(node, path);
      case YAML::NodeType::Sequence: {
        Json out = Json::array();
        size_t i = 0;
        for (const YAML::Node& item : node) {
          TESSERA_ASSIGN_OR_RETURN(Json value, Convert(item, IndexPath(path, i), depth + 1));
          out.push_back(std::move(value));
          ++i;
        }
        return out;
      }
      case YAML::NodeType::Map: {
        Json out = Json::object();
        for (const auto& entry : node) {
          const YAML::Node key = entry.first;
          const YAML::Node value = entry.second;
          if (!key.IsScalar()) {
            return Fail(path, key, "expected a plain key, got a list, a map or nothing");
          }
          const std::string& name = key.Scalar();
          TESSERA_RETURN_IF_ERROR(Charge(path, key, name.size()));
          const std::string child = ChildPath(path, name);
          if (out.contains(name)) {
            return Fail(child, key, "the key '" + name.substr(0, 80) + "' appears twice");
          }
          TESSERA_ASSIGN_OR_RETURN(Json converted, Convert(value, child, depth + 1));
          // An empty value has no useful position of its own: it sits at its key.
          if (value.IsNull() || !value.IsDefined()) {
            marks_[child] = key.Mark();
          }
          out[name] = std::move(converted);
        }
        return out;
      }
    }
    return Json(nullptr);
  }

  // The position of the value at `path`, or of the nearest enclosing value that has
  // one; "" for the document itself.
  std::string PositionOf(std::string path) const {
    while (!path.empty()) {
      auto it = marks_.find(path);
      if (it != marks_.end() && !it->second.is_null()) {
        return YamlReader::At(it->second);
      }
      size_t cut = path.back() == ']' ? path.rfind('[') : path.rfind('.');
      path = cut == std::string::npos ? std::string() : path.substr(0, cut);
    }
    return "";
  }

 private:
  StatusOr<Json> Scalar(const YAML::Node& node, const std::string& path) {
    const std::string& text = node.Scalar();
    TESSERA_RETURN_IF_ERROR(Charge(path, node, text.size()));
    if (node.Tag() != "?") {
      return Json(text);  // quoted or explicitly tagged: a string
    }
    if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
      return Json(nullptr);
    }
    if (text == "true" || text == "True" || text == "TRUE") {
      return Json(true);
    }
    if (text == "false" || text == "False" || text == "FALSE") {
      return Json(false);
    }
    // Decimal integers without leading zeros ("007" stays text, as for env values).
    std::string_view digits = text;
    if (digits[0] == '-') {
      digits.remove_prefix(1);
    }
    bool integer = !digits.empty() && (digits == "0" || digits[0] != '0');
    for (char c : digits) {
      integer &= c >= '0' && c <= '9';
    }
    if (integer) {
      StatusOr<int64_t> v = ParseInt64(text);
      if (v.ok()) {
        return Json(*v);
      }
    }
    return Json(text);
  }

  Status Charge(const std::string& path, const YAML::Node& node, size_t bytes) {
    bytes_ += bytes;
    if (bytes_ > kMaxYamlBytes) {
      return Fail(path, node,
                  "document expands to more than " + std::to_string(kMaxYamlBytes) +
                      " bytes (aliases included)");
    }
    return Status::Ok();
  }

  static Status Fail(const std::string& path, const YAML::Node& node, const std::string& message) {
    std::string out = path.empty() ? message : ToValidUtf8(path.substr(0, 200)) + ": " + message;
    return InvalidArgumentError("job spec: " + ToValidUtf8(out) + YamlReader::At(node));
  }

  std::map<std::string, YAML::Mark> marks_;
  size_t nodes_ = 0;
  size_t bytes_ = 0;
};

// A message about the field at `path` of a job ("resources.gpus: ..."), named from the
// root of the document that holds the job at `prefix` ("jobs[3].resources.gpus: ...").
std::string Located(const std::string& prefix, const std::string& path,
                    const std::string& message) {
  std::string full = prefix;
  std::string rest = message;
  if (!path.empty() && message.rfind(path + ": ", 0) == 0) {
    full = ChildPath(prefix, path);
    rest = message.substr(path.size() + 2);
  }
  return full.empty() ? rest : full + ": " + rest;
}

StatusOr<JobSubmission> ParseYaml(std::string_view text, const GpuCatalog& catalog) {
  if (text.size() > kMaxJobTextBytes) {
    return InvalidArgumentError("job spec: text of " + std::to_string(text.size()) +
                                " bytes is over the limit of " + std::to_string(kMaxJobTextBytes));
  }
  const std::string input(text);
  YAML::Node root;
  try {
    const int documents = YamlReader::CountDocuments(input);
    if (documents > 1) {
      return InvalidArgumentError(
          "job spec: expected one YAML document, found more (or text after the document)");
    }
    if (documents == 0) {
      return InvalidArgumentError("job spec: the document is empty");
    }
    root = YAML::Load(input);
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError("job spec: " + ToValidUtf8(e.msg) + YamlReader::At(e.mark));
  }
  if (root.IsNull()) {
    return InvalidArgumentError("job spec: the document is empty");
  }
  YamlConverter converter;
  TESSERA_ASSIGN_OR_RETURN(Json json, converter.Convert(root, "", 0));
  JobDecoder decoder(catalog, nullptr, /*yaml_scalars=*/true);
  StatusOr<JobSubmission> job = decoder.Decode(json);
  if (!job.ok()) {
    return InvalidArgumentError(job.status().message() +
                                converter.PositionOf(decoder.error_path()));
  }
  return job;
}

}  // namespace

bool operator==(const JobSubmission& a, const JobSubmission& b) {
  const JobSpec& x = a.spec;
  const JobSpec& y = b.spec;
  return x.name == y.name && x.queue == y.queue && x.user == y.user && x.priority == y.priority &&
         x.tasks == y.tasks && x.topology.scope == y.topology.scope &&
         x.topology.hard == y.topology.hard && x.submit_time == y.submit_time &&
         x.runtime_limit == y.runtime_limit && x.checkpoint_interval == y.checkpoint_interval &&
         x.checkpoint_on_signal == y.checkpoint_on_signal && x.preemptible == y.preemptible &&
         a.command == b.command && a.env == b.env && a.working_dir == b.working_dir &&
         a.submit_dir == b.submit_dir && a.checkpoint_dir == b.checkpoint_dir &&
         a.hold_if_unfit == b.hold_if_unfit && a.restart == b.restart && a.array == b.array &&
         a.array_index == b.array_index && a.dependency == b.dependency && a.hold == b.hold &&
         a.priority_class == b.priority_class && a.limit_signal == b.limit_signal &&
         a.container == b.container && a.limit_signal_before == b.limit_signal_before;
}

bool IsValidJobName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) {
    return false;
  }
  for (char c : name) {
    if (!IsNameChar(c)) {
      return false;
    }
  }
  return true;
}

bool IsValidEnvName(std::string_view key) {
  if (key.empty() || (key[0] >= '0' && key[0] <= '9')) {
    return false;
  }
  for (char c : key) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) {
      return false;
    }
  }
  return true;
}

StatusOr<JobSubmission> JobSubmissionFromJson(const nlohmann::json& j, const GpuCatalog& catalog) {
  try {
    JobDecoder decoder(catalog);
    return decoder.Decode(j);
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("job spec: ") + ToValidUtf8(e.what()));
  }
}

StatusOr<JobSubmission> JobSubmissionFromJsonAt(const nlohmann::json& j, const GpuCatalog& catalog,
                                                const std::string& path) {
  JobDecoder decoder(catalog);
  try {
    StatusOr<JobSubmission> job = decoder.Decode(j);
    if (!job.ok()) {
      return InvalidArgumentError(Located(path, decoder.error_path(), job.status().message()));
    }
    return job;
  } catch (const std::exception& e) {
    return InvalidArgumentError(Located(path, "", ToValidUtf8(e.what())));
  }
}

StatusOr<JobSubmission> ParseJobJson(std::string_view text, const GpuCatalog& catalog) {
  if (text.size() > kMaxJobTextBytes) {
    return InvalidArgumentError("job spec: text of " + std::to_string(text.size()) +
                                " bytes is over the limit of " + std::to_string(kMaxJobTextBytes));
  }
  TESSERA_ASSIGN_OR_RETURN(Json json,
                           ParseJsonText(text, "job spec", {kMaxJobTextBytes, kMaxJobNesting}));
  return JobSubmissionFromJson(json, catalog);
}

StatusOr<JobSubmission> ParseJobYaml(std::string_view text, const GpuCatalog& catalog) {
  try {
    return ParseYaml(text, catalog);
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError("job spec: " + ToValidUtf8(e.msg) + YamlReader::At(e.mark));
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("job spec: ") + ToValidUtf8(e.what()));
  }
}

StatusOr<JobSubmission> ReadEmbeddedJob(const YAML::Node& node, const GpuCatalog& catalog,
                                        const EmbeddedJobOptions& options) {
  auto located = [&](const std::string& path, const std::string& message) {
    return Located(options.path, path, message);
  };
  try {
    if (!node.IsMap()) {
      return InvalidArgumentError(
          located("", "expected a job spec (a map of keys), got " + YamlReader::Describe(node)) +
          YamlReader::At(node));
    }
    YamlConverter converter;
    StatusOr<Json> json = converter.Convert(node, options.path, 0);
    if (!json.ok()) {
      // "job spec: path: message (line L, column C)", the path already the document's.
      std::string message = json.status().message();
      message.erase(0, std::string_view("job spec: ").size());
      return InvalidArgumentError(message);
    }
    JobDecoder decoder(catalog, &options);
    StatusOr<JobSubmission> job = decoder.Decode(*json);
    if (!job.ok()) {
      const std::string& at = decoder.error_path();
      return InvalidArgumentError(
          located(at, job.status().message()) +
          converter.PositionOf(at.empty() ? options.path : ChildPath(options.path, at)));
    }
    return job;
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(located("", ToValidUtf8(e.msg)) + YamlReader::At(e.mark));
  } catch (const std::exception& e) {
    return InvalidArgumentError(located("", ToValidUtf8(e.what())));
  }
}

StatusOr<JobSubmission> ParseJobText(std::string_view text, const GpuCatalog& catalog) {
  std::string_view t = Trim(text);
  if (!t.empty() && t[0] == '{') {
    return ParseJobJson(text, catalog);
  }
  return ParseJobYaml(text, catalog);
}

}  // namespace tessera
