// The recorded history: the API's pages read back, each job's actual work, and the
// replay's jobs, nodes and "what happened" (whatif.h).
#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "api/agent_protocol.h"
#include "api/job_codec.h"
#include "plugins/job_policies.h"
#include "sim/whatif.h"

namespace tessera {
namespace {

using json = nlohmann::json;

Status Bad(const std::string& field, const std::string& what) {
  return InvalidArgumentError("history: " + field + ": " + what);
}

StatusOr<int64_t> Int(const json& j, const char* key, const std::string& path) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number_integer()) {
    return Bad(path + key, "an integer is required");
  }
  return j[key].get<int64_t>();
}

StatusOr<std::string> Str(const json& j, const char* key, const std::string& path) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) {
    return Bad(path + key, "a string is required");
  }
  return j[key].get<std::string>();
}

StatusOr<RecordedPolicy> PolicyFromJson(const json& j) {
  RecordedPolicy p;
  TESSERA_ASSIGN_OR_RETURN(p.name, Str(j, "name", "policy."));
  TESSERA_ASSIGN_OR_RETURN(p.placement, Str(j, "placement", "policy."));
  TESSERA_ASSIGN_OR_RETURN(int64_t seed, Int(j, "seed", "policy."));
  p.seed = static_cast<uint64_t>(seed);
  TESSERA_ASSIGN_OR_RETURN(p.restart_overhead, Int(j, "restart_overhead_us", "policy."));
  TESSERA_ASSIGN_OR_RETURN(p.checkpoint_wait, Int(j, "checkpoint_wait_us", "policy."));
  TESSERA_ASSIGN_OR_RETURN(p.min_run_before_reclaim,
                           Int(j, "min_run_before_reclaim_us", "policy."));
  TESSERA_ASSIGN_OR_RETURN(p.grace, Int(j, "grace_us", "policy."));
  if (j.contains("victim_hold_us")) {
    TESSERA_ASSIGN_OR_RETURN(p.victim_hold, Int(j, "victim_hold_us", "policy."));
  }
  return p;
}

StatusOr<RecordedJob> JobFromJson(const json& j, size_t index, const GpuCatalog& catalog) {
  const std::string path = "jobs[" + std::to_string(index) + "].";
  RecordedJob job;
  TESSERA_ASSIGN_OR_RETURN(int64_t id, Int(j, "id", path));
  job.id = static_cast<uint64_t>(id);
  TESSERA_ASSIGN_OR_RETURN(job.name, Str(j, "name", path));
  TESSERA_ASSIGN_OR_RETURN(job.tenant, Str(j, "tenant", path));
  TESSERA_ASSIGN_OR_RETURN(job.queue, Str(j, "queue", path));
  TESSERA_ASSIGN_OR_RETURN(job.state, Str(j, "state", path));
  TESSERA_ASSIGN_OR_RETURN(job.submit, Int(j, "submit_us", path));
  TESSERA_ASSIGN_OR_RETURN(job.start, Int(j, "start_us", path));
  TESSERA_ASSIGN_OR_RETURN(job.end, Int(j, "end_us", path));
  TESSERA_ASSIGN_OR_RETURN(int64_t attempts, Int(j, "attempts", path));
  TESSERA_ASSIGN_OR_RETURN(int64_t preemptions, Int(j, "preemptions", path));
  job.attempts = static_cast<int>(attempts);
  job.preemptions = static_cast<int>(preemptions);
  TESSERA_ASSIGN_OR_RETURN(job.progress, Int(j, "progress_us", path));
  if (!j.contains("spec") || !j["spec"].is_object()) {
    return Bad(path + "spec", "the submission is required");
  }
  StatusOr<JobSubmission> sub = JobSubmissionFromJsonAt(j["spec"], catalog, path + "spec");
  if (!sub.ok()) {
    return Bad(path + "spec", sub.status().message());
  }
  job.spec = std::move(sub->spec);
  if (job.spec.queue.empty()) {
    job.spec.queue = job.queue;
  }
  if (!j.contains("runs") || !j["runs"].is_array()) {
    return Bad(path + "runs", "an array of attempts is required");
  }
  for (size_t r = 0; r < j["runs"].size(); ++r) {
    const std::string rp = path + "runs[" + std::to_string(r) + "].";
    RecordedAttempt a;
    TESSERA_ASSIGN_OR_RETURN(a.start, Int(j["runs"][r], "start_us", rp));
    TESSERA_ASSIGN_OR_RETURN(a.end, Int(j["runs"][r], "end_us", rp));
    TESSERA_ASSIGN_OR_RETURN(a.gpu_milli, Int(j["runs"][r], "gpu_milli", rp));
    if (a.end < a.start) {
      return Bad(rp + "end_us", "before start_us");
    }
    job.runs.push_back(a);
  }
  std::sort(job.runs.begin(), job.runs.end(),
            [](const RecordedAttempt& a, const RecordedAttempt& b) { return a.start < b.start; });
  return job;
}

}  // namespace

