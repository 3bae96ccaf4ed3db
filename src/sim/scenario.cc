#include "sim/scenario.h"

#include "api/job_codec.h"
#include "api/queue_idle.h"
#include "sim/scenario_parser.h"

namespace tessera {
namespace scenario_internal {

Status Parser::ReadOptions(const YAML::Node& node, const std::string& path,
                           ScenarioOptions* o) const {
  return ForEachKey(
      node, path,
      {"grace_seconds", "tick_seconds", "starvation_seconds", "min_run_seconds", "las_thresholds",
       "fairshare_half_life_seconds", "lossless_preemption", "placement", "seed",
       "restart_overhead_seconds", "checkpoint_wait_seconds", "stop_grace_seconds"},
      [&](const std::string& key, const YAML::Node& v, const std::string& p) -> Status {
        if (key == "grace_seconds") {
          TESSERA_ASSIGN_OR_RETURN(o->grace, Time(v, p));
        } else if (key == "stop_grace_seconds") {
          TESSERA_ASSIGN_OR_RETURN(o->stop_grace, Time(v, p));
        } else if (key == "restart_overhead_seconds") {
          TESSERA_ASSIGN_OR_RETURN(o->restart_overhead, Time(v, p));
        } else if (key == "checkpoint_wait_seconds") {
          TESSERA_ASSIGN_OR_RETURN(o->checkpoint_wait, Time(v, p));
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
    GpuSharing mode;  // exclusive
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
            StatusOr<GpuSharing> m = ParseGpuSharing(name);  // timeslice=N with replicas
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
                                      static_cast<int>(gpus), mode.mode, static_cast<int>(numa),
                                      nvlink);
      for (GpuSpec& g : spec.gpus) {
        g.replicas = mode.replicas;
      }
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

Status Parser::ReadJob(const YAML::Node& node, const std::string& path, const QueueTree& tree,
                       const std::string& default_queue, std::vector<SimJob>* out) const {
  // The job is the API's job spec (api/job_codec.h); the scenario adds when it arrives,
  // how long it runs and how often it repeats.
  if (node.IsMap() && node["dependency"].IsDefined()) {
    // The API's dependency names jobs by id, which mean nothing here.
    return Error(path + ".dependency", node["dependency"],
                 "a scenario names its jobs' dependencies with depends (e.g. depends: "
                 "\"afterok:j1\", by job name), not the API's dependency (by job id)");
  }
  EmbeddedJobOptions fields;
  fields.path = path;
  fields.extra_keys = {"submit", "duration", "repeat", "failures", "depends", "utilisation"};
  fields.priority_class = [&tree](const std::string& name) { return tree.PriorityOf(name); };
  StatusOr<JobSubmission> submission = ReadEmbeddedJob(node, catalog_, fields);
  if (!submission.ok()) {
    const std::string m = submission.status().message();
    return InvalidArgumentError(file_.empty() ? m : file_ + ": " + m);
  }
  SimJob job;
  job.spec = std::move(submission->spec);
  job.restart = submission->restart.value_or(DefaultRestartPolicy());
  job.hold = submission->hold;
  JobSpec& spec = job.spec;
  int64_t repeat = 1;
  Micros every = 0;
  bool has_duration = false;
  TESSERA_RETURN_IF_ERROR(
      ForEachKey(node, path, {},
                 [&](const std::string& key, const YAML::Node& v, const std::string& p) -> Status {
                   if (key == "submit") {
                     TESSERA_ASSIGN_OR_RETURN(spec.submit_time, Time(v, p));
                   } else if (key == "duration") {
                     TESSERA_ASSIGN_OR_RETURN(job.duration, Time(v, p));
                     if (job.duration <= 0) {
                       return Error(p, v, "duration must be > 0");
                     }
                     has_duration = true;
                   } else if (key == "repeat") {
                     return ReadRepeat(v, p, &repeat, &every);
                   } else if (key == "failures") {
                     return ReadFailures(v, p, spec.tasks.size(), &job.failures);
                   } else if (key == "utilisation") {
                     return ReadUtilisation(v, p, &job.utilisation);
                   }
                   return Status::Ok();
                 }));
  if (spec.name.empty()) {
    return Error(path, node, "a job needs a name");
  }
  if (!has_duration) {
    return Error(path, node, "job '" + spec.name + "' needs a duration");
  }
  if (spec.queue.empty()) {
    if (default_queue.empty()) {
      return Error(path, node, "job '" + spec.name + "' needs a queue (there are several)");
    }
    spec.queue = default_queue;
  } else if (StatusOr<QueueId> q = tree.FindQueue(spec.queue); !q.ok()) {
    return Error(path + ".queue", node["queue"], q.status().message());
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

Status Parser::ReadUtilisation(const YAML::Node& node, const std::string& path,
                               std::vector<SimUtilisation>* out) const {
  auto pct = [&](const YAML::Node& v, const std::string& p) -> StatusOr<int> {
    TESSERA_ASSIGN_OR_RETURN(int64_t x, NonNegative(v, p));
    if (x > 100) {
      return Error(p, v, "utilisation is a percentage 0..100");
    }
    return static_cast<int>(x);
  };
  if (node.IsScalar()) {  // the same all along
    TESSERA_ASSIGN_OR_RETURN(int x, pct(node, path));
    out->push_back(SimUtilisation{0, x});
    return Status::Ok();
  }
  return ForEachEntry(node, path, [&](const YAML::Node& entry, const std::string& epath) -> Status {
    SimUtilisation u;
    TESSERA_RETURN_IF_ERROR(ForEachKey(
        entry, epath, {"after", "pct"},
        [&](const std::string& key, const YAML::Node& v, const std::string& p) -> Status {
          if (key == "after") {
            TESSERA_ASSIGN_OR_RETURN(u.after, Time(v, p));
          } else {
            TESSERA_ASSIGN_OR_RETURN(u.pct, pct(v, p));
          }
          return Status::Ok();
        }));
    if (!out->empty() && u.after <= out->back().after) {
      return Error(epath, entry, "steps go in ascending `after`");
    }
    out->push_back(u);
    return Status::Ok();
  });
}

Status Parser::ReadFailures(const YAML::Node& node, const std::string& path, size_t tasks,
                            std::vector<SimFailure>* out) const {
  return ForEachEntry(node, path, [&](const YAML::Node& entry, const std::string& epath) -> Status {
    SimFailure f;
    bool has_code = false;
    bool has_signal = false;
    TESSERA_RETURN_IF_ERROR(ForEachKey(
        entry, epath, {"attempt", "after", "task", "exit_code", "signal"},
        [&](const std::string& key, const YAML::Node& v, const std::string& p) -> Status {
          int64_t x = 0;
          if (key == "after") {
            TESSERA_ASSIGN_OR_RETURN(f.after, Time(v, p));
            return Status::Ok();
          }
          TESSERA_ASSIGN_OR_RETURN(x, NonNegative(v, p));
          if (key == "attempt") {
            if (x < 1 || x > 1000) {
              return Error(p, v, "attempt must be in 1..1000 (the job's Nth start)");
            }
            f.attempt = static_cast<int>(x);
          } else if (key == "task") {
            if (x >= static_cast<int64_t>(tasks)) {
              return Error(p, v, "task " + std::to_string(x) + " is not one of the job's " +
                                     std::to_string(tasks) + " tasks (0-based)");
            }
            f.task = static_cast<int>(x);
          } else if (key == "exit_code") {
            if (x < 1 || x > 255) {
              return Error(p, v, "exit_code must be in 1..255");
            }
            f.exit_code = static_cast<int>(x);
            has_code = true;
          } else {
            if (x < 1 || x > 64) {
              return Error(p, v, "signal must be in 1..64");
            }
            f.signal = static_cast<int>(x);
            has_signal = true;
          }
          return Status::Ok();
        }));
    if (has_code && has_signal) {
      return Error(epath, entry, "a failure has an exit_code or a signal, not both");
    }
    if (has_signal) {
      f.exit_code = 0;
    }
    out->push_back(f);
    return Status::Ok();
  });
}

Status Parser::ReadEvent(const YAML::Node& node, const std::string& path,
                         const std::vector<NodeSpec>& nodes, SimClusterEvent* out,
                         std::optional<std::string>* release) const {
  bool has_at = false;
  int what = 0;
  auto find_node = [&](const YAML::Node& v, const std::string& p) -> StatusOr<const NodeSpec*> {
    TESSERA_ASSIGN_OR_RETURN(std::string name, String(v, p));
    for (const NodeSpec& n : nodes) {
      if (n.name == name) {
        out->node = name;
        return &n;
      }
    }
    return Error(p, v, "no node named '" + name + "' in the cluster");
  };
  TESSERA_RETURN_IF_ERROR(ForEachKey(
      node, path, {"at", "node_lost", "gpu_fault", "release"},
      [&](const std::string& key, const YAML::Node& v, const std::string& p) -> Status {
        if (key == "at") {
          TESSERA_ASSIGN_OR_RETURN(out->at, Time(v, p));
          has_at = true;
          return Status::Ok();
        }
        ++what;
        if (key == "release") {
          TESSERA_ASSIGN_OR_RETURN(std::string job, String(v, p));
          *release = std::move(job);
          return Status::Ok();
        }
        if (key == "node_lost") {
          out->kind = SimClusterEvent::Kind::kNodeLost;
          return find_node(v, p).status();
        }
        out->kind = SimClusterEvent::Kind::kGpuFault;
        const NodeSpec* spec = nullptr;
        Status fault = ForEachKey(
            v, p, {"node", "gpu", "xid"},
            [&](const std::string& k, const YAML::Node& fv, const std::string& fp) -> Status {
              if (k == "node") {
                TESSERA_ASSIGN_OR_RETURN(spec, find_node(fv, fp));
                return Status::Ok();
              }
              TESSERA_ASSIGN_OR_RETURN(int64_t x, NonNegative(fv, fp));
              if (k == "xid" && (x < 1 || x > 1000)) {
                return Error(fp, fv, "xid must be in 1..1000");
              }
              (k == "gpu" ? out->gpu : out->xid) = static_cast<int>(std::min<int64_t>(x, 1000));
              return Status::Ok();
            });
        if (!fault.ok()) {
          return fault;
        }
        if (spec == nullptr) {
          return Error(p, v, "a gpu_fault needs a node");
        }
        if (out->gpu >= static_cast<int>(spec->gpus.size())) {
          return Error(p, v, "node '" + spec->name + "' has no GPU " + std::to_string(out->gpu));
        }
        return Status::Ok();
      }));
  if (!has_at) {
    return Error(path, node, "an event needs a time (at)");
  }
  if (what != 1) {
    return Error(path, node, "an event is one of node_lost, gpu_fault or release");
  }
  return Status::Ok();
}

Status Parser::ReadEvents(const YAML::Node& node, const std::string& path,
                          const std::vector<NodeSpec>& nodes, std::vector<SimJob>* jobs,
                          std::vector<SimClusterEvent>* out) const {
  return ForEachEntry(node, path, [&](const YAML::Node& entry, const std::string& epath) {
    SimClusterEvent e;
    std::optional<std::string> release;
    TESSERA_RETURN_IF_ERROR(ReadEvent(entry, epath, nodes, &e, &release));
    if (!release) {
      out->push_back(std::move(e));
      return Status::Ok();
    }
    const std::string p = epath + ".release";
    const YAML::Node v = entry["release"];
    auto job = std::find_if(jobs->begin(), jobs->end(),
                            [&](const SimJob& j) { return j.spec.name == *release; });
    if (job == jobs->end()) {
      return Error(p, v, "no job named '" + *release + "'");
    }
    if (!job->hold) {
      return Error(p, v,
                   "job '" + *release + "' is not held (release is for a job with hold: true)");
    }
    if (job->release) {
      return Error(p, v, "job '" + *release + "' is released twice");
    }
    if (e.at < job->spec.submit_time) {
      return Error(p, v,
                   "job '" + *release + "' is released at " + std::to_string(e.at / kSecond) +
                       " s, before its submission at " +
                       std::to_string(job->spec.submit_time / kSecond) + " s");
    }
    job->release = e.at;
    return Status::Ok();
  });
}

StatusOr<DependencySpec> Parser::ReadDepends(const YAML::Node& node, const std::string& path,
                                             const std::vector<SimJob>& jobs, size_t self) const {
  TESSERA_ASSIGN_OR_RETURN(std::string text, String(node, path));
  const std::string_view whole = Trim(text);
  DependencySpec spec;
  spec.any = whole.find('?') != std::string_view::npos;
  if (spec.any && whole.find(',') != std::string_view::npos) {
    return Error(path, node, "use either ',' (all) or '?' (any), not both");
  }
  const SimJob& dependent = jobs[self];
  for (std::string_view item : Split(whole, spec.any ? '?' : ',')) {
    item = Trim(item);
    const std::vector<std::string_view> parts = Split(item, ':');
    Dependency dep;
    bool known = false;
    for (DependencyKind k : {DependencyKind::kAfter, DependencyKind::kAfterAny,
                             DependencyKind::kAfterOk, DependencyKind::kAfterNotOk}) {
      if (!parts.empty() && Trim(parts[0]) == DependencyKindName(k)) {
        dep.kind = k;
        known = true;
      }
    }
    if (!known || parts.size() < 2) {
      return Error(path, node,
                   "'" + std::string(item) +
                       "' is not a dependency: use after, afterany, afterok "
                       "or afternotok, each followed by :JOB[:JOB...] naming jobs of this file");
    }
    for (size_t i = 1; i < parts.size(); ++i) {
      const std::string name(Trim(parts[i]));
      auto it = std::find_if(jobs.begin(), jobs.end(),
                             [&](const SimJob& j) { return j.spec.name == name; });
      if (it == jobs.end()) {
        return Error(path, node, "no job named '" + name + "'");
      }
      const auto k = static_cast<size_t>(it - jobs.begin());
      if (k == self) {
        return Error(path, node, "job '" + name + "' cannot depend on itself");
      }
      const Micros at = it->spec.submit_time;
      if (at > dependent.spec.submit_time || (at == dependent.spec.submit_time && k > self)) {
        return Error(path, node,
                     "job '" + name + "' is submitted after '" + dependent.spec.name + "' (at " +
                         std::to_string(at / kSecond) +
                         " s; jobs of one time in file order): a job depends only on jobs "
                         "submitted before it");
      }
      dep.jobs.push_back(JobRef{k, -1});
    }
    spec.items.push_back(std::move(dep));
  }
  return spec;
}

Status Parser::ReadJobs(const YAML::Node& node, const QueueTree& tree,
                        const std::string& default_queue, Scenario* s) {
  struct Depends {
    size_t job;
    YAML::Node value;
    std::string path;
  };
  std::vector<Depends> depends;  // read once every job is known
  Status all = ForEachEntry(node, "jobs", [&](const YAML::Node& e, const std::string& p) -> Status {
    std::vector<SimJob> read;
    TESSERA_RETURN_IF_ERROR(ReadJob(e, p, tree, default_queue, &read));
    const YAML::Node d = e["depends"];
    for (SimJob& job : read) {
      if (!job_names_.insert(job.spec.name).second) {
        return Error(p, e, "job name '" + job.spec.name + "' is used twice");
      }
      job_order_.push_back(job.spec.name);
      if (d.IsDefined()) {
        depends.push_back(Depends{s->jobs.size(), d, p + ".depends"});
      }
      s->jobs.push_back(std::move(job));
    }
    return Status::Ok();
  });
  if (!all.ok()) {
    return all;
  }
  for (const Depends& d : depends) {
    TESSERA_ASSIGN_OR_RETURN(s->jobs[d.job].dependency,
                             ReadDepends(d.value, d.path, s->jobs, d.job));
  }
  return Status::Ok();
}

Status Parser::ReadRepeat(const YAML::Node& node, const std::string& path, int64_t* count,
                          Micros* every) const {
  bool has_count = false;
  TESSERA_RETURN_IF_ERROR(
      ForEachKey(node, path, {"count", "every"},
                 [&](const std::string& key, const YAML::Node& v, const std::string& p) -> Status {
                   if (key == "count") {
                     TESSERA_ASSIGN_OR_RETURN(*count, NonNegative(v, p));
                     if (*count < 1 || *count > 10000) {
                       return Error(p, v, "count must be in 1..10000");
                     }
                     has_count = true;
                   } else {
                     TESSERA_ASSIGN_OR_RETURN(*every, Time(v, p));
                   }
                   return Status::Ok();
                 }));
  if (!has_count) {
    return Error(path, node, "repeat needs a count");
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
  std::optional<YAML::Node> options, cluster, queues, jobs, expect, policy, events;
  TESSERA_RETURN_IF_ERROR(ForEachKey(
      root, "",
      {"name", "description", "policy", "options", "cluster", "queues", "jobs", "events", "expect"},
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
        } else if (key == "events") {
          events.emplace(v);
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
    // Checked by ParseQueueTreeYaml with the rest of the configuration.
    StatusOr<std::map<std::string, IdlePolicy>> idle = QueueIdlePolicies(YAML::Dump(*queues));
    if (!idle.ok()) {
      return InvalidArgumentError(file_ + ": queues: " + idle.status().message());
    }
    s.idle = std::move(*idle);
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
  TESSERA_RETURN_IF_ERROR(ReadJobs(*jobs, *tree, default_queue, &s));
  if (s.jobs.empty()) {
    return Error("jobs", *jobs, "the scenario has no jobs");
  }
  if (events) {  // after the jobs: a release names one
    TESSERA_RETURN_IF_ERROR(ReadEvents(*events, "events", s.nodes, &s.jobs, &s.events));
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

