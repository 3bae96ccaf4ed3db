// JobActions: a user's actions on jobs that exist: cancel, hold, release and requeue, of
// a job by its id or by the name users give it ("12", "12_3": element 3 of array 12;
// "12" where 12 is an array's id names every element).
//
// Owns: nothing but the rules of the actions (who may act, which jobs an action applies
// to, the refusals' codes and messages, the reasons the jobs' rows record). It keeps no
// state: one may be built over a controller at any time, and many may share one.
// Uses: the controller's transactions only (Controller::Transact and Controller::Read,
// with the ServiceStep of services/service_step.h): it reads jobs as JobFacts and acts
// through the step (CancelPending, Stop, SetReason, the gates' Watch, Recheck and
// Update); the controller holds the core lock, seals the step and makes it durable.
// Invariants: a job is acted on only when its tenant is visible to the caller (else
// NotFound, as a job that does not exist) and MayChange lets the caller change it; one
// action is one transaction (the jobs it changes are durable together before it
// answers), except a cancel of a whole array, one transaction per element; a refusal
// changes nothing. The store is never waited on with the core lock held (Transact).
// Thread safety: as the controller's; every method may be called from any thread.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "server/controller.h"
#include "server/http/auth.h"
#include "server/job_number.h"
#include "server/job_state.h"
#include "server/services/service_step.h"

namespace tessera {

class JobActions {
 public:
  // `controller` must outlive the service.
  explicit JobActions(Controller& controller) : controller_(&controller) {}

  // Cancels job `id`: a pending job ends at once, a running one is stopped. Returns the
  // job's view after the cancel. NotFound for a job `who` may not see,
  // FailedPrecondition for one that has ended.
  StatusOr<nlohmann::json> Cancel(const Principal& who, JobNumber id);
  // A job named as users name it: "12" or "12_3"; an array's id stands for its first
  // element here. NotFound when there is no such job visible to `who`.
  StatusOr<JobNumber> ResolveJobId(const Principal& who, const std::string& text);

  // Cancel, hold, release and requeue by such a name; "12" where 12 is an array's id
  // acts on every element of the array. Returns the jobs acted on, and whether the name
  // named one job (the API then answers with its view). Hold: pending jobs only;
  // release: held ones; requeue: running ones (their attempt ends and they wait again,
  // not counted as a restart); cancel: an array's elements still to end. A name of one
  // job the action does not apply to is FailedPrecondition; an array's elements it does
  // not apply to, or of other users, are left as they are.
  struct ActedOn {
    std::vector<JobNumber> jobs;
    bool named_one = false;
  };
  StatusOr<ActedOn> CancelNamed(const Principal& who, const std::string& text);
  StatusOr<ActedOn> Hold(const Principal& who, const std::string& text);
  StatusOr<ActedOn> Release(const Principal& who, const std::string& text);
  StatusOr<ActedOn> Requeue(const Principal& who, const std::string& text);

 private:
  // What an action reads of a job in memory (copied out of its JobFacts).
  struct Seen {
    std::string tenant;
    std::string user;    // who submitted it (MayChange)
    std::string reason;  // its row's reason (a hold is kept there)
    JobState state = JobState::kPending;
  };
  // Hold, Release, Requeue: `refuse` says why a job is not one the action applies to
  // ("": it is; null: not in memory), `act` changes it within the step, `after` runs
  // once after them all (may be empty); `wake`: the loop is woken after the action.
  struct NamedAction {
    std::function<std::string(const Seen*)> refuse;
    // `by`: who acted (Actor), for the job's reason to record.
    std::function<void(JobNumber, const std::string& by, ServiceStep&)> act;
    std::function<void(ServiceStep&)> after;
    bool wake = false;
  };
  // The job ids a user's name stands for: one job, or every element of an array.
  static StatusOr<std::vector<JobNumber>> NamedJobs(const Principal& who, const std::string& text,
                                                    ServiceStep& step);
  // Job `id` as the action sees it; nullopt when it is not in memory.
  static std::optional<Seen> SeeJob(JobNumber id, const ServiceStep& step);
  StatusOr<ActedOn> ActOnNamed(const Principal& who, const std::string& text,
                               const NamedAction& action);

  Controller* controller_;
};

}  // namespace tessera
