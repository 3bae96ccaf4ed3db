// Arrays, dependencies, holds and singletons: the controller's facade of the
// JobGatesModule (modules/job_gates_module.h), which owns the gates and decides them.
// Here: a submission's dependency checked against what its submitter may see, jobs
// named as users name them ("12", "12_3"), and hold, release, requeue and cancel by
// such a name. A hold is durable as the job row's reason (kHeldReasonPrefix).
#include <algorithm>

#include "api/job_relations.h"
#include "server/controller.h"
#include "server/job_admission.h"

namespace tessera {

Status Controller::PrepareSubmission(const Principal& who, JobSubmission& job) {
  if (job.array_index >= 0) {
    return InvalidArgumentError("array_index: is set by the server on each element of an array");
  }
  TESSERA_RETURN_IF_ERROR(ResolvePriorityClass(core_.tree(), job));
  if (job.dependency.empty()) {
    return Status::Ok();
  }
  StatusOr<DependencySpec> spec = ParseDependencySpec(job.dependency);
  if (!spec.ok()) {
    return InvalidArgumentError("dependency: " + spec.status().message());
  }
  std::unique_ptr<ModuleStep> step = LockedStep(clock_->NowMicros(), nullptr);
  for (const Dependency& d : spec->items) {
    for (const JobRef& ref : d.jobs) {
      StatusOr<std::vector<JobNumber>> ids = gates_.DependencyJobs(ref, *step, /*may_load=*/true);
      if (!ids.ok()) {
        return InvalidArgumentError("dependency: " + ids.status().message());
      }
      // Named jobs must be the submitter's to see.
      std::optional<LiveJob> archived;
      const LiveJob* target = FindOrLoad(ids->front(), &archived);
      if (target == nullptr || !PublishedJobs::Visible(who, target->row.tenant)) {
        return InvalidArgumentError("dependency: no job " + JobRefText(ref));
      }
    }
  }
  return Status::Ok();
}

std::string Controller::GateReason(const LiveJob& job) const { return gates_.Reason(job.id()); }

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
  StatusOr<std::vector<JobNumber>> ids = gates_.DependencyJobs(
      *ref, *LockedStep(clock_->NowMicros(), nullptr), /*may_load=*/true, /*remember=*/false);
  if (!ids.ok() || ids->empty()) {
    return NotFoundError("no job " + JobRefText(*ref));
  }
  std::optional<LiveJob> archived;
  const LiveJob* job = FindOrLoad(ids->front(), &archived);
  if (job == nullptr || !PublishedJobs::Visible(who, job->row.tenant)) {
    return NotFoundError("no job " + JobRefText(*ref));
  }
  return ids;
}

StatusOr<Controller::ActedOn> Controller::CancelNamed(const Principal& who,
                                                      const std::string& text) {
  std::vector<JobNumber> ids;
  {
    MutexLock lock(mu_);
    TESSERA_ASSIGN_OR_RETURN(ids, NamedJobs(who, text));
  }
  if (ids.size() == 1) {
    TESSERA_RETURN_IF_ERROR(Cancel(who, ids.front()).status());
    return ActedOn{ids, true};
  }
  // A whole array: every element still to end.
  ActedOn done;
  for (JobNumber id : ids) {
    {
      MutexLock lock(mu_);
      const LiveJob* job = jobs_.Find(id);
      if (job == nullptr || Terminal(jobs_.StateOf(*job))) {
        continue;
      }
    }
    if (StatusOr<nlohmann::json> one = Cancel(who, id); one.ok()) {
      done.jobs.push_back(id);
    }
  }
  return done;
}

StatusOr<Controller::ActedOn> Controller::ActOnNamed(const Principal& who,
                                                     const std::string& text,
                                                     const NamedAction& action) {
  Pending out;
  ActedOn done;
  {
    MutexLock lock(mu_);
    TESSERA_ASSIGN_OR_RETURN(std::vector<JobNumber> ids, NamedJobs(who, text));
    done.named_one = ids.size() == 1;
    const Micros now = clock_->NowMicros();
    for (JobNumber id : ids) {
      LiveJob* job = jobs_.Find(id);
      if (job != nullptr && !PublishedJobs::Visible(who, job->row.tenant)) {
        continue;
      }
      if (Status may = job != nullptr ? MayChange(who, job->id(), job->submission.spec.user) : Status::Ok(); !may.ok()) {
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
      done.jobs.push_back(id);
    }
    if (action.after) {
      action.after(now, out);
    }
    Seal(out);
  }
  TESSERA_RETURN_IF_ERROR(Publish(std::move(out)));
  return done;
}

StatusOr<Controller::ActedOn> Controller::Hold(const Principal& who, const std::string& text) {
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
  hold.act = [this](LiveJob& job, const std::string& by, Micros now, Pending& out) REQUIRES(mu_) {
    job.row.reason = HeldReason() + " (held by " + by + ")";
    gates_.Watch(FactsOf(job), *LockedStep(now, &out));
  };
  return ActOnNamed(who, text, hold);
}

StatusOr<Controller::ActedOn> Controller::Release(const Principal& who, const std::string& text) {
  NamedAction release;
  release.refuse = [this](const LiveJob* job) REQUIRES(mu_) -> std::string {
    const bool held = job != nullptr && jobs_.StateOf(*job) == JobState::kPending &&
                      IsHeldReason(job->row.reason);
    return held ? "" : " is not held";
  };
  release.act = [this](LiveJob& job, const std::string& by, Micros, Pending&) REQUIRES(mu_) {
    job.row.reason = "released by " + by;
    gates_.Recheck();
  };
  // The next pass lets them go unless something else keeps them back.
  release.after = [this](Micros now, Pending& out) REQUIRES(mu_) {
    gates_.Update(*LockedStep(now, &out));
  };
  StatusOr<ActedOn> out = ActOnNamed(who, text, release);
  Wake();
  return out;
}

StatusOr<Controller::ActedOn> Controller::Requeue(const Principal& who, const std::string& text) {
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

}  // namespace tessera
