#include "sim/scenario.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <iomanip>
#include <set>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "api/queue_config.h"
#include "base/strings.h"
#include "model/job.h"
#include "plugins/job_policies.h"

namespace tessera {
namespace {

constexpr Micros kSecond = 1'000'000;
constexpr std::string_view kAllPresets = "all-presets";

std::string Lines(const YAML::Node& node) {
  if (!node.IsDefined()) {
    return "";
  }
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) {
    return "";
  }
  return " (line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1) +
         ")";
}

int LineOf(const YAML::Node& node) {
  if (!node.IsDefined() || node.Mark().is_null()) {
    return 0;
  }
  return node.Mark().line + 1;
}

std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Scalar:
      return "'" + node.Scalar() + "'";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Undefined:
      break;
  }
  return "an undefined node";
}

// Reads one scenario file; every error names the file, the YAML path and the line.
class Parser {
 public:
  Parser(std::string file, const GpuCatalog& catalog) : file_(std::move(file)), catalog_(catalog) {}

  StatusOr<Scenario> Parse(const YAML::Node& root);

 private:
  using Visit = std::function<Status(const std::string&, const YAML::Node&, const std::string&)>;

  Status Error(const std::string& path, const YAML::Node& node, std::string_view message) const {
    std::string out = file_ + ": ";
    if (!path.empty()) {
      out += path + ": ";
    }
    out += message;
    out += Lines(node);
    return InvalidArgumentError(std::move(out));
  }

  // Calls visit(key, value, path) for each entry of a map, rejecting repeated keys
  // and keys not in `allowed` (any key when empty).
  Status ForEachKey(const YAML::Node& map, const std::string& path,
                    const std::vector<std::string_view>& allowed, const Visit& visit) const {
    if (!map.IsMap()) {
      return Error(path, map, "expected a map, got " + Describe(map));
    }
    std::vector<std::string> seen;
    for (const auto& entry : map) {
      const YAML::Node key = entry.first;
      const YAML::Node value = entry.second;
      if (!key.IsScalar()) {
        return Error(path, key, "expected a plain key, got " + Describe(key));
      }
      const std::string& name = key.Scalar();
      if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
        std::vector<std::string> expected(allowed.begin(), allowed.end());
        return Error(path, key,
                     "unknown key '" + name + "'; expected one of " + Join(expected, ", "));
      }
      if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
        return Error(path, key, "key '" + name + "' appears twice");
      }
      seen.push_back(name);
      TESSERA_RETURN_IF_ERROR(visit(name, value, path.empty() ? name : path + "." + name));
    }
    return Status::Ok();
  }

  Status ForEachEntry(
      const YAML::Node& list, const std::string& path,
      const std::function<Status(const YAML::Node&, const std::string&)>& read) const {
    if (!list.IsSequence()) {
      return Error(path, list, "expected a list, got " + Describe(list));
    }
    for (size_t i = 0; i < list.size(); ++i) {
      TESSERA_RETURN_IF_ERROR(read(YAML::Node(list[i]), path + "[" + std::to_string(i) + "]"));
    }
    return Status::Ok();
  }

  StatusOr<std::string> String(const YAML::Node& node, const std::string& path) const {
    if (!node.IsScalar()) {
      return Error(path, node, "expected a string, got " + Describe(node));
    }
    return node.Scalar();
  }

  StatusOr<int64_t> Int(const YAML::Node& node, const std::string& path) const {
    if (!node.IsScalar()) {
      return Error(path, node, "expected an integer, got " + Describe(node));
    }
    StatusOr<int64_t> v = ParseInt64(node.Scalar());
    if (!v.ok()) {
      return Error(path, node, v.status().message());
    }
    return *v;
  }

  StatusOr<int64_t> NonNegative(const YAML::Node& node, const std::string& path) const {
    TESSERA_ASSIGN_OR_RETURN(int64_t v, Int(node, path));
    if (v < 0) {
      return Error(path, node, "must not be negative, got " + std::to_string(v));
    }
    return v;
  }

  // Whole seconds, >= 0.
  StatusOr<Micros> Time(const YAML::Node& node, const std::string& path) const {
    if (!node.IsScalar()) {
      return Error(path, node, "expected whole seconds, got " + Describe(node));
    }
    StatusOr<int64_t> v = ParseInt64(node.Scalar());
    if (!v.ok() || *v < 0 || *v > (int64_t{1} << 40)) {
      return Error(path, node, "expected whole seconds (>= 0), got '" + node.Scalar() + "'");
    }
    return *v * kSecond;
  }

  StatusOr<bool> Bool(const YAML::Node& node, const std::string& path) const {
    if (node.IsScalar()) {
      const std::string& s = node.Scalar();
      if (s == "true" || s == "yes") {
        return true;
      }
      if (s == "false" || s == "no") {
        return false;
      }
    }
    return Error(path, node, "expected true or false, got " + Describe(node));
  }

  StatusOr<int64_t> Quantity(const YAML::Node& node, ResourceKind kind,
                             const std::string& path) const {
    StatusOr<int64_t> v = ParseResourceQuantity(node, kind);
    if (!v.ok()) {
      return Error(path, node, v.status().message());
    }
    return *v;
  }

  StatusOr<std::vector<std::string>> Names(const YAML::Node& node, const std::string& path) const {
    std::vector<std::string> out;
    TESSERA_RETURN_IF_ERROR(
        ForEachEntry(node, path, [&](const YAML::Node& e, const std::string& p) {
          TESSERA_ASSIGN_OR_RETURN(std::string s, String(e, p));
          out.push_back(std::move(s));
          return Status::Ok();
        }));
    return out;
  }

  Status CheckPolicy(const std::string& policy, const YAML::Node& node,
                     const std::string& path) const {
    StatusOr<SchedulerPolicy> p = ParseSchedulerPolicy(policy);
    if (!p.ok()) {
      return Error(path, node, p.status().message());
    }
    return Status::Ok();
  }

  Status ReadOptions(const YAML::Node& node, const std::string& path, ScenarioOptions* o) const;
  Status ReadCluster(const YAML::Node& node, const std::string& path,
                     std::vector<NodeSpec>* nodes) const;
  Status ReadTask(const YAML::Node& node, const std::string& path,
                  std::vector<TaskRequest>* out) const;
  // Completes a task from its GPU fields and appends `count` copies.
  Status FinishTask(TaskRequest t, std::optional<int64_t> gpus_milli, std::optional<int64_t> milli,
                    int64_t count, const YAML::Node& node, const std::string& path,
                    std::vector<TaskRequest>* out) const;
  // One entry of `jobs`: one job, or with `repeat` several named "<name>-<i>".
  Status ReadJob(const YAML::Node& node, const std::string& path, const QueueTree& tree,
                 const std::string& default_queue, std::vector<SimJob>* out) const;
  Status ReadExpect(const YAML::Node& node, const std::string& path, Scenario* s) const;
  Status ReadCheck(const std::string& kind, const YAML::Node& value, const YAML::Node& key,
                   const std::string& path, ScenarioCheck* check) const;
  Status KnownJob(const std::string& name, const YAML::Node& node, const std::string& path) const {
    if (!job_names_.contains(name)) {
      return Error(path, node, "no job named '" + name + "'");
    }
    return Status::Ok();
  }

  std::string file_;
  const GpuCatalog& catalog_;
  std::set<std::string> job_names_;
  std::vector<std::string> job_order_;  // the same names, in file order
};

