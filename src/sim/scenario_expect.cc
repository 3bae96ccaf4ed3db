// The `expect:` part of a scenario file: each check, its payload and its line.
#include "sim/scenario.h"
#include "sim/scenario_parser.h"

namespace tessera::scenario_internal {

// A list of jobs; "prefix*" stands for every job whose name starts with prefix, in
// file order (e.g. the jobs of a `repeat`).
StatusOr<std::vector<std::string>> Parser::JobsNamed(const std::string& name,
                                                     const YAML::Node& node,
                                                     const std::string& path) const {
  if (name.empty() || name.back() != '*') {
    TESSERA_RETURN_IF_ERROR(KnownJob(name, node, path));
    return std::vector<std::string>{name};
  }
  const std::string_view prefix(name.data(), name.size() - 1);
  std::vector<std::string> out;
  for (const std::string& job : job_order_) {
    if (StartsWith(job, prefix)) {
      out.push_back(job);
    }
  }
  if (out.empty()) {
    return Error(path, node, "no job name starts with '" + std::string(prefix) + "'");
  }
  return out;
}

// A list of jobs; "prefix*" stands for every job whose name starts with prefix, in
// file order (e.g. the jobs of a `repeat`).
Status Parser::ReadJobList(const YAML::Node& value, const std::string& path,
                           ScenarioCheck* c) const {
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> names, Strings(value, path));
  for (size_t i = 0; i < names.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> jobs, JobsNamed(names[i], value[i], path));
    c->names.insert(c->names.end(), jobs.begin(), jobs.end());
  }
  if (c->names.empty()) {
    return Error(path, value, "names no job");
  }
  return Status::Ok();
}

// The checks keyed by job or time: preempted, on_nodes, running_at.
Status Parser::ReadKeyedCheck(const std::string& kind, const YAML::Node& value,
                              const std::string& path, ScenarioCheck* c) const {
  if (kind == "preempted") {
    if (value.IsSequence()) {
      TESSERA_RETURN_IF_ERROR(ReadJobList(value, path, c));
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
    Status st = ForEachKey(
        value, path, {}, [&](const std::string& job, const YAML::Node& v, const std::string& p) {
          TESSERA_RETURN_IF_ERROR(KnownJob(job, v, p));
          TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> nodes, Strings(v, p));
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
  return ForEachKey(
      value, path, {}, [&](const std::string& time, const YAML::Node& v, const std::string& p) {
        StatusOr<int64_t> t = ParseInt64(time);
        if (!t.ok() || *t < 0) {
          return Error(p, v, "expected a time in whole seconds as the key, got '" + time + "'");
        }
        std::vector<std::string> jobs;
        if (!v.IsNull()) {
          TESSERA_ASSIGN_OR_RETURN(jobs, Strings(v, p));
        }
        for (size_t i = 0; i < jobs.size(); ++i) {
          TESSERA_RETURN_IF_ERROR(KnownJob(jobs[i], v[i], p));
        }
        c->at.emplace_back(*t * kSecond, std::move(jobs));
        return Status::Ok();
      });
}

// ends: {job: succeeded | failed | cancelled | unfinished}.
Status Parser::ReadEnds(const YAML::Node& value, const std::string& path, ScenarioCheck* c) const {
  Status st = ForEachKey(
      value, path, {}, [&](const std::string& key, const YAML::Node& v, const std::string& p) {
        TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> jobs, JobsNamed(key, v, p));
        TESSERA_ASSIGN_OR_RETURN(std::string end, String(v, p));
        if (end != "succeeded" && end != "failed" && end != "cancelled" && end != "unfinished") {
          return Error(p, v,
                       "expected succeeded, failed, cancelled or unfinished, got '" + end + "'");
        }
        for (const std::string& job : jobs) {
          c->pairs.emplace_back(job, end == "unfinished" ? "" : end);
        }
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

Status Parser::ReadCheck(const std::string& kind, const YAML::Node& value, const YAML::Node& key,
                         const std::string& path, ScenarioCheck* c) const {
  c->kind = kind;
  c->line = LineOf(key);
  auto job_list = [&] { return ReadJobList(value, path, c); };
  // {job: value} with values read by `read` ("prefix*" keys stand for every such job).
  auto job_map =
      [&](const std::function<StatusOr<int64_t>(const YAML::Node&, const std::string&)>& read)
      -> Status {
    Status st = ForEachKey(value, path, {},
                           [&](const std::string& name, const YAML::Node& v, const std::string& p) {
                             TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> jobs,
                                                      JobsNamed(name, v, p));
                             TESSERA_ASSIGN_OR_RETURN(int64_t x, read(v, p));
                             for (const std::string& job : jobs) {
                               c->values.emplace_back(job, x);
                             }
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
  if (kind == "preemptions_of" || kind == "lost_work" || kind == "attempts" ||
      kind == "restarts") {
    return job_map(count);
  }
  if (kind == "ends") {
    return ReadEnds(value, path, c);
  }
  if (kind == "max_preemptions" || kind == "quota_violations") {
    TESSERA_ASSIGN_OR_RETURN(c->number, NonNegative(value, path));
    return Status::Ok();
  }
  if (kind == "all_finish") {
    TESSERA_ASSIGN_OR_RETURN(c->flag, Bool(value, path));
    return Status::Ok();
  }
  if (kind == "preempted" || kind == "on_nodes" || kind == "running_at") {
    return ReadKeyedCheck(kind, value, path, c);
  }
  return Error(path, key,
               "unknown check '" + kind +
                   "'; expected one of start_order, starts, finishes, on_nodes, same_node, "
                   "same_rack, preempted, not_preempted, preemptions_of, max_preemptions, "
                   "backfilled, not_backfilled, borrowing, not_borrowing, never_starts, "
                   "running_at, lost_work, ends, attempts, restarts, all_finish, "
                   "quota_violations, policy");
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
        TESSERA_ASSIGN_OR_RETURN(policies, Strings(policy, ppath));
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

}  // namespace tessera::scenario_internal
