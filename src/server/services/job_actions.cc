// JobActions: cancel, hold, release and requeue, each one transaction of the controller's
// (Controller::Transact), acting through its ServiceStep. A hold is durable as the job
// row's reason (kHeldReasonPrefix, modules/job_gates.h).
#include "server/services/job_actions.h"

#include <utility>

#include "api/job_relations.h"
#include "server/job_admission.h"
#include "server/job_views.h"
#include "server/modules/job_gates.h"

namespace tessera {

StatusOr<nlohmann::json> JobActions::Cancel(const Principal& who, JobNumber id) {
  nlohmann::json result;
  auto decide = [&](ServiceStep& step) -> Status {
    std::optional<Seen> found;
    step.FindOrLoad(id, [&found](const JobFacts& job) {  // may let go of the core lock
      found = Seen{job.tenant, job.submission.spec.user, "", job.state};
    });
    if (!found || !PublishedJobs::Visible(who, found->tenant)) {
      return NotFoundError("no job " + ToString(id));
    }
    TESSERA_RETURN_IF_ERROR(MayChange(who, id, found->user));
    if (Terminal(found->state)) {  // archived jobs are all terminal
      return FailedPreconditionError(
          "job " + ToString(id) + " has already " +
          (found->state == JobState::kCancelled ? "been cancelled"
                                                : std::string(JobStateName(found->state))));
    }
    if (found->state == JobState::kPending) {
      step.CancelPending(id, "cancelled before it started, by " + Actor(who));
    } else {
      step.Stop(id,
                StopRequest{AttemptEnd::kCancel, RequeueCause::kPreempted, step.stop_grace(),
                            "cancelled by " + Actor(who)},
                /*reason=*/"");
    }
    return Status::Ok();
  };
  TESSERA_RETURN_IF_ERROR(
      controller_->Transact(decide, [&](const ServiceStep& step) { result = step.Describe(id); }));
  return result;
}

StatusOr<JobNumber> JobActions::ResolveJobId(const Principal& who, const std::string& text) {
  std::vector<JobNumber> ids;
  TESSERA_RETURN_IF_ERROR(controller_->Read([&](ServiceStep& step) -> Status {
    TESSERA_ASSIGN_OR_RETURN(ids, NamedJobs(who, text, step));
    return Status::Ok();
  }));
  return ids.front();  // an array's id names its first element here
}

StatusOr<std::vector<JobNumber>> JobActions::NamedJobs(const Principal& who,
                                                       const std::string& text,
                                                       ServiceStep& step) {
  StatusOr<JobRef> ref = ParseJobRef(text);
  if (!ref.ok()) {
    return NotFoundError("no job '" + text.substr(0, 80) + "'");
  }
  StatusOr<std::vector<JobNumber>> ids =
      step.gates().DependencyJobs(*ref, step, /*may_load=*/true, /*remember=*/false);
  if (!ids.ok() || ids->empty()) {
    return NotFoundError("no job " + JobRefText(*ref));
  }
  bool visible = false;
  step.FindOrLoad(ids->front(), [&](const JobFacts& job) {  // may let go of the core lock
    visible = PublishedJobs::Visible(who, job.tenant);
  });
  if (!visible) {
    return NotFoundError("no job " + JobRefText(*ref));
  }
  return ids;
}

std::optional<JobActions::Seen> JobActions::SeeJob(JobNumber id, const ServiceStep& step) {
  std::optional<Seen> seen;
  step.VisitJob(id, [&](const JobFacts& job) {
    seen = Seen{job.tenant, job.submission.spec.user, step.Reason(id), job.state};
  });
  return seen;
}

StatusOr<JobActions::ActedOn> JobActions::CancelNamed(const Principal& who,
                                                      const std::string& text) {
  std::vector<JobNumber> ids;
  TESSERA_RETURN_IF_ERROR(controller_->Read([&](ServiceStep& step) -> Status {
    TESSERA_ASSIGN_OR_RETURN(ids, NamedJobs(who, text, step));
    return Status::Ok();
  }));
  if (ids.size() == 1) {
    TESSERA_RETURN_IF_ERROR(Cancel(who, ids.front()).status());
    return ActedOn{ids, true};
  }
  // A whole array: every element still to end.
  ActedOn done;
  for (JobNumber id : ids) {
    bool to_end = false;
    (void)controller_->Read([&](ServiceStep& step) -> Status {
      std::optional<Seen> job = SeeJob(id, step);
      to_end = job && !Terminal(job->state);
      return Status::Ok();
    });
    if (!to_end) {
      continue;
    }
    if (StatusOr<nlohmann::json> one = Cancel(who, id); one.ok()) {
      done.jobs.push_back(id);
    }
  }
  return done;
}

StatusOr<JobActions::ActedOn> JobActions::ActOnNamed(const Principal& who,
                                                     const std::string& text,
                                                     const NamedAction& action) {
  ActedOn done;
  auto decide = [&](ServiceStep& step) -> Status {
    if (action.wake) {
      step.WakeLoop();  // whatever the outcome
    }
    TESSERA_ASSIGN_OR_RETURN(std::vector<JobNumber> ids, NamedJobs(who, text, step));
    done.named_one = ids.size() == 1;
    for (JobNumber id : ids) {
      const std::optional<Seen> job = SeeJob(id, step);
      if (job && !PublishedJobs::Visible(who, job->tenant)) {
        continue;
      }
      if (Status may = job ? MayChange(who, id, job->user) : Status::Ok(); !may.ok()) {
        if (ids.size() == 1) {
          return may;
        }
        continue;  // an array's elements of other users are left as they are
      }
      // One job named: why not, as an error; an array's elements: those it applies to.
      if (std::string why = action.refuse(job ? &*job : nullptr); !why.empty()) {
        if (ids.size() == 1) {
          return FailedPreconditionError("job " + text + why);
        }
        continue;
      }
      action.act(id, Actor(who), step);
      done.jobs.push_back(id);
    }
    if (action.after) {
      action.after(step);
    }
    return Status::Ok();
  };
  TESSERA_RETURN_IF_ERROR(controller_->Transact(decide));
  return done;
}

StatusOr<JobActions::ActedOn> JobActions::Hold(const Principal& who, const std::string& text) {
  NamedAction hold;
  hold.refuse = [](const Seen* job) -> std::string {
    if (job != nullptr && job->state == JobState::kPending && IsHeldReason(job->reason)) {
      return " is held already";
    }
    return job == nullptr || job->state != JobState::kPending
               ? " is not pending: only a pending job can be held"
               : "";
  };
  hold.act = [](JobNumber job, const std::string& by, ServiceStep& step) {
    step.SetReason(job, HeldReason() + " (held by " + by + ")");
    // Watched by the gates, and gated at once.
    step.VisitJob(job, [&step](const JobFacts& facts) { step.gates().Watch(facts, step); });
  };
  return ActOnNamed(who, text, hold);
}

StatusOr<JobActions::ActedOn> JobActions::Release(const Principal& who, const std::string& text) {
  NamedAction release;
  release.refuse = [](const Seen* job) -> std::string {
    const bool held =
        job != nullptr && job->state == JobState::kPending && IsHeldReason(job->reason);
    return held ? "" : " is not held";
  };
  release.act = [](JobNumber job, const std::string& by, ServiceStep& step) {
    step.SetReason(job, "released by " + by);
    step.gates().Recheck();
  };
  // The next pass lets them go unless something else keeps them back.
  release.after = [](ServiceStep& step) { step.gates().Update(step); };
  release.wake = true;
  return ActOnNamed(who, text, release);
}

StatusOr<JobActions::ActedOn> JobActions::Requeue(const Principal& who, const std::string& text) {
  NamedAction requeue;
  requeue.refuse = [](const Seen* job) -> std::string {
    if (job != nullptr && job->state == JobState::kRunning) {
      return "";
    }
    const std::string state =
        job != nullptr ? std::string(JobStateName(job->state)) : std::string("archived");
    return " is " + state + ": only a running job can be requeued";
  };
  requeue.act = [](JobNumber job, const std::string& by, ServiceStep& step) {
    // Not a restart its policy counts: the user asked for it.
    step.Stop(job,
              StopRequest{AttemptEnd::kRequeue, RequeueCause::kRequested, step.stop_grace(),
                          "requeued by " + by},
              /*reason=*/"");
  };
  return ActOnNamed(who, text, requeue);
}

}  // namespace tessera