Status Parser::ReadOptions(const YAML::Node& node, const std::string& path,
                           ScenarioOptions* o) const {
  return ForEachKey(
      node, path,
      {"grace_seconds", "tick_seconds", "starvation_seconds", "min_run_seconds", "las_thresholds",
       "fairshare_half_life_seconds", "lossless_preemption", "placement", "seed"},
      [&](const std::string& key, const YAML::Node& v, const std::string& p) -> Status {
        if (key == "grace_seconds") {
          TESSERA_ASSIGN_OR_RETURN(o->grace, Time(v, p));
        } else if (key == "tick_seconds") {
          TESSERA_ASSIGN_OR_RETURN(o->tick, Time(v, p));
        } else if (key == "starvation_seconds") {
          TESSERA_ASSIGN_OR_RETURN(o->starvation_limit, Time(v, p));
        } else if (key == "min_run_seconds") {
          TESSERA_ASSIGN_OR_RETURN(o->min_run_before_preemption, Time(v, p));
        } else if (key == "fairshare_half_life_seconds") {
          TESSERA_ASSIGN_OR_RETURN(Micros h, Time(v, p));
          if (h <= 0) {
            return Error(p, v, "the half-life must be > 0");
          }
          o->fairshare_half_life = h;
        } else if (key == "lossless_preemption") {
          TESSERA_ASSIGN_OR_RETURN(o->lossless_preemption, Bool(v, p));
        } else if (key == "placement") {
          TESSERA_ASSIGN_OR_RETURN(o->placement, String(v, p));
        } else if (key == "seed") {
          TESSERA_ASSIGN_OR_RETURN(int64_t seed, NonNegative(v, p));
          o->seed = static_cast<uint64_t>(seed);
        } else {
          std::vector<double> thresholds;
          TESSERA_RETURN_IF_ERROR(
              ForEachEntry(v, p, [&](const YAML::Node& e, const std::string& ep) {
                TESSERA_ASSIGN_OR_RETURN(int64_t t, NonNegative(e, ep));
                if (!thresholds.empty() && static_cast<double>(t) <= thresholds.back()) {
                  return Error(ep, e, "thresholds must increase");
                }
                thresholds.push_back(static_cast<double>(t));
                return Status::Ok();
              }));
          o->las_thresholds = std::move(thresholds);
        }
        return Status::Ok();
      });
}

