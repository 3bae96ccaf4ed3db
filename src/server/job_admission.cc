// What a submission passes before it is made durable (job_admission.h).
#include "server/job_admission.h"

#include <nlohmann/json.hpp>

#include "api/queue_limits.h"
#include "server/job_state.h"
#include "server/modules/job_gates.h"

namespace tessera {

StatusOr<std::string> ResolveQueue(const QueueTree& tree, const Principal& who,
                                   std::string& queue) {
  const std::string& tenant = who.tenant;
  if (queue.empty()) {
    for (QueueId q : tree.queues()) {
      if (who.role == Role::kAdmin || tree.tenant(q) == tenant) {
        queue = tree.spec(q).name;
        break;
      }
    }
    if (queue.empty()) {
      return FailedPreconditionError("tenant '" + tenant + "' has no queue");
    }
  }
  StatusOr<QueueId> q = tree.FindQueue(queue);
  if (!q.ok()) {
    return InvalidArgumentError("queue: no queue named '" + queue + "'");
  }
  if (who.role != Role::kAdmin && tree.tenant(q.value()) != tenant) {
    return PermissionDeniedError("queue '" + queue + "' belongs to another tenant");
  }
  return tree.tenant(q.value());
}

Status ResolvePriorityClass(const QueueTree& tree, JobSubmission& job) {
  if (job.priority_class.empty()) {
    return Status::Ok();
  }
  std::string list;
  for (const PriorityClass& c : tree.priority_classes()) {
    if (c.name == job.priority_class) {
      job.spec.priority = c.value;
      return Status::Ok();
    }
    list += (list.empty() ? "" : ", ") + c.name;
  }
  return InvalidArgumentError("priority_class: no priority class '" + job.priority_class + "'" +
                              (list.empty() ? " (the queue configuration has none)"
                                            : "; there are: " + list));
}

Status ReadsBack(const std::string& text, const GpuCatalog& catalog) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    return InternalError("the job as it would be stored is not JSON");
  }
  StatusOr<JobSubmission> back = JobSubmissionFromJson(j, catalog);
  if (!back.ok()) {
    return InvalidArgumentError(back.status().message() + " (as it would be stored)");
  }
  return Status::Ok();
}

StatusOr<std::vector<std::string>> SpecTexts(std::vector<JobSubmission>& jobs, Micros now,
                                             const GpuCatalog& catalog) {
  std::vector<std::string> specs(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].spec.submit_time = now;
    specs[i] = JobSubmissionToJson(jobs[i], catalog).dump();
    // An array's elements differ only in their index: its first answers for all.
    const bool element = i > 0 && !jobs[i].array.empty() && jobs[i].array == jobs[i - 1].array;
    if (Status back = element ? Status::Ok() : ReadsBack(specs[i], catalog); !back.ok()) {
      return AtJob(i, back);
    }
  }
  return specs;
}

Status AtJob(size_t i, const Status& s) {
  const std::string& m = s.message();
  return Status(s.code(), "jobs[" + std::to_string(i) + "]" +
                              (m.rfind("queue: ", 0) == 0 ? "." : ": ") + m);
}

std::string BatchJobKey(const std::string& key, size_t i) {
  // A byte that no HTTP header carries keeps it apart from every single submission's key.
  return key + '\x1f' + std::to_string(i);
}

Status BatchKeyReused(const std::string& key) {
  return AlreadyExistsError("Idempotency-Key '" + key +
                            "' was already used for a batch of other jobs; use a new key for a "
                            "new batch");
}

JobRow NewJobRow(JobNumber id, const std::string& tenant, const JobSubmission& job,
                 std::string spec_text, const std::string& key, Micros now) {
  JobRow row;
  row.id = id.value();
  row.tenant = tenant;
  row.queue = job.spec.queue;
  row.name = job.spec.name;
  row.idempotency_key = key;
  row.spec_json = std::move(spec_text);
  row.state = std::string(JobStateName(JobState::kPending));
  row.submit_us = now;
  row.reason = job.hold ? HeldReason() : "waiting for the next scheduling cycle";
  return row;
}

Status SubmitCommitError(const Status& s, const std::string& what, bool* store_failed) {
  // A batch the store cannot take (too large for one etcd transaction) was refused
  // whole, before anything was written: the store has not failed.
  if (s.code() == StatusCode::kInvalidArgument) {
    return InvalidArgumentError("could not make " + what + " durable: " + s.message());
  }
  // The store refused the key and wrote nothing of the batch (each batch is all or
  // nothing): a job this controller does not hold in memory has it, one whose row it
  // could not read at its start (quarantined) or one archived past the key's
  // retention.
  if (s.code() == StatusCode::kAlreadyExists) {
    return AlreadyExistsError("Idempotency-Key already used: " + s.message() +
                              "; use a new key for a new job");
  }
  *store_failed = true;
  return UnavailableError("could not make " + what + " durable: " + s.message());
}

Status MayChange(const Principal& who, JobNumber job, const std::string& owner) {
  if (who.role == Role::kAdmin || who.user.empty() || owner == who.user) {
    return Status::Ok();
  }
  return PermissionDeniedError("job " + ToString(job) + " is " +
                               (owner.empty() ? std::string("the tenant's")
                                              : "user '" + owner + "''s") +
                               ": only its user or the tenant's own token may change it");
}

std::string Actor(const Principal& who) {
  if (!who.user.empty()) {
    return "user " + who.user;
  }
  return (who.role == Role::kAdmin ? "admin " : "tenant token ") +
         (who.name.empty() ? std::string("(unnamed)") : who.name);
}

int64_t PendingBounds::Of(const std::string& queue, const std::string& queues_yaml) {
  if (yaml_ != queues_yaml) {
    // Checked when the configuration was accepted (queue_config.cc); unreadable: defaults.
    StatusOr<std::map<std::string, int64_t>> bounds = QueueMaxPending(queues_yaml);
    by_queue_ = bounds.ok() ? std::move(bounds).value() : std::map<std::string, int64_t>{};
    yaml_ = queues_yaml;
  }
  auto it = by_queue_.find(queue);
  return it != by_queue_.end() ? it->second : kDefaultMaxPending;
}

Status PendingBounds::Check(const std::map<std::string, size_t>& adding,
                            const std::string& queues_yaml,
                            const std::function<size_t(const std::string&)>& pending_in) {
  for (const auto& [queue, n] : adding) {
    const auto bound = static_cast<size_t>(Of(queue, queues_yaml));
    const size_t now = pending_in(queue);
    if (now + n > bound) {
      return ResourceExhaustedError(
          "queue '" + queue + "' has " + std::to_string(now) + " pending jobs and holds at most " +
          std::to_string(bound) + " (maxPending in the queue configuration); this submission makes " +
          std::to_string(n) + ": wait for some to start, or ask the admin to raise the bound");
    }
  }
  return Status::Ok();
}

}  // namespace tessera