StatusOr<uint64_t> AddHistoryPage(const json& page, const GpuCatalog& catalog,
                                  RecordedHistory* into) {
  if (!page.is_object()) {
    return Bad("page", "a JSON object is required");
  }
  if (into->policy.name.empty()) {
    TESSERA_ASSIGN_OR_RETURN(into->since, Int(page, "since_us", ""));
    TESSERA_ASSIGN_OR_RETURN(into->until, Int(page, "until_us", ""));
    if (!page.contains("policy")) {
      return Bad("policy", "the controller's policy is required");
    }
    TESSERA_ASSIGN_OR_RETURN(into->policy, PolicyFromJson(page["policy"]));
    TESSERA_ASSIGN_OR_RETURN(into->queues_yaml, Str(page, "queues_yaml", ""));
    if (!page.contains("nodes") || !page["nodes"].is_array()) {
      return Bad("nodes", "an array is required");
    }
    for (size_t i = 0; i < page["nodes"].size(); ++i) {
      const json& n = page["nodes"][i];
      const std::string path = "nodes[" + std::to_string(i) + "].";
      RecordedNode node;
      TESSERA_ASSIGN_OR_RETURN(node.at, Int(n, "at_us", path));
      TESSERA_ASSIGN_OR_RETURN(std::string event, Str(n, "event", path));
      TESSERA_ASSIGN_OR_RETURN(std::string name, Str(n, "name", path));
      if (event == "leave") {
        node.left = true;
        node.spec.name = name;
      } else if (event == "join") {
        if (!n.contains("inventory")) {
          return Bad(path + "inventory", "required for a join");
        }
        StatusOr<NodeInventory> inv = NodeInventoryFromJson(n["inventory"], catalog);
        if (!inv.ok()) {
          return Bad(path + "inventory", inv.status().message());
        }
        node.spec = std::move(inv->spec);
      } else {
        return Bad(path + "event", "'join' or 'leave', not '" + event + "'");
      }
      into->nodes.push_back(std::move(node));
    }
  }
  if (!page.contains("jobs") || !page["jobs"].is_array()) {
    return Bad("jobs", "an array is required");
  }
  for (size_t i = 0; i < page["jobs"].size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(RecordedJob job, JobFromJson(page["jobs"][i], i, catalog));
    into->jobs.push_back(std::move(job));
  }
  if (!page.contains("next_after") || page["next_after"].is_null()) {
    return uint64_t{0};
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t next, Int(page, "next_after", ""));
  return static_cast<uint64_t>(next);
}

Micros ActualWork(const RecordedJob& job, Micros restart_overhead) {
  if (job.start == 0 || job.end == 0) {
    return -1;
  }
  if (job.runs.empty()) {
    return job.progress;  // ended the instant it started: no interval was recorded
  }
  const RecordedAttempt& last = job.runs.back();
  // A resumed attempt spent its first restart_overhead without progress (JobRecord).
  const Micros startup = job.runs.size() > 1 || job.attempts > 1 ? restart_overhead : 0;
  return std::max<Micros>(0, job.progress + (last.end - last.start) - startup);
}