Status Parser::ReadCluster(const YAML::Node& node, const std::string& path,
                           std::vector<NodeSpec>* nodes) const {
  std::unordered_map<std::string, int> next_index;  // per prefix
  std::set<std::string> names;
  return ForEachEntry(node, path, [&](const YAML::Node& group, const std::string& gpath) -> Status {
    int64_t count = -1;
    std::string prefix = "node";
    std::vector<std::string> given;
    int64_t gpus = 0;
    GpuModelId model = catalog_.Find("H100-80GB").value();
    SharingMode mode = SharingMode::kExclusive;
    int64_t cpu = int64_t{128} * 1000;      // 128 cores
    int64_t memory = int64_t{1024} * 1024;  // 1 TiB
    int64_t numa = 1;
    bool nvlink = true;
    std::vector<std::pair<std::string, std::string>> labels;
    TESSERA_RETURN_IF_ERROR(ForEachKey(
        group, gpath,
        {"count", "prefix", "names", "gpus", "model", "mode", "cpu", "memory", "numa", "nvlink",
         "labels"},
        [&](const std::string& key, const YAML::Node& v, const std::string& p) -> Status {
          if (key == "count") {
            TESSERA_ASSIGN_OR_RETURN(count, NonNegative(v, p));
            if (count < 1 || count > 10000) {
              return Error(p, v, "count must be in 1..10000");
            }
          } else if (key == "prefix") {
            TESSERA_ASSIGN_OR_RETURN(prefix, String(v, p));
          } else if (key == "names") {
            TESSERA_ASSIGN_OR_RETURN(given, Names(v, p));
          } else if (key == "gpus") {
            TESSERA_ASSIGN_OR_RETURN(gpus, NonNegative(v, p));
            if (gpus > 64) {
              return Error(p, v, "at most 64 GPUs per node");
            }
          } else if (key == "model") {
            TESSERA_ASSIGN_OR_RETURN(std::string name, String(v, p));
            StatusOr<GpuModelId> id = catalog_.Find(name);
            if (!id.ok()) {
              return Error(p, v, id.status().message());
            }
            model = *id;
          } else if (key == "mode") {
            TESSERA_ASSIGN_OR_RETURN(std::string name, String(v, p));
            StatusOr<SharingMode> m = ParseSharingMode(name);
            if (!m.ok()) {
              return Error(p, v, m.status().message());
            }
            mode = *m;
          } else if (key == "cpu") {
            TESSERA_ASSIGN_OR_RETURN(cpu, Quantity(v, ResourceKind::kCpu, p));
          } else if (key == "memory") {
            TESSERA_ASSIGN_OR_RETURN(memory, Quantity(v, ResourceKind::kMemory, p));
          } else if (key == "numa") {
            TESSERA_ASSIGN_OR_RETURN(numa, NonNegative(v, p));
            if (numa < 1 || numa > 8) {
              return Error(p, v, "numa must be in 1..8");
            }
          } else if (key == "nvlink") {
            TESSERA_ASSIGN_OR_RETURN(nvlink, Bool(v, p));
          } else {
            return ForEachKey(v, p, {},
                              [&](const std::string& label, const YAML::Node& lv,
                                  const std::string& lp) -> Status {
                                TESSERA_ASSIGN_OR_RETURN(std::string value, String(lv, lp));
                                labels.emplace_back(label, std::move(value));
                                return Status::Ok();
                              });
          }
          return Status::Ok();
        }));
    if (!given.empty()) {
      if (count >= 0 && count != static_cast<int64_t>(given.size())) {
        return Error(gpath, group,
                     "count " + std::to_string(count) + " differs from the " +
                         std::to_string(given.size()) + " names given");
      }
    } else {
      if (count < 0) {
        count = 1;
      }
      int& next = next_index[prefix];
      for (int64_t i = 0; i < count; ++i) {
        given.push_back(prefix + "-" + std::to_string(next++));
      }
    }
    for (const std::string& name : given) {
      if (!names.insert(name).second) {
        return Error(gpath, group, "node name '" + name + "' is used twice");
      }
      NodeSpec spec = MakeUniformNode(name, MilliCpu(cpu), MiB(memory), model,
                                      static_cast<int>(gpus), mode, static_cast<int>(numa), nvlink);
      spec.labels = labels;
      Status valid = ValidateNodeSpec(spec, catalog_);
      if (!valid.ok()) {
        return Error(gpath, group, valid.message());
      }
      nodes->push_back(std::move(spec));
    }
    return Status::Ok();
  });
}

