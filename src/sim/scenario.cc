#include "sim/scenario.h"

#include "sim/scenario_parser.h"

namespace tessera {
namespace scenario_internal {

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
            TESSERA_ASSIGN_OR_RETURN(given, Strings(v, p));
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
            TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> list, Strings(v, p));
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

}  // namespace scenario_internal

using scenario_internal::Parser;

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

