// Job arrays, dependencies, holds and singletons (job_gates.h): what keeps a pending
// job back beyond resources. Each watched job is gated in the core
// (JobLifecycle::Gate) from its acknowledgement until a pass (UpdateGates, before each
// cycle in which something changed) finds nothing keeps it back; its reason is then
// its pending reason. A hold is durable as the job row's reason (kHeldReasonPrefix);
// everything else follows from the jobs' states, so a restarted controller finds the
// same gates again.
#include <algorithm>
#include <tuple>

#include "api/job_relations.h"
#include "server/controller.h"

namespace tessera {

std::string HeldReason() {
  // Appended, not `std::string(prefix) + "..."`: GCC 12 misreads that inlined copy as an
  // overread (-Wstringop-overread) in this file.
  std::string reason(kHeldReasonPrefix);
  reason.append(": `tessera release JOB` lets it start");
  return reason;
}

bool IsHeldReason(std::string_view reason) {
  return reason.rfind(std::string(kHeldReasonPrefix) + ":", 0) == 0;
}

namespace {

bool Holding(JobState s) { return s == JobState::kRunning || s == JobState::kStopping; }

}  // namespace

std::shared_ptr<const JobGates::Array> Controller::ParsedArray(const std::string& text) const {
  if (auto it = parsed_arrays_.find(text); it != parsed_arrays_.end()) {
    return it->second;
  }
  StatusOr<ArraySpec> spec = ParseArraySpec(text);
  if (!spec.ok()) {
    return nullptr;
  }
  if (parsed_arrays_.size() >= 256) {
    parsed_arrays_.clear();  // bounded: texts are mostly few and repeated
  }
  auto array = std::make_shared<JobGates::Array>();
  array->indices = std::move(spec->indices);
  array->throttle = spec->throttle;
  parsed_arrays_[text] = array;
  return array;
}

uint64_t Controller::ArrayIdOf(const LiveJob& job) const {
  if (job.submission.array.empty() || job.submission.array_index < 0) {
    return 0;
  }
  std::shared_ptr<const JobGates::Array> a = ParsedArray(job.submission.array);
  if (a == nullptr) {
    return 0;
  }
  auto it = std::lower_bound(a->indices.begin(), a->indices.end(), job.submission.array_index);
  return job.row.id - static_cast<uint64_t>(it - a->indices.begin());
}

std::vector<JobSubmission> Controller::ExpandArray(const JobSubmission& job,
                                                   const JobGates::Array& a) {
  std::vector<JobSubmission> out(a.indices.size(), job);
  for (size_t k = 0; k < out.size(); ++k) {
    out[k].array_index = a.indices[k];
  }
  return out;
}

StatusOr<std::vector<JobNumber>> Controller::DependencyJobs(const JobRef& ref,
                                                            bool may_load, bool remember) {
  const JobNumber first(ref.id);
  std::shared_ptr<const JobGates::Array> array;
  bool is_array = false;
  if (auto it = gates_.arrays.find(ref.id); it != gates_.arrays.end()) {
    array = it->second;
    is_array = true;
  } else {
    std::optional<LiveJob> archived;
    const LiveJob* job = jobs_.Find(first);
    if (job == nullptr && may_load) {
      job = FindOrLoad(first, &archived);
    }
    if (job == nullptr) {
      return NotFoundError("no job " + ToString(first));
    }
    if (ArrayIdOf(*job) == ref.id) {
      array = ParsedArray(job->submission.array);
      is_array = array != nullptr;
      if (is_array && remember) {
        gates_.arrays[ref.id] = array;
      }
    }
  }
  if (ref.index >= 0) {
    if (!is_array) {
      return NotFoundError("job " + ToString(first) + " is not an array");
    }
    auto it = std::lower_bound(array->indices.begin(), array->indices.end(), ref.index);
    if (it == array->indices.end() || *it != ref.index) {
      return NotFoundError("array " + ToString(first) + " has no element " +
                           std::to_string(ref.index));
    }
    return std::vector<JobNumber>{JobNumber(ref.id + (it - array->indices.begin()))};
  }
  if (!is_array) {
    return std::vector<JobNumber>{first};
  }
  std::vector<JobNumber> all;
  for (size_t k = 0; k < array->indices.size(); ++k) {
    all.emplace_back(ref.id + k);
  }
  return all;
}

Status Controller::PrepareSubmission(const Principal& who, JobSubmission& job) {
  if (job.array_index >= 0) {
    return InvalidArgumentError("array_index: is set by the server on each element of an array");
  }
  if (!job.priority_class.empty()) {
    std::vector<std::string> names;
    bool found = false;
    for (const PriorityClass& c : core_.tree().priority_classes()) {
      names.push_back(c.name);
      if (c.name == job.priority_class) {
        job.spec.priority = c.value;
        found = true;
      }
    }
    if (!found) {
      std::string list;
      for (const std::string& n : names) {
        list += (list.empty() ? "" : ", ") + n;
      }
      return InvalidArgumentError("priority_class: no priority class '" + job.priority_class +
                                  "'" + (list.empty() ? " (the queue configuration has none)"
                                                      : "; there are: " + list));
    }
  }
  if (job.dependency.empty()) {
    return Status::Ok();
  }
  StatusOr<DependencySpec> spec = ParseDependencySpec(job.dependency);
  if (!spec.ok()) {
    return InvalidArgumentError("dependency: " + spec.status().message());
  }
  for (const Dependency& d : spec->items) {
    for (const JobRef& ref : d.jobs) {
      StatusOr<std::vector<JobNumber>> ids = DependencyJobs(ref, /*may_load=*/true);
      if (!ids.ok()) {
        return InvalidArgumentError("dependency: " + ids.status().message());
      }
      // Named jobs must be the submitter's to see.
      std::optional<LiveJob> archived;
      const LiveJob* target = FindOrLoad(ids->front(), &archived);
      if (target == nullptr || !Visible(who, *target)) {
        return InvalidArgumentError("dependency: no job " + JobRefText(ref));
      }
    }
  }
  return Status::Ok();
}

void Controller::WatchGates(LiveJob& job) {
  const JobNumber id = job.id();
  if (gates_.watched.count(id) != 0) {  // a hold on a job watched already
    gates_.dirty = true;
    if (jobs_.StateOf(job) == JobState::kPending) {
      core_.lifecycle()->Gate(jobs_.Rec(job));
      gates_.reasons[id] = job.row.reason;
    }
    return;
  }
  bool watch = IsHeldReason(job.row.reason);
  if (!job.submission.dependency.empty()) {
    JobGates::Waits waits;
    waits.text = job.submission.dependency;
    if (StatusOr<DependencySpec> spec = ParseDependencySpec(job.submission.dependency); spec.ok()) {
      waits.any = spec->any;
      for (const Dependency& d : spec->items) {
        if (d.kind == DependencyKind::kSingleton) {
          waits.singleton = true;
          continue;
        }
        JobGates::Item item{d.kind, {}};
        for (const JobRef& ref : d.jobs) {
          StatusOr<std::vector<JobNumber>> ids = DependencyJobs(ref, /*may_load=*/false);
          if (ids.ok()) {
            item.jobs.insert(item.jobs.end(), ids->begin(), ids->end());
          } else {
            // Known at submission, unknown now (its array left memory before a restart):
            // counted as a job that never ran.
            item.jobs.push_back(JobNumber(ref.id));
          }
        }
        for (JobNumber t : item.jobs) {
          ++gates_.referenced[t];
        }
        waits.items.push_back(std::move(item));
      }
    }
    gates_.dependencies[id] = std::move(waits);
    watch = true;
  }
  if (const uint64_t a = ArrayIdOf(job); a != 0) {
    std::shared_ptr<const JobGates::Array> array = ParsedArray(job.submission.array);
    if (array != nullptr && array->throttle > 0) {
      gates_.arrays.emplace(a, array);  // its throttle, read by each pass
      watch = true;
    }
  }
  if (!watch) {
    return;
  }
  gates_.watched.insert(id);
  gates_.dirty = true;
  if (jobs_.StateOf(job) == JobState::kPending && job.slot != JobTable::kArchived) {
    core_.lifecycle()->Gate(jobs_.Rec(job));
    gates_.reasons[id] = IsHeldReason(job.row.reason) ? job.row.reason
                                                       : "waiting for the next scheduling cycle";
  }
}

DependencyTarget Controller::TargetOf(JobNumber id) {
  if (const LiveJob* job = jobs_.Find(id)) {
    DependencyTarget t{job->row.attempts > 0 || Holding(jobs_.StateOf(*job)), Terminal(jobs_.StateOf(*job)),
                       jobs_.StateOf(*job) == JobState::kSucceeded};
    if (t.ended && gates_.referenced.count(id) != 0) {
      gates_.outcomes[id] = t;  // kept for when it leaves memory
    }
    return t;
  }
  if (auto it = gates_.outcomes.find(id); it != gates_.outcomes.end()) {
    return it->second;
  }
  // Archived before a pass saw it end (rare): its row, read once (a small read; the
  // pass holds the core lock). No such job: it never ran. A failed read decides nothing:
  // the job waits and the next pass reads again.
  DependencyTarget t{false, true, false};
  if (jobs_.MayExist(id)) {
    StatusOr<std::optional<JobRow>> row = store_->LoadJob(id.value());
    if (!row.ok()) {
      gates_.dirty = true;
      return DependencyTarget{false, false, false};
    }
    if (*row) {
      const JobState s = ParseJobState((*row)->state).value_or(JobState::kFailed);
      t = DependencyTarget{(*row)->attempts > 0, Terminal(s), s == JobState::kSucceeded};
    }
  }
  gates_.outcomes[id] = t;
  return t;
}

std::string Controller::GateReason(const LiveJob& job) const {
  auto it = gates_.reasons.find(job.id());
  return it == gates_.reasons.end() ? "" : it->second;
}

std::string Controller::DependencyReason(const JobGates::Waits& w) {
  std::string waiting;
  std::string never;
  size_t satisfied = 0;
  for (const JobGates::Item& item : w.items) {
    std::vector<DependencyTarget> targets;
    for (JobNumber t : item.jobs) {
      targets.push_back(TargetOf(t));
    }
    const DependencyState state = EvaluateDependency(item.kind, targets);
    if (state == DependencyState::kSatisfied) {
      ++satisfied;
      continue;
    }
    // The first job that decides it, for the reason.
    for (size_t k = 0; k < targets.size(); ++k) {
      const DependencyState one = EvaluateDependency(item.kind, {targets[k]});
      if (one == state) {
        const std::string what = std::string(DependencyKindName(item.kind)) + " on job " +
                                 ToString(item.jobs[k]);
        if (state == DependencyState::kNever && never.empty()) {
          never = what + (targets[k].succeeded ? ", which succeeded"
                          : targets[k].started ? ", which failed or was cancelled"
                                               : ", which ended without running");
        } else if (state == DependencyState::kWaiting && waiting.empty()) {
          waiting = what;
        }
        break;
      }
    }
  }
  const size_t items = w.items.size();
  const bool held_back = w.any ? (items > 0 && satisfied == 0) : satisfied < items;
  const bool impossible = w.any ? (items > 0 && !never.empty() && waiting.empty() && satisfied == 0)
                                : !never.empty();
  if (held_back && impossible) {
    return "dependency never satisfied: " + never + " (" + w.text +
           "); it will not start: cancel it";
  }
  if (held_back) {
    return "waiting for its dependency: " + (waiting.empty() ? w.text : waiting) + " (" + w.text +
           ")";
  }
  return "";
}

void Controller::UpdateGates(Micros now) {
  if (!gates_.dirty || gates_.watched.empty()) {
    return;
  }
  gates_.dirty = false;
  std::vector<JobNumber> gone;
  // Elements of throttled arrays that hold resources or may take them now.
  std::map<uint64_t, int> active;
  bool singletons = false;
  for (JobNumber id : gates_.watched) {
    const LiveJob* job = jobs_.Find(id);
    if (job == nullptr || Terminal(jobs_.StateOf(*job))) {
      gone.push_back(id);
      continue;
    }
    if (auto d = gates_.dependencies.find(id); d != gates_.dependencies.end()) {
      singletons = singletons || d->second.singleton;
    }
    const uint64_t a = ArrayIdOf(*job);
    if (a != 0 && (Holding(jobs_.StateOf(*job)) ||
                   (jobs_.StateOf(*job) == JobState::kPending && !core_.lifecycle()->Gated(jobs_.Rec(*job).id)))) {
      ++active[a];
    }
  }
  // Singletons: per tenant, user and name, the unfinished jobs (the oldest pending one
  // and whether one holds resources).
  using NameKey = std::tuple<std::string, std::string, std::string>;
  std::map<NameKey, std::pair<JobNumber, JobNumber>> names;  // oldest unfinished, one holding
  if (singletons) {
    for (const auto& [id, job] : jobs_.all()) {
      if (!job.durable || Terminal(jobs_.StateOf(job)) || job.row.name.empty()) {
        continue;
      }
      auto& entry = names[{job.row.tenant, job.submission.spec.user, job.row.name}];
      if (!entry.first.valid()) {
        entry.first = id;  // ids ascend
      }
      if (Holding(jobs_.StateOf(job))) {
        entry.second = id;
      }
    }
  }
  std::map<std::string, std::string> dependency_reasons;  // by dependency text, this pass
  for (JobNumber id : gates_.watched) {
    LiveJob* job = jobs_.Find(id);
    if (job == nullptr || jobs_.StateOf(*job) != JobState::kPending) {
      continue;
    }
    std::string reason;
    if (IsHeldReason(job->row.reason)) {
      reason = job->row.reason;
    }
    auto d = gates_.dependencies.find(id);
    if (reason.empty() && d != gates_.dependencies.end()) {
      const JobGates::Waits& w = d->second;
      // Jobs with one dependency text (an array's elements) wait for the same jobs:
      // judged once a pass.
      auto cached = dependency_reasons.find(w.text);
      if (cached == dependency_reasons.end()) {
        cached = dependency_reasons.emplace(w.text, DependencyReason(w)).first;
      }
      reason = cached->second;
      if (reason.empty() && w.singleton && !names.empty()) {
        auto n = names.find({job->row.tenant, job->submission.spec.user, job->row.name});
        if (n != names.end() && n->second.second.valid()) {
          reason = "singleton: job " + ToString(n->second.second) +
                   " of the same user and name is running";
        } else if (n != names.end() && n->second.first.valid() && n->second.first < id) {
          reason = "singleton: job " + ToString(n->second.first) +
                   " of the same user and name, submitted earlier, has not ended";
        }
      }
    }
    JobRecord& rec = jobs_.Rec(*job);
    const uint64_t a = ArrayIdOf(*job);
    if (reason.empty() && a != 0 && core_.lifecycle()->Gated(rec.id)) {
      auto array = gates_.arrays.find(a);
      const int32_t throttle = array != gates_.arrays.end() && array->second ? array->second->throttle : 0;
      if (throttle > 0 && active[a] >= throttle) {
        reason = "array throttle: " + std::to_string(throttle) + " elements of array " +
                 std::to_string(a) + " run at once (%" + std::to_string(throttle) + ")";
      } else if (throttle > 0) {
        ++active[a];
      }
    }
    const std::string before = GateReason(*job);
    if (reason.empty()) {
      gates_.reasons.erase(id);
      core_.lifecycle()->Ungate(rec, now);
    } else {
      gates_.reasons[id] = reason;
      core_.lifecycle()->Gate(rec);
    }
    if (before != reason) {
      PublishView(*job);
    }
  }
  for (JobNumber id : gone) {
    gates_.watched.erase(id);
    gates_.reasons.erase(id);
    auto d = gates_.dependencies.find(id);
    if (d == gates_.dependencies.end()) {
      continue;
    }
    for (const JobGates::Item& item : d->second.items) {
      for (JobNumber t : item.jobs) {
        if (auto r = gates_.referenced.find(t); r != gates_.referenced.end() && --r->second <= 0) {
          gates_.referenced.erase(r);
          gates_.outcomes.erase(t);
        }
      }
    }
    gates_.dependencies.erase(d);
  }
}

StatusOr<JobNumber> Controller::ResolveJobId(const Principal& who, const std::string& text) {
  MutexLock lock(mu_);
  TESSERA_ASSIGN_OR_RETURN(std::vector<JobNumber> ids, NamedJobs(who, text));
  return ids.front();  // an array's id names its first element here
}

StatusOr<std::vector<JobNumber>> Controller::NamedJobs(const Principal& who,
                                                       const std::string& text) {
  StatusOr<JobRef> ref = ParseJobRef(text);
  if (!ref.ok()) {
    return NotFoundError("no job '" + text.substr(0, 80) + "'");
  }
  StatusOr<std::vector<JobNumber>> ids = DependencyJobs(*ref, /*may_load=*/true, /*remember=*/false);
  if (!ids.ok() || ids->empty()) {
    return NotFoundError("no job " + JobRefText(*ref));
  }
  std::optional<LiveJob> archived;
  const LiveJob* job = FindOrLoad(ids->front(), &archived);
  if (job == nullptr || !Visible(who, *job)) {
    return NotFoundError("no job " + JobRefText(*ref));
  }
  return ids;
}

StatusOr<nlohmann::json> Controller::CancelNamed(const Principal& who, const std::string& text) {
  std::vector<JobNumber> ids;
  {
    MutexLock lock(mu_);
    TESSERA_ASSIGN_OR_RETURN(ids, NamedJobs(who, text));
  }
  if (ids.size() == 1) {
    return Cancel(who, ids.front());
  }
  // A whole array: every element still to end.
  nlohmann::json done = nlohmann::json::array();
  for (JobNumber id : ids) {
    {
      MutexLock lock(mu_);
      const LiveJob* job = jobs_.Find(id);
      if (job == nullptr || Terminal(jobs_.StateOf(*job))) {
        continue;
      }
    }
    if (StatusOr<nlohmann::json> one = Cancel(who, id); one.ok()) {
      done.push_back(id.value());
    }
  }
  return nlohmann::json{{"jobs", std::move(done)}};
}

StatusOr<nlohmann::json> Controller::ActOnNamed(const Principal& who, const std::string& text,
                                                const NamedAction& action) {
  Pending out;
  nlohmann::json done = nlohmann::json::array();
  {
    MutexLock lock(mu_);
    TESSERA_ASSIGN_OR_RETURN(std::vector<JobNumber> ids, NamedJobs(who, text));
    const Micros now = clock_->NowMicros();
    for (JobNumber id : ids) {
      LiveJob* job = jobs_.Find(id);
      if (job != nullptr && !Visible(who, *job)) {
        continue;
      }
      if (Status may = job != nullptr ? MayChange(who, *job) : Status::Ok(); !may.ok()) {
        if (ids.size() == 1) {
          return may;
        }
        continue;  // an array's elements of other users are left as they are
      }
      // One job named: why not, as an error; an array's elements: those it applies to.
      if (std::string why = action.refuse(job); !why.empty()) {
        if (ids.size() == 1) {
          return FailedPreconditionError("job " + text + why);
        }
        continue;
      }
      action.act(*job, Actor(who), now, out);
      out.dirty.insert(id);
      done.push_back(id.value());
    }
    if (action.after) {
      action.after(now);
    }
    Seal(out);
  }
  TESSERA_RETURN_IF_ERROR(Publish(std::move(out)));
  return nlohmann::json{{"jobs", std::move(done)}};
}

StatusOr<nlohmann::json> Controller::Hold(const Principal& who, const std::string& text) {
  NamedAction hold;
  hold.refuse = [this](const LiveJob* job) REQUIRES(mu_) -> std::string {
    if (job != nullptr && jobs_.StateOf(*job) == JobState::kPending &&
        IsHeldReason(job->row.reason)) {
      return " is held already";
    }
    return job == nullptr || jobs_.StateOf(*job) != JobState::kPending
               ? " is not pending: only a pending job can be held"
               : "";
  };
  hold.act = [this](LiveJob& job, const std::string& by, Micros, Pending&) REQUIRES(mu_) {
    job.row.reason = HeldReason() + " (held by " + by + ")";
    WatchGates(job);
  };
  return ActOnNamed(who, text, hold);
}

StatusOr<nlohmann::json> Controller::Release(const Principal& who, const std::string& text) {
  NamedAction release;
  release.refuse = [this](const LiveJob* job) REQUIRES(mu_) -> std::string {
    const bool held = job != nullptr && jobs_.StateOf(*job) == JobState::kPending &&
                      IsHeldReason(job->row.reason);
    return held ? "" : " is not held";
  };
  release.act = [this](LiveJob& job, const std::string& by, Micros, Pending&) REQUIRES(mu_) {
    job.row.reason = "released by " + by;
    gates_.dirty = true;
  };
  // The next pass lets them go unless something else keeps them back.
  release.after = [this](Micros now) REQUIRES(mu_) { UpdateGates(now); };
  StatusOr<nlohmann::json> out = ActOnNamed(who, text, release);
  Wake();
  return out;
}

StatusOr<nlohmann::json> Controller::Requeue(const Principal& who, const std::string& text) {
  NamedAction requeue;
  requeue.refuse = [this](const LiveJob* job) REQUIRES(mu_) -> std::string {
    if (job != nullptr && jobs_.StateOf(*job) == JobState::kRunning) {
      return "";
    }
    const std::string state =
        job != nullptr ? std::string(JobStateName(jobs_.StateOf(*job))) : std::string("archived");
    return " is " + state + ": only a running job can be requeued";
  };
  requeue.act = [this](LiveJob& job, const std::string& by, Micros now, Pending& out) REQUIRES(mu_) {
    // Not a restart its policy counts: the user asked for it.
    StopJob(job,
            StopRequest{AttemptEnd::kRequeue, RequeueCause::kRequested, options_.stop_grace,
                        "requeued by " + by},
            now, out);
  };
  return ActOnNamed(who, text, requeue);
}

void Controller::AddSlurmEnv(const LiveJob& job, int task,
                             const std::vector<std::string>& node_order, int local_rank,
                             TaskLaunch& l) const {
  const std::string& mine = job.tasks[static_cast<size_t>(task)].node;
  const auto node_id = std::find(node_order.begin(), node_order.end(), mine) - node_order.begin();
  std::string nodelist;
  for (const std::string& n : node_order) {
    nodelist += (nodelist.empty() ? "" : ",") + n;
  }
  // GPUs this job holds on this node (every task of it there), as Slurm counts them.
  int gpus_here = 0;
  const JobRecord& rec = jobs_.Rec(job);
  for (size_t t = 0; t < job.tasks.size() && t < rec.allocations.size(); ++t) {
    if (job.tasks[t].node == mine) {
      gpus_here += static_cast<int>(rec.allocations[t].gpus.size());
    }
  }
  const size_t tasks = job.tasks.size();
  std::map<std::string, std::string>& e = l.env;
  e["SLURM_JOB_ID"] = std::to_string(job.row.id);
  e["SLURM_JOBID"] = e["SLURM_JOB_ID"];
  e["SLURM_JOB_NAME"] = job.row.name;
  e["SLURM_JOB_PARTITION"] = job.row.queue;
  e["SLURM_JOB_ACCOUNT"] = job.row.tenant;
  e["SLURM_NTASKS"] = std::to_string(tasks);
  e["SLURM_NPROCS"] = e["SLURM_NTASKS"];
  e["SLURM_PROCID"] = std::to_string(task);
  e["SLURM_LOCALID"] = std::to_string(local_rank);
  e["SLURM_NODEID"] = std::to_string(node_id);
  e["SLURM_JOB_NODELIST"] = nodelist;
  e["SLURM_NODELIST"] = nodelist;
  e["SLURM_NNODES"] = std::to_string(node_order.size());
  e["SLURM_JOB_NUM_NODES"] = e["SLURM_NNODES"];
  e["SLURMD_NODENAME"] = mine;
  e["SLURM_GPUS_ON_NODE"] = std::to_string(gpus_here);
  e["SLURM_CPUS_PER_TASK"] =
      std::to_string(std::max<int64_t>(1, (l.cpu_milli + 999) / 1000));
  if (!job.submission.submit_dir.empty()) {
    e["SLURM_SUBMIT_DIR"] = job.submission.submit_dir;
  }
  e["SLURM_CLUSTER_NAME"] = "tessera";
  if (const uint64_t a = ArrayIdOf(job); a != 0) {
    std::shared_ptr<const JobGates::Array> array = ParsedArray(job.submission.array);
    e["SLURM_ARRAY_JOB_ID"] = std::to_string(a);
    e["SLURM_ARRAY_TASK_ID"] = std::to_string(job.submission.array_index);
    if (array != nullptr && !array->indices.empty()) {
      e["SLURM_ARRAY_TASK_COUNT"] = std::to_string(array->indices.size());
      e["SLURM_ARRAY_TASK_MIN"] = std::to_string(array->indices.front());
      e["SLURM_ARRAY_TASK_MAX"] = std::to_string(array->indices.back());
    }
  }
}

}  // namespace tessera