Status Parser::ReadTask(const YAML::Node& node, const std::string& path,
                        std::vector<TaskRequest>* out) const {
  TaskRequest t;
  std::optional<int64_t> gpus_milli;
  std::optional<int64_t> milli;
  int64_t count = 1;
  TESSERA_RETURN_IF_ERROR(ForEachKey(
      node, path, {"gpus", "milli", "gpu_memory", "mig", "cpu", "memory", "models", "count"},
      [&](const std::string& key, const YAML::Node& v, const std::string& p) -> Status {
        if (key == "gpus") {
          TESSERA_ASSIGN_OR_RETURN(gpus_milli, Quantity(v, ResourceKind::kGpu, p));
        } else if (key == "milli") {
          TESSERA_ASSIGN_OR_RETURN(milli, NonNegative(v, p));
          if (*milli < 1 || *milli > kMilliPerGpu) {
            return Error(p, v, "milli must be in 1..1000");
          }
        } else if (key == "gpu_memory") {
          TESSERA_ASSIGN_OR_RETURN(int64_t m, Quantity(v, ResourceKind::kGpuMemory, p));
          t.gpu_memory = MiB(m);
        } else if (key == "mig") {
          TESSERA_ASSIGN_OR_RETURN(t.mig_profile, String(v, p));
        } else if (key == "cpu") {
          TESSERA_ASSIGN_OR_RETURN(int64_t c, Quantity(v, ResourceKind::kCpu, p));
          t.cpu = MilliCpu(c);
        } else if (key == "memory") {
          TESSERA_ASSIGN_OR_RETURN(int64_t m, Quantity(v, ResourceKind::kMemory, p));
          t.memory = MiB(m);
        } else if (key == "models") {
          std::string spec;
          if (v.IsSequence()) {
            TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> list, Names(v, p));
            spec = Join(list, "|");
          } else {
            TESSERA_ASSIGN_OR_RETURN(spec, String(v, p));
          }
          StatusOr<GpuModelSet> set = catalog_.ParseModelSet(spec);
          if (!set.ok()) {
            return Error(p, v, set.status().message());
          }
          t.models = *set;
        } else {
          TESSERA_ASSIGN_OR_RETURN(count, NonNegative(v, p));
          if (count < 1 || count > 1024) {
            return Error(p, v, "count must be in 1..1024");
          }
        }
        return Status::Ok();
      }));
  return FinishTask(std::move(t), gpus_milli, milli, count, node, path, out);
}

Status Parser::FinishTask(TaskRequest t, std::optional<int64_t> gpus_milli,
                          std::optional<int64_t> milli, int64_t count, const YAML::Node& node,
                          const std::string& path, std::vector<TaskRequest>* out) const {
  if (gpus_milli && *gpus_milli > kMilliPerGpu && *gpus_milli % kMilliPerGpu != 0) {
    return Error(path, node, "a task takes whole GPUs or a share of one GPU");
  }
  if (!t.mig_profile.empty()) {
    if ((gpus_milli && *gpus_milli != kMilliPerGpu) || milli) {
      return Error(path, node, "a MIG task takes one instance: no milli, gpus 1 at most");
    }
    t.gpu_count = 1;
    t.gpu_milli = kWholeGpu;
  } else if (milli) {
    if (gpus_milli && *gpus_milli != kMilliPerGpu) {
      return Error(path, node, "a task with milli takes one GPU (gpus: 1)");
    }
    t.gpu_count = 1;
    t.gpu_milli = MilliGpu(*milli);
  } else if (gpus_milli) {
    if (*gpus_milli < kMilliPerGpu) {
      t.gpu_count = *gpus_milli > 0 ? 1 : 0;
      t.gpu_milli = MilliGpu(*gpus_milli);
    } else {
      t.gpu_count = static_cast<int>(*gpus_milli / kMilliPerGpu);
      t.gpu_milli = kWholeGpu;
    }
  }
  Status valid = ValidateTaskRequest(t, catalog_);
  if (!valid.ok()) {
    return Error(path, node, valid.message());
  }
  for (int64_t i = 0; i < count; ++i) {
    out->push_back(t);
  }
  return Status::Ok();
}

