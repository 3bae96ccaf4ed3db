// Validation runs: the controller's facade over the ValidationRuns module
// (modules/validation_runs.h), which owns the checks, slots and runs. Each call takes
// the core lock, acts through a Step and publishes what it wrote. The pass is two locked
// steps with the ended checks' output read between them: task output has a lock of its
// own, never taken under the core lock.
#include <iostream>

#include "server/controller.h"

namespace tessera {

StatusOr<nlohmann::json> Controller::AddValidation(const nlohmann::json& body) {
  TESSERA_ASSIGN_OR_RETURN(ValidationCheck check, ValidationCheckFromJson(body));
  Pending out;
  nlohmann::json added;
  {
    MutexLock lock(mu_);
    TESSERA_ASSIGN_OR_RETURN(
        added, validation_runs_.Add(*LockedStep(clock_->NowMicros(), &out), std::move(check)));
  }
  TESSERA_RETURN_IF_ERROR(Publish(std::move(out)));
  return added;
}

StatusOr<nlohmann::json> Controller::RemoveValidation(const std::string& name) {
  Pending out;
  nlohmann::json removed;
  {
    MutexLock lock(mu_);
    TESSERA_ASSIGN_OR_RETURN(removed,
                             validation_runs_.Remove(*LockedStep(clock_->NowMicros(), &out), name));
    Seal(out);  // the check jobs it stopped
  }
  TESSERA_RETURN_IF_ERROR(Publish(std::move(out)));
  Wake();
  return removed;
}

nlohmann::json Controller::Validations() {
  MutexLock lock(mu_);
  return validation_runs_.List(*LockedStep(clock_->NowMicros(), nullptr));
}

StatusOr<nlohmann::json> Controller::RunValidation(const std::string& name,
                                                   const std::string& node) {
  Pending out;
  nlohmann::json queued;
  {
    MutexLock lock(mu_);
    TESSERA_ASSIGN_OR_RETURN(
        queued, validation_runs_.Run(*LockedStep(clock_->NowMicros(), &out), name, node));
  }
  TESSERA_RETURN_IF_ERROR(Publish(std::move(out)));
  Wake();
  return queued;
}

StatusOr<nlohmann::json> Controller::ValidationResults(const std::string& name,
                                                       const std::string& node, size_t limit) {
  MutexLock lock(mu_);
  return validation_runs_.Results(name, node, limit);
}

void Controller::ValidationStep() {
  if (!validation_step_mu_.TryLock()) {
    return;  // another thread's pass is under way
  }
  ValidationPass();
  validation_step_mu_.Unlock();
}

void Controller::ValidationPass() {
  std::optional<std::vector<ValidationRuns::Ended>> ended;
  Pending out;
  {
    MutexLock lock(mu_);
    ended = validation_runs_.Tend(*LockedStep(clock_->NowMicros(), &out));
    if (!ended) {
      return;  // no pass due
    }
    Seal(out);
  }
  if (Status s = Publish(std::move(out)); !s.ok() || ended->empty()) {
    if (!s.ok()) {
      std::cerr << "tessera server: validation: " << s.message() << "\n";
    }
    return;
  }
  for (ValidationRuns::Ended& e : *ended) {  // without mu_ (see the top of this file)
    StatusOr<LogChunk> chunk = logs_.Read(JobNumber(e.job), 0, 0, ValidationRuns::kOutputBytes);
    if (chunk.ok()) {
      e.output = std::move(chunk.value().data);
    }
  }
  Pending judged;
  {
    MutexLock lock(mu_);
    validation_runs_.Judge(*LockedStep(clock_->NowMicros(), &judged), *ended);
    Seal(judged);
  }
  if (Status s = Publish(std::move(judged)); !s.ok()) {
    std::cerr << "tessera server: validation: " << s.message() << "\n";
  }
  Wake();  // the nodes let go take work again
}

}  // namespace tessera
