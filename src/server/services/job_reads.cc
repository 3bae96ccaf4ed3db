// JobReads: the published views first; the core's read transaction only for what they
// do not hold (an archived job, a terminal's endpoint).
#include "server/services/job_reads.h"

#include <optional>
#include <utility>

#include "server/job_state.h"
#include "server/pty_sessions.h"
#include "server/services/service_step.h"

namespace tessera {

StatusOr<nlohmann::json> JobReads::GetJob(const Principal& who, JobNumber id) const {
  TESSERA_ASSIGN_OR_RETURN(std::string text, GetJobText(who, id));
  nlohmann::json out = nlohmann::json::parse(text, nullptr, false);
  if (out.is_discarded()) {
    return InternalError("job " + ToString(id) + ": its view is not JSON");
  }
  return out;
}

StatusOr<std::string> JobReads::GetJobText(const Principal& who, JobNumber id) const {
  if (std::shared_ptr<const JobView> view = views_->Get(id)) {
    if (!PublishedJobs::Visible(who, view->tenant)) {
      return NotFoundError("no job " + ToString(id));
    }
    return views_->Text(*view);
  }
  // Not published: archived out of memory (read from the store), or no such job.
  nlohmann::json found;
  TESSERA_RETURN_IF_ERROR(controller_->Read([&](ServiceStep& step) -> Status {
    found = step.DescribeFound(
        id, [&who](const JobFacts& job) { return PublishedJobs::Visible(who, job.tenant); });
    return Status::Ok();
  }));
  if (found.is_null()) {
    return NotFoundError("no job " + ToString(id));
  }
  return found.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

JobReads::JobPage JobReads::ListJobIds(const Principal& who, const JobFilter& filter,
                                       JobNumber after, size_t limit) const {
  PublishedJobs::Page published = views_->List(who, filter, after, limit);
  return JobPage{std::move(published.jobs), published.more};
}

std::vector<JobNumber> JobReads::JobPage::ids() const {
  std::vector<JobNumber> out;
  out.reserve(jobs.size());
  for (const auto& view : jobs) {
    out.push_back(view->id);
  }
  return out;
}

StatusOr<LogChunk> JobReads::ReadLog(const Principal& who, JobNumber id, int task, int64_t offset,
                                     int64_t max_bytes) const {
  std::string state;
  int replicas = 0;
  bool visible = false;
  if (std::shared_ptr<const JobView> view = views_->Get(id)) {
    visible = PublishedJobs::Visible(who, view->tenant);
    replicas = view->tasks;
    state = view->state;
  } else {
    // Returns before the log is read: the logs' lock is never taken with the core lock held.
    TESSERA_RETURN_IF_ERROR(controller_->Read([&](ServiceStep& step) -> Status {
      step.FindOrLoad(id, [&](const JobFacts& job) {  // may let go of the core lock
        visible = PublishedJobs::Visible(who, job.tenant);
        replicas = static_cast<int>(job.submission.spec.tasks.size());
        state = std::string(JobStateName(job.state));
      });
      return Status::Ok();
    }));
  }
  if (!visible) {
    return NotFoundError("no job " + ToString(id));
  }
  if (task < 0 || task >= replicas) {
    return InvalidArgumentError("task must be in 0.." + std::to_string(replicas - 1));
  }
  TESSERA_ASSIGN_OR_RETURN(LogChunk chunk, logs_->Read(id, task, offset, max_bytes));
  chunk.job_state = std::move(state);
  return chunk;
}

StatusOr<std::string> JobReads::ReadTaskOutput(JobNumber job, int64_t max_bytes) const {
  TESSERA_ASSIGN_OR_RETURN(LogChunk chunk, logs_->Read(job, 0, 0, max_bytes));
  return std::move(chunk.data);
}

StatusOr<nlohmann::json> JobReads::Attach(const Principal& who, JobNumber id, int task) const {
  nlohmann::json out;
  Status read = controller_->Read([&](ServiceStep& step) -> Status {
    Status seen = NotFoundError("no job " + ToString(id));
    step.VisitJob(id, [&](const JobFacts& job) {  // in memory only
      if (!PublishedJobs::Visible(who, job.tenant)) {
        return;
      }
      const int replicas = static_cast<int>(job.submission.spec.tasks.size());
      if (task < 0 || task >= replicas) {
        seen = InvalidArgumentError("task must be in 0.." + std::to_string(replicas - 1));
        return;
      }
      if (!PtySessions::Wanted(job.submission.env)) {
        seen = FailedPreconditionError("job " + ToString(id) +
                                       " has no terminal: start it with `tessera run --pty`");
        return;
      }
      seen = Status::Ok();
      // Not ready: pending, starting (its agent has not reported the port yet) or ended.
      out = {{"job", id.value()},
             {"task", task},
             {"state", std::string(JobStateName(job.state))},
             {"ready", false}};
      if (job.state != JobState::kRunning) {
        return;
      }
      if (std::optional<ServiceStep::Terminal> at = step.TerminalOf(id, task, job.attempt)) {
        out["ready"] = true;
        out["attempt"] = job.attempt;
        out["address"] = at->address;
        out["port"] = at->port;
        out["secret"] = at->secret;
      }
    });
    return seen;
  });
  if (!read.ok()) {
    return read;
  }
  return out;
}

}  // namespace tessera