Status Parser::ReadJob(const YAML::Node& node, const std::string& path, const QueueTree& tree,
                       const std::string& default_queue, std::vector<SimJob>* out) const {
  SimJob job;
  int64_t repeat = 1;
  Micros every = 0;
  JobSpec& spec = job.spec;
  bool has_duration = false;
  bool has_gpus = false;
  bool has_tasks = false;
  YAML::Node queue_node;
  TESSERA_RETURN_IF_ERROR(ForEachKey(
      node, path,
      {"name", "queue", "submit", "duration", "priority", "gpus", "tasks", "topology",
       "checkpoint_interval", "checkpoint_on_signal", "runtime_limit", "preemptible", "user",
       "repeat"},
      [&](const std::string& key, const YAML::Node& v, const std::string& p) -> Status {
        if (key == "name") {
          TESSERA_ASSIGN_OR_RETURN(spec.name, String(v, p));
        } else if (key == "queue") {
          TESSERA_ASSIGN_OR_RETURN(spec.queue, String(v, p));
          queue_node = v;
        } else if (key == "submit") {
          TESSERA_ASSIGN_OR_RETURN(spec.submit_time, Time(v, p));
        } else if (key == "duration") {
          TESSERA_ASSIGN_OR_RETURN(job.duration, Time(v, p));
          if (job.duration <= 0) {
            return Error(p, v, "duration must be > 0");
          }
          has_duration = true;
        } else if (key == "priority") {
          if (!v.IsScalar()) {
            return Error(p, v, "expected a number or a priority class, got " + Describe(v));
          }
          StatusOr<int64_t> n = ParseInt64(v.Scalar());
          if (n.ok()) {
            if (*n < INT32_MIN || *n > INT32_MAX) {
              return Error(p, v, "priority out of range");
            }
            spec.priority = static_cast<int32_t>(*n);
          } else if (std::optional<int32_t> c = tree.PriorityOf(v.Scalar())) {
            spec.priority = *c;
          } else {
            return Error(p, v, "'" + v.Scalar() + "' is neither a number nor a priority class");
          }
        } else if (key == "gpus") {
          has_gpus = true;
          TESSERA_ASSIGN_OR_RETURN(int64_t m, Quantity(v, ResourceKind::kGpu, p));
          return FinishTask(TaskRequest{}, m, std::nullopt, 1, v, p, &spec.tasks);
        } else if (key == "tasks") {
          has_tasks = true;
          return ForEachEntry(v, p, [&](const YAML::Node& e, const std::string& ep) {
            return ReadTask(e, ep, &spec.tasks);
          });
        } else if (key == "topology") {
          return ForEachKey(
              v, p, {"scope", "hard"},
              [&](const std::string& tk, const YAML::Node& tv, const std::string& tp) -> Status {
                if (tk == "hard") {
                  TESSERA_ASSIGN_OR_RETURN(spec.topology.hard, Bool(tv, tp));
                  return Status::Ok();
                }
                TESSERA_ASSIGN_OR_RETURN(std::string s, String(tv, tp));
                StatusOr<TopologyScope> scope = ParseTopologyScope(s);
                if (!scope.ok()) {
                  return Error(tp, tv, scope.status().message());
                }
                spec.topology.scope = *scope;
                return Status::Ok();
              });
        } else if (key == "checkpoint_interval") {
          TESSERA_ASSIGN_OR_RETURN(spec.checkpoint_interval, Time(v, p));
        } else if (key == "checkpoint_on_signal") {
          TESSERA_ASSIGN_OR_RETURN(spec.checkpoint_on_signal, Bool(v, p));
        } else if (key == "runtime_limit") {
          TESSERA_ASSIGN_OR_RETURN(spec.runtime_limit, Time(v, p));
        } else if (key == "preemptible") {
          TESSERA_ASSIGN_OR_RETURN(spec.preemptible, Bool(v, p));
        } else if (key == "repeat") {
          bool has_count = false;
          Status st = ForEachKey(
              v, p, {"count", "every"},
              [&](const std::string& rk, const YAML::Node& rv, const std::string& rp) -> Status {
                if (rk == "count") {
                  TESSERA_ASSIGN_OR_RETURN(repeat, NonNegative(rv, rp));
                  if (repeat < 1 || repeat > 10000) {
                    return Error(rp, rv, "count must be in 1..10000");
                  }
                  has_count = true;
                } else {
                  TESSERA_ASSIGN_OR_RETURN(every, Time(rv, rp));
                }
                return Status::Ok();
              });
          if (!st.ok()) {
            return st;
          }
          if (!has_count) {
            return Error(p, v, "repeat needs a count");
          }
        } else {
          TESSERA_ASSIGN_OR_RETURN(spec.user, String(v, p));
        }
        return Status::Ok();
      }));
  if (spec.name.empty()) {
    return Error(path, node, "a job needs a name");
  }
  if (!has_duration) {
    return Error(path, node, "job '" + spec.name + "' needs a duration");
  }
  if (has_gpus == has_tasks) {
    return Error(path, node, "job '" + spec.name + "' needs either gpus or tasks (not both)");
  }
  if (spec.tasks.empty()) {
    return Error(path, node, "job '" + spec.name + "' has no tasks");
  }
  if (spec.queue.empty()) {
    if (default_queue.empty()) {
      return Error(path, node, "job '" + spec.name + "' needs a queue (there are several)");
    }
    spec.queue = default_queue;
  } else if (StatusOr<QueueId> q = tree.FindQueue(spec.queue); !q.ok()) {
    return Error(path + ".queue", queue_node, q.status().message());
  }
  Status valid = ValidateJobSpec(spec, catalog_);
  if (!valid.ok()) {
    return Error(path, node, valid.message());
  }
  if (repeat == 1 && every == 0) {
    out->push_back(std::move(job));
    return Status::Ok();
  }
  for (int64_t i = 0; i < repeat; ++i) {
    SimJob copy = job;
    copy.spec.name = spec.name + "-" + std::to_string(i);
    copy.spec.submit_time = spec.submit_time + i * every;
    out->push_back(std::move(copy));
  }
  return Status::Ok();
}

