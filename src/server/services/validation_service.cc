// ValidationService: the admin's API over the ValidationRuns module, each call one
// transaction of the controller's (Transact, Read), and the pass, two transactions with
// the ended checks' output read between them without the core lock.
#include "server/services/validation_service.h"

#include <iostream>
#include <optional>
#include <utility>
#include <vector>

#include "server/services/job_reads.h"

namespace tessera {

ValidationService::ValidationService(Controller& controller)
    : controller_(controller), core_mu_(controller.core_lock()) {}

StatusOr<std::unique_ptr<ValidationService>> ValidationService::Open(Controller& controller) {
  std::unique_ptr<ValidationService> service(new ValidationService(controller));
  ValidationService* s = service.get();
  // The module's hooks run with the core lock held (Attach loads it under it).
  TESSERA_RETURN_IF_ERROR(controller.Attach(s->module(), [s] { s->Step(); }));
  return service;
}

StatusOr<nlohmann::json> ValidationService::Add(const nlohmann::json& body) {
  TESSERA_ASSIGN_OR_RETURN(ValidationCheck check, ValidationCheckFromJson(body));
  nlohmann::json added;
  TESSERA_RETURN_IF_ERROR(controller_.Transact([&](ServiceStep& step) REQUIRES(core_mu_) {
    StatusOr<nlohmann::json> out = runs_.Add(step, std::move(check));
    if (out.ok()) {
      added = std::move(out).value();
    }
    return out.status();
  }));
  return added;
}

StatusOr<nlohmann::json> ValidationService::Remove(const std::string& name) {
  nlohmann::json removed;
  TESSERA_RETURN_IF_ERROR(controller_.Transact([&](ServiceStep& step) REQUIRES(core_mu_) {
    StatusOr<nlohmann::json> out = runs_.Remove(step, name);
    if (!out.ok()) {
      return out.status();
    }
    removed = std::move(out).value();
    step.WakeLoop();  // the nodes its check jobs held take work again
    return Status::Ok();
  }));
  return removed;
}

nlohmann::json ValidationService::List() {
  nlohmann::json list;
  (void)controller_.Read([&](ServiceStep& step) REQUIRES(core_mu_) {
    list = runs_.List(step);
    return Status::Ok();
  });
  return list;
}

StatusOr<nlohmann::json> ValidationService::Run(const std::string& name, const std::string& node) {
  nlohmann::json queued;
  TESSERA_RETURN_IF_ERROR(controller_.Transact([&](ServiceStep& step) REQUIRES(core_mu_) {
    StatusOr<nlohmann::json> out = runs_.Run(step, name, node);
    if (!out.ok()) {
      return out.status();
    }
    queued = std::move(out).value();
    step.WakeLoop();  // the pass runs after the loop's next cycle
    return Status::Ok();
  }));
  return queued;
}

StatusOr<nlohmann::json> ValidationService::Results(const std::string& name,
                                                    const std::string& node, size_t limit) {
  nlohmann::json results;
  TESSERA_RETURN_IF_ERROR(controller_.Read([&](ServiceStep&) REQUIRES(core_mu_) {
    StatusOr<nlohmann::json> out = runs_.Results(name, node, limit);
    if (out.ok()) {
      results = std::move(out).value();
    }
    return out.status();
  }));
  return results;
}

void ValidationService::Step() {
  if (!step_mu_.TryLock()) {
    return;  // another thread's pass is under way
  }
  Pass();
  step_mu_.Unlock();
}

void ValidationService::Pass() {
  std::optional<std::vector<ValidationRuns::Ended>> ended;
  Status tended = controller_.Transact([&](ServiceStep& step) REQUIRES(core_mu_) {
    ended = runs_.Tend(step);  // none: no pass due (nothing written)
    return Status::Ok();
  });
  if (!ended) {
    return;
  }
  if (!tended.ok() || ended->empty()) {
    if (!tended.ok()) {
      std::cerr << "tessera server: validation: " << tended.message() << "\n";
    }
    return;
  }
  for (ValidationRuns::Ended& e : *ended) {  // without the core lock (see the header)
    StatusOr<std::string> output =
        JobReads(controller_).ReadTaskOutput(JobNumber(e.job), ValidationRuns::kOutputBytes);
    if (output.ok()) {
      e.output = std::move(output).value();
    }
  }
  Status judged = controller_.Transact([&](ServiceStep& step) REQUIRES(core_mu_) {
    runs_.Judge(step, *ended);
    step.WakeLoop();  // the nodes let go take work again
    return Status::Ok();
  });
  if (!judged.ok()) {
    std::cerr << "tessera server: validation: " << judged.message() << "\n";
  }
}

}  // namespace tessera