StatusOr<SchedulerPolicy> RecordedSchedulerPolicy(const RecordedPolicy& recorded) {
  StatusOr<SchedulerPolicy> p = ParseSchedulerPolicy(recorded.name);
  if (!p.ok()) {
    return InvalidArgumentError("the controller's policy '" + recorded.name +
                                "' is unknown to this simulator: " + p.status().message());
  }
  p->options.restart_overhead = recorded.restart_overhead;
  p->options.checkpoint_wait = recorded.checkpoint_wait;
  p->options.min_run_before_reclaim = recorded.min_run_before_reclaim;
  p->options.victim_hold = recorded.victim_hold;
  p->options.grace = recorded.grace;
  return p;
}

StatusOr<SchedulerPolicy> PolicyUnderRecordedBounds(const std::string& spec,
                                                    const RecordedPolicy& recorded) {
  StatusOr<SchedulerPolicy> p = ParseSchedulerPolicy(spec);
  if (!p.ok()) {
    return InvalidArgumentError("--policy: " + p.status().message());
  }
  // As the controller runs a named policy, with the cluster's restart overhead.
  SchedulerPolicy bounded =
      WithServerBounds(*std::move(p), recorded.min_run_before_reclaim, recorded.victim_hold);
  bounded.options.restart_overhead = recorded.restart_overhead;
  return bounded;
}

StatusOr<Replay> BuildReplay(const RecordedHistory& history, const QueueTree& tree) {
  Replay replay;
  // Nodes present at some time in the window, with their last spec before its end.
  std::map<std::string, NodeSpec> spec_of;
  std::set<std::string> in_window;
  for (const RecordedNode& n : history.nodes) {  // by node, then time
    if (n.at >= history.until) {
      continue;
    }
    if (n.left) {
      if (n.at <= history.since) {
        in_window.erase(n.spec.name);  // gone before the window
      }
    } else {
      spec_of[n.spec.name] = n.spec;
      in_window.insert(n.spec.name);
    }
  }
  for (const std::string& name : in_window) {
    replay.nodes.push_back(spec_of.at(name));
  }

  bool any = false;
  for (const RecordedJob& job : history.jobs) {
    const Micros work = ActualWork(job, history.policy.restart_overhead);
    if (work < 0) {
      (job.start == 0 ? replay.never_ran : replay.not_ended) += 1;
      continue;
    }
    if (!tree.FindQueue(job.spec.queue).ok()) {
      return FailedPreconditionError("job " + std::to_string(job.id) + " ran in queue '" +
                                     job.spec.queue +
                                     "', which the queue configuration does not have");
    }
    if (!any) {
      replay.origin = job.submit;
      any = true;
    }
    replay.origin = std::min(replay.origin, job.submit);
  }
  if (!any) {
    return FailedPreconditionError(
        "no job to replay in the window: " + std::to_string(history.jobs.size()) +
        " submitted, " + std::to_string(replay.never_ran) + " never ran, " +
        std::to_string(replay.not_ended) + " had not ended");
  }
  if (replay.nodes.empty()) {
    return FailedPreconditionError("no node was recorded in the window");
  }
  std::set<std::string> tenants;
  for (const RecordedJob& job : history.jobs) {
    const Micros work = ActualWork(job, history.policy.restart_overhead);
    if (work < 0 || !tree.FindQueue(job.spec.queue).ok()) {
      continue;
    }
    SimJob sim{job.spec, work};
    sim.spec.submit_time = job.submit - replay.origin;
    replay.jobs.push_back(std::move(sim));

    JobOutcome o;
    o.name = job.spec.name;
    o.tenant = job.tenant;
    o.gpus = job.spec.TotalGpus();
    o.submit = job.submit - replay.origin;
    o.first_start = job.start - replay.origin;
    o.finish = job.end - replay.origin;
    for (const RecordedAttempt& a : job.runs) {
      o.service += a.end - a.start;
    }
    o.preemptions = job.preemptions;
    o.lost_gpu_seconds =
        static_cast<double>(o.gpus) * static_cast<double>(std::max<Micros>(0, o.service - work)) / 1e6;
    o.actual = work;
    replay.actual.jobs.push_back(std::move(o));
    tenants.insert(job.tenant);
  }
  replay.actual.policy = "actual";
  replay.actual.tenants.assign(tenants.begin(), tenants.end());
  for (const NodeSpec& n : replay.nodes) {
    replay.actual.cluster_gpus += static_cast<int64_t>(n.gpus.size());
  }
  return replay;
}

}  // namespace tessera