Status Parser::ReadCheck(const std::string& kind, const YAML::Node& value, const YAML::Node& key,
                         const std::string& path, ScenarioCheck* c) const {
  c->kind = kind;
  c->line = LineOf(key);
  // A list of jobs; "prefix*" stands for every job whose name starts with prefix,
  // in file order (e.g. the jobs of a `repeat`).
  auto job_list = [&]() -> Status {
    TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> names, Names(value, path));
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string& name = names[i];
      if (name.empty() || name.back() != '*') {
        TESSERA_RETURN_IF_ERROR(KnownJob(name, value[i], path));
        c->names.push_back(name);
        continue;
      }
      const std::string_view prefix(name.data(), name.size() - 1);
      const size_t before = c->names.size();
      for (const std::string& job : job_order_) {
        if (StartsWith(job, prefix)) {
          c->names.push_back(job);
        }
      }
      if (c->names.size() == before) {
        return Error(path, value[i], "no job name starts with '" + std::string(prefix) + "'");
      }
    }
    if (c->names.empty()) {
      return Error(path, value, "names no job");
    }
    return Status::Ok();
  };
  // {job: value} with values read by `read`.
  auto job_map =
      [&](const std::function<StatusOr<int64_t>(const YAML::Node&, const std::string&)>& read)
      -> Status {
    Status st = ForEachKey(value, path, {},
                           [&](const std::string& job, const YAML::Node& v, const std::string& p) {
                             TESSERA_RETURN_IF_ERROR(KnownJob(job, v, p));
                             TESSERA_ASSIGN_OR_RETURN(int64_t x, read(v, p));
                             c->values.emplace_back(job, x);
                             return Status::Ok();
                           });
    if (!st.ok()) {
      return st;
    }
    if (c->values.empty()) {
      return Error(path, value, "names no job");
    }
    return Status::Ok();
  };
  auto seconds = [&](const YAML::Node& v, const std::string& p) -> StatusOr<int64_t> {
    TESSERA_ASSIGN_OR_RETURN(Micros t, Time(v, p));
    return t;
  };
  auto count = [&](const YAML::Node& v, const std::string& p) { return NonNegative(v, p); };

  if (kind == "start_order" || kind == "same_node" || kind == "same_rack" ||
      kind == "not_preempted" || kind == "backfilled" || kind == "not_backfilled" ||
      kind == "borrowing" || kind == "not_borrowing" || kind == "never_starts") {
    return job_list();
  }
  if (kind == "starts" || kind == "finishes") {
    return job_map(seconds);
  }
  if (kind == "preemptions_of" || kind == "lost_work") {
    return job_map(count);
  }
  if (kind == "max_preemptions" || kind == "quota_violations") {
    TESSERA_ASSIGN_OR_RETURN(c->number, NonNegative(value, path));
    return Status::Ok();
  }
  if (kind == "all_finish") {
    TESSERA_ASSIGN_OR_RETURN(c->flag, Bool(value, path));
    return Status::Ok();
  }
  if (kind == "preempted") {
    if (value.IsSequence()) {
      TESSERA_RETURN_IF_ERROR(job_list());
      for (const std::string& n : c->names) {
        c->pairs.emplace_back(n, "");
      }
      c->names.clear();
      return Status::Ok();
    }
    Status st = ForEachKey(
        value, path, {}, [&](const std::string& victim, const YAML::Node& v, const std::string& p) {
          TESSERA_RETURN_IF_ERROR(KnownJob(victim, v, p));
          TESSERA_ASSIGN_OR_RETURN(std::string by, String(v, p));
          TESSERA_RETURN_IF_ERROR(KnownJob(by, v, p));
          c->pairs.emplace_back(victim, std::move(by));
          return Status::Ok();
        });
    if (!st.ok()) {
      return st;
    }
    if (c->pairs.empty()) {
      return Error(path, value, "names no job");
    }
    return Status::Ok();
  }
  if (kind == "on_nodes") {
    Status st = ForEachKey(value, path, {},
                           [&](const std::string& job, const YAML::Node& v, const std::string& p) {
                             TESSERA_RETURN_IF_ERROR(KnownJob(job, v, p));
                             TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> nodes, Names(v, p));
                             c->nodes.emplace_back(job, std::move(nodes));
                             return Status::Ok();
                           });
    if (!st.ok()) {
      return st;
    }
    if (c->nodes.empty()) {
      return Error(path, value, "names no job");
    }
    return Status::Ok();
  }
  if (kind == "running_at") {
    return ForEachKey(
        value, path, {}, [&](const std::string& time, const YAML::Node& v, const std::string& p) {
          StatusOr<int64_t> t = ParseInt64(time);
          if (!t.ok() || *t < 0) {
            return Error(p, v, "expected a time in whole seconds as the key, got '" + time + "'");
          }
          std::vector<std::string> jobs;
          if (!v.IsNull()) {
            TESSERA_ASSIGN_OR_RETURN(jobs, Names(v, p));
          }
          for (size_t i = 0; i < jobs.size(); ++i) {
            TESSERA_RETURN_IF_ERROR(KnownJob(jobs[i], v[i], p));
          }
          c->at.emplace_back(*t * kSecond, std::move(jobs));
          return Status::Ok();
        });
  }
  return Error(path, key,
               "unknown check '" + kind +
                   "'; expected one of start_order, starts, finishes, on_nodes, same_node, "
                   "same_rack, preempted, not_preempted, preemptions_of, max_preemptions, "
                   "backfilled, not_backfilled, borrowing, not_borrowing, never_starts, "
                   "running_at, lost_work, all_finish, quota_violations, policy");
}

