// JobGatesModule (job_gates_module.h): holds, dependencies, throttles and singletons,
// through the locked step only.
#include "server/modules/job_gates_module.h"

#include <algorithm>
#include <tuple>
#include <utility>

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

// Per tenant, user and name, the unfinished jobs: the oldest one and one that holds
// resources (invalid: none).
struct JobGatesModule::Names {
  using Key = std::tuple<std::string, std::string, std::string>;
  std::map<Key, std::pair<JobNumber, JobNumber>> by_key;
};

std::shared_ptr<const JobGates::Array> JobGatesModule::ParsedArray(const std::string& text) const {
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

uint64_t JobGatesModule::ArrayIdOf(JobNumber job, const JobSubmission& submission) const {
  if (submission.array.empty() || submission.array_index < 0) {
    return 0;
  }
  std::shared_ptr<const JobGates::Array> a = ParsedArray(submission.array);
  if (a == nullptr) {
    return 0;
  }
  auto it = std::lower_bound(a->indices.begin(), a->indices.end(), submission.array_index);
  return job.value() - static_cast<uint64_t>(it - a->indices.begin());
}

std::vector<JobSubmission> JobGatesModule::ExpandArray(const JobSubmission& job,
                                                       const JobGates::Array& a) {
  std::vector<JobSubmission> out(a.indices.size(), job);
  for (size_t k = 0; k < out.size(); ++k) {
    out[k].array_index = a.indices[k];
  }
  return out;
}

void JobGatesModule::DescribeJob(const JobFacts& job, nlohmann::json& out) const {
  if (const uint64_t array = ArrayIdOf(job.id, job.submission); array != 0) {
    out["array_job"] = array;
    out["array_index"] = job.submission.array_index;
    out["array"] = job.submission.array;
  }
  if (!job.submission.dependency.empty()) {
    out["dependency"] = job.submission.dependency;
  }
}

void JobGatesModule::OnJobEvent(const JobRecord& job, const LifecycleEvent& event,
                                const QueueTree& tree) {
  (void)job;
  (void)event;
  (void)tree;
  gates_.dirty = true;  // a start or an end may let a gated job go
}

StatusOr<std::vector<JobNumber>> JobGatesModule::DependencyJobs(const JobRef& ref,
                                                                ModuleStep& step, bool may_load,
                                                                bool remember) {
  const JobNumber first(ref.id);
  std::shared_ptr<const JobGates::Array> array;
  bool is_array = false;
  if (auto it = gates_.arrays.find(ref.id); it != gates_.arrays.end()) {
    array = it->second;
    is_array = true;
  } else {
    auto visit = [&](const JobFacts& job) {
      if (ArrayIdOf(job.id, job.submission) == ref.id) {
        array = ParsedArray(job.submission.array);
        is_array = array != nullptr;
      }
    };
    // FindOrLoad lets go of the core lock while it reads: nothing is held across it.
    if (!step.VisitJob(first, visit) && !(may_load && step.FindOrLoad(first, visit))) {
      return NotFoundError("no job " + ToString(first));
    }
    if (is_array && remember) {
      gates_.arrays[ref.id] = array;
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

Status JobGatesModule::CheckDependency(const std::string& dependency, ModuleStep& step,
                                       const std::function<bool(const JobFacts&)>& visible) {
  if (dependency.empty()) {
    return Status::Ok();
  }
  StatusOr<DependencySpec> spec = ParseDependencySpec(dependency);
  if (!spec.ok()) {
    return InvalidArgumentError("dependency: " + spec.status().message());
  }
  for (const Dependency& d : spec->items) {
    for (const JobRef& ref : d.jobs) {
      StatusOr<std::vector<JobNumber>> ids = DependencyJobs(ref, step, /*may_load=*/true);
      if (!ids.ok()) {
        return InvalidArgumentError("dependency: " + ids.status().message());
      }
      bool seen = false;  // FindOrLoad lets go of the core lock while it reads
      step.FindOrLoad(ids->front(), [&](const JobFacts& job) { seen = visible(job); });
      if (!seen) {
        return InvalidArgumentError("dependency: no job " + JobRefText(ref));
      }
    }
  }
  return Status::Ok();
}

void JobGatesModule::Watch(const JobFacts& job, ModuleStep& step) {
  const JobNumber id = job.id;
  const std::string& row_reason = step.Reason(id);
  if (gates_.watched.count(id) != 0) {  // a hold on a job watched already
    gates_.dirty = true;
    if (job.state == JobState::kPending) {
      step.Gate(id);
      gates_.reasons[id] = row_reason;
    }
    return;
  }
  bool watch = IsHeldReason(row_reason);
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
          StatusOr<std::vector<JobNumber>> ids = DependencyJobs(ref, step, /*may_load=*/false);
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
  if (const uint64_t a = ArrayIdOf(id, job.submission); a != 0) {
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
  if (job.state == JobState::kPending && job.record != nullptr) {  // not archived
    step.Gate(id);
    gates_.reasons[id] = IsHeldReason(row_reason) ? row_reason
                                                  : "waiting for the next scheduling cycle";
  }
}

DependencyTarget JobGatesModule::TargetOf(JobNumber id, ModuleStep& step) {
  std::optional<DependencyTarget> live;
  step.VisitJob(id, [&live](const JobFacts& job) {
    live = DependencyTarget{job.attempt > 0 || Holding(job.state), Terminal(job.state),
                            job.state == JobState::kSucceeded};
  });
  if (live) {
    if (live->ended && gates_.referenced.count(id) != 0) {
      gates_.outcomes[id] = *live;  // kept for when it leaves memory
    }
    return *live;
  }
  if (auto it = gates_.outcomes.find(id); it != gates_.outcomes.end()) {
    return it->second;
  }
  // Archived before a pass saw it end (rare): its row, read once (a small read; the
  // pass holds the core lock). No such job: it never ran. A failed read decides nothing:
  // the job waits and the next pass reads again.
  DependencyTarget t{false, true, false};
  StatusOr<std::optional<JobRow>> row = step.LoadRow(id);
  if (!row.ok()) {
    gates_.dirty = true;
    return DependencyTarget{false, false, false};
  }
  if (*row) {
    const JobState s = ParseJobState((*row)->state).value_or(JobState::kFailed);
    t = DependencyTarget{(*row)->attempts > 0, Terminal(s), s == JobState::kSucceeded};
  }
  gates_.outcomes[id] = t;
  return t;
}

std::string JobGatesModule::Reason(JobNumber job) const {
  auto it = gates_.reasons.find(job);
  return it == gates_.reasons.end() ? "" : it->second;
}

std::string JobGatesModule::DependencyReason(const JobGates::Waits& w, ModuleStep& step) {
  std::string waiting;
  std::string never;
  size_t satisfied = 0;
  for (const JobGates::Item& item : w.items) {
    std::vector<DependencyTarget> targets;
    for (JobNumber t : item.jobs) {
      targets.push_back(TargetOf(t, step));
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

std::string JobGatesModule::SingletonReason(const JobFacts& job, const Names& names) {
  auto n = names.by_key.find({job.tenant, job.submission.spec.user, job.submission.spec.name});
  if (n != names.by_key.end() && n->second.second.valid()) {
    return "singleton: job " + ToString(n->second.second) +
           " of the same user and name is running";
  }
  if (n != names.by_key.end() && n->second.first.valid() && n->second.first < job.id) {
    return "singleton: job " + ToString(n->second.first) +
           " of the same user and name, submitted earlier, has not ended";
  }
  return "";
}

void JobGatesModule::Forget(JobNumber id) {
  gates_.watched.erase(id);
  gates_.reasons.erase(id);
  auto d = gates_.dependencies.find(id);
  if (d == gates_.dependencies.end()) {
    return;
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

void JobGatesModule::Update(ModuleStep& step) {
  if (!gates_.dirty || gates_.watched.empty()) {
    return;
  }
  gates_.dirty = false;
  std::vector<JobNumber> gone;
  // Elements of throttled arrays that hold resources or may take them now.
  std::map<uint64_t, int> active;
  bool singletons = false;
  for (JobNumber id : gates_.watched) {
    const bool found = step.VisitJob(id, [&](const JobFacts& job) {
      if (Terminal(job.state)) {
        gone.push_back(id);
        return;
      }
      if (auto d = gates_.dependencies.find(id); d != gates_.dependencies.end()) {
        singletons = singletons || d->second.singleton;
      }
      const uint64_t a = ArrayIdOf(id, job.submission);
      if (a != 0 && (Holding(job.state) ||
                     (job.state == JobState::kPending && !step.Gated(id)))) {
        ++active[a];
      }
    });
    if (!found) {
      gone.push_back(id);
    }
  }
  Names names;
  if (singletons) {
    step.ForEachJob([&names](const JobFacts& job) {
      if (Terminal(job.state) || job.submission.spec.name.empty()) {
        return;
      }
      auto& entry = names.by_key[{job.tenant, job.submission.spec.user, job.submission.spec.name}];
      if (!entry.first.valid()) {
        entry.first = job.id;  // ids ascend
      }
      if (Holding(job.state)) {
        entry.second = job.id;
      }
    });
  }
  std::map<std::string, std::string> dependency_reasons;  // by dependency text, this pass
  for (JobNumber id : gates_.watched) {
    step.VisitJob(id, [&](const JobFacts& job) {
      if (job.state != JobState::kPending) {
        return;
      }
      std::string reason;
      if (const std::string& row = step.Reason(id); IsHeldReason(row)) {
        reason = row;
      }
      auto d = gates_.dependencies.find(id);
      if (reason.empty() && d != gates_.dependencies.end()) {
        const JobGates::Waits& w = d->second;
        // Jobs with one dependency text (an array's elements) wait for the same jobs:
        // judged once a pass.
        auto cached = dependency_reasons.find(w.text);
        if (cached == dependency_reasons.end()) {
          cached = dependency_reasons.emplace(w.text, DependencyReason(w, step)).first;
        }
        reason = cached->second;
        if (reason.empty() && w.singleton && !names.by_key.empty()) {
          reason = SingletonReason(job, names);
        }
      }
      const uint64_t a = ArrayIdOf(id, job.submission);
      if (reason.empty() && a != 0 && step.Gated(id)) {
        auto array = gates_.arrays.find(a);
        const int32_t throttle =
            array != gates_.arrays.end() && array->second ? array->second->throttle : 0;
        if (throttle > 0 && active[a] >= throttle) {
          reason = "array throttle: " + std::to_string(throttle) + " elements of array " +
                   std::to_string(a) + " run at once (%" + std::to_string(throttle) + ")";
        } else if (throttle > 0) {
          ++active[a];
        }
      }
      const std::string before = Reason(id);
      if (reason.empty()) {
        gates_.reasons.erase(id);
        step.Ungate(id);
      } else {
        gates_.reasons[id] = reason;
        step.Gate(id);
      }
      if (before != reason) {
        step.Republish(id);
      }
    });
  }
  for (JobNumber id : gone) {
    Forget(id);
  }
}

}  // namespace tessera
