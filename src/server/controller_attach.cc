// Controller: GET /v1/jobs/{id}/attach, where a task's terminal listens and its secret
// (server/pty_sessions.h, agent/launch/pty_relay.h).
#include "server/controller.h"

namespace tessera {

StatusOr<nlohmann::json> Controller::Attach(const Principal& who, JobNumber id, int task) {
  MutexLock lock(mu_);
  const LiveJob* job = jobs_.Find(id);
  if (job == nullptr || !PublishedJobs::Visible(who, job->row.tenant)) {
    return NotFoundError("no job " + ToString(id));
  }
  const int replicas = static_cast<int>(job->submission.spec.tasks.size());
  if (task < 0 || task >= replicas) {
    return InvalidArgumentError("task must be in 0.." + std::to_string(replicas - 1));
  }
  if (!PtySessions::Wanted(job->submission.env)) {
    return FailedPreconditionError("job " + ToString(id) +
                                   " has no terminal: start it with `tessera run --pty`");
  }
  // Not ready: pending, starting (its agent has not reported the port yet) or ended.
  nlohmann::json out = {
      {"job", id.value()}, {"task", task}, {"state", std::string(JobStateName(jobs_.StateOf(*job)))}, {"ready", false}};
  if (jobs_.StateOf(*job) != JobState::kRunning) {
    return out;
  }
  const int attempt = job->row.attempts;
  if (std::optional<PtySessions::Endpoint> at = ptys_.Find(id.value(), task, attempt)) {
    out["ready"] = true;
    out["attempt"] = attempt;
    out["address"] = at->address;
    out["port"] = at->port;
    out["secret"] = ptys_.Secret(TaskKey{id.value(), task, attempt});
  }
  return out;
}

}  // namespace tessera