Status Parser::ReadExpect(const YAML::Node& node, const std::string& path, Scenario* s) const {
  return ForEachEntry(node, path, [&](const YAML::Node& item, const std::string& ipath) -> Status {
    if (!item.IsMap()) {
      return Error(ipath, item, "expected a map of checks, got " + Describe(item));
    }
    // The entry's policies first, wherever the key stands.
    std::vector<std::string> policies;
    const YAML::Node policy = item["policy"];
    if (policy.IsDefined()) {
      const std::string ppath = ipath + ".policy";
      if (policy.IsScalar() && policy.Scalar() == kAllPresets) {
        policies = SchedulerPresetNames();
      } else if (policy.IsSequence()) {
        TESSERA_ASSIGN_OR_RETURN(policies, Names(policy, ppath));
        for (size_t i = 0; i < policies.size(); ++i) {
          TESSERA_RETURN_IF_ERROR(CheckPolicy(policies[i], policy[i], ppath));
        }
      } else {
        TESSERA_ASSIGN_OR_RETURN(std::string p, String(policy, ppath));
        TESSERA_RETURN_IF_ERROR(CheckPolicy(p, policy, ppath));
        policies.push_back(std::move(p));
      }
      if (policies.empty()) {
        return Error(ppath, policy, "names no policy");
      }
    } else {
      policies.push_back(s->policy);
    }
    size_t checks = 0;
    std::set<std::string> seen;
    for (const auto& entry : item) {
      const YAML::Node key = entry.first;
      const YAML::Node value = entry.second;
      if (!key.IsScalar()) {
        return Error(ipath, key, "expected a plain key, got " + Describe(key));
      }
      if (!seen.insert(key.Scalar()).second) {
        return Error(ipath, key, "key '" + key.Scalar() + "' appears twice");
      }
      if (key.Scalar() == "policy") {
        continue;
      }
      ScenarioCheck check;
      TESSERA_RETURN_IF_ERROR(
          ReadCheck(key.Scalar(), value, key, ipath + "." + key.Scalar(), &check));
      for (const std::string& p : policies) {
        check.policy = p;
        s->checks.push_back(check);
      }
      ++checks;
    }
    if (checks == 0) {
      return Error(ipath, item, "an entry of expect needs a check besides its policy");
    }
    return Status::Ok();
  });
}

StatusOr<Scenario> Parser::Parse(const YAML::Node& root) {
  Scenario s;
  s.file = file_;
  if (!root.IsMap()) {
    return Error("", root, "a scenario is a map (name, policy, cluster, queues, jobs, expect)");
  }
  // Found sections (a default YAML::Node is a defined null, hence the optionals).
  std::optional<YAML::Node> options, cluster, queues, jobs, expect, policy;
  TESSERA_RETURN_IF_ERROR(ForEachKey(
      root, "", {"name", "description", "policy", "options", "cluster", "queues", "jobs", "expect"},
      [&](const std::string& key, const YAML::Node& v, const std::string& p) -> Status {
        if (key == "name") {
          TESSERA_ASSIGN_OR_RETURN(s.name, String(v, p));
        } else if (key == "description") {
          TESSERA_ASSIGN_OR_RETURN(s.description, String(v, p));
        } else if (key == "policy") {
          TESSERA_ASSIGN_OR_RETURN(s.policy, String(v, p));
          policy.emplace(v);
        } else if (key == "options") {
          options.emplace(v);
        } else if (key == "cluster") {
          cluster.emplace(v);
        } else if (key == "queues") {
          queues.emplace(v);
        } else if (key == "jobs") {
          jobs.emplace(v);
        } else {
          expect.emplace(v);
        }
        return Status::Ok();
      }));
  if (s.name.empty()) {
    return Error("", root, "the scenario needs a name");
  }
  if (!policy) {
    return Error("", root, "the scenario needs a policy");
  }
  TESSERA_RETURN_IF_ERROR(CheckPolicy(s.policy, *policy, "policy"));
  if (options) {
    TESSERA_RETURN_IF_ERROR(ReadOptions(*options, "options", &s.options));
  }
  if (!cluster) {
    return Error("", root, "the scenario needs a cluster");
  }
  TESSERA_RETURN_IF_ERROR(ReadCluster(*cluster, "cluster", &s.nodes));
  if (s.nodes.empty()) {
    return Error("cluster", *cluster, "the cluster has no nodes");
  }

  const YAML::Node queues_node = queues ? *queues : root;
  if (queues) {
    StatusOr<QueueTreeSpec> spec = ParseQueueTreeYaml(*queues, catalog_);
    if (!spec.ok()) {
      return InvalidArgumentError(file_ + ": queues: " + spec.status().message());
    }
    s.queues = std::move(*spec);
  } else {
    QueueNodeSpec q;
    q.name = "default";
    s.queues.nodes.push_back(q);
  }
  StatusOr<QueueTree> tree = QueueTree::Create(s.queues, catalog_);
  if (!tree.ok()) {
    return Error("queues", queues_node, tree.status().message());
  }
  if (tree->queues().empty()) {
    return Error("queues", queues_node, "the queue tree has no queue");
  }
  const std::string default_queue =
      tree->queues().size() == 1 ? tree->spec(tree->queues()[0]).name : std::string();

  if (!jobs) {
    return Error("", root, "the scenario needs jobs");
  }
  Status read_jobs = ForEachEntry(*jobs, "jobs", [&](const YAML::Node& e, const std::string& p) {
    std::vector<SimJob> read;
    TESSERA_RETURN_IF_ERROR(ReadJob(e, p, *tree, default_queue, &read));
    for (SimJob& job : read) {
      if (!job_names_.insert(job.spec.name).second) {
        return Error(p, e, "job name '" + job.spec.name + "' is used twice");
      }
      job_order_.push_back(job.spec.name);
      s.jobs.push_back(std::move(job));
    }
    return Status::Ok();
  });
  if (!read_jobs.ok()) {
    return read_jobs;
  }
  if (s.jobs.empty()) {
    return Error("jobs", *jobs, "the scenario has no jobs");
  }
  if (!expect) {
    return Error("", root, "the scenario needs expect (a list of checks)");
  }
  TESSERA_RETURN_IF_ERROR(ReadExpect(*expect, "expect", &s));
  if (s.checks.empty()) {
    return Error("expect", *expect, "the scenario checks nothing");
  }
  return s;
}

}  // namespace

std::vector<std::string> Scenario::Policies() const {
  std::vector<std::string> out = {policy};
  for (const ScenarioCheck& c : checks) {
    if (std::find(out.begin(), out.end(), c.policy) == out.end()) {
      out.push_back(c.policy);
    }
  }
  return out;
}

StatusOr<Scenario> ParseScenario(const std::string& yaml, const std::string& file,
                                 const GpuCatalog& catalog) {
  try {
    YAML::Node root = YAML::Load(yaml);
    Parser parser(file, catalog);
    return parser.Parse(root);
  } catch (const YAML::Exception& e) {
    std::string where;
    if (!e.mark.is_null()) {
      where = " (line " + std::to_string(e.mark.line + 1) + ", column " +
              std::to_string(e.mark.column + 1) + ")";
    }
    return InvalidArgumentError(file + ": " + e.msg + where);
  }
}

StatusOr<Scenario> LoadScenarioFile(const std::string& path, const GpuCatalog& catalog) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return NotFoundError("cannot read scenario file '" + path + "'");
  }
  std::stringstream text;
  text << in.rdbuf();
  return ParseScenario(text.str(), path, catalog);
}

}  // namespace tessera
