// ValidationService: the admin's validation runs (GET, POST /v1/admin/validations, its
// {name}/run and results; server/http/server_validations.cc) and the pass that holds
// nodes, starts the checks on them and judges their output (Step, run by the
// controller's loop after each cycle; tests call it after RunCycle).
//
// Owns: the ValidationRuns module (modules/validation_runs.h: the checks, each (check,
// node) slot, the runs kept, their rows under "validations/") and the pass's one-at-a-
// time lock. The controller does not own the module: Open attaches it to the controller
// (Controller::Attach, an externally owned module), which loads its stored state then
// (its Load, as Open loads the core's own modules) and from then on calls its hooks as
// any module's (NodeHold: a node held for a check takes no new work; WriteMetrics), in
// the place it always had, after Accounting's. Open attaches the pass too: the loop runs
// Step after each cycle.
// Uses: the controller's transactions only (Controller::Transact and Controller::Read,
// with the ServiceStep of services/service_step.h), and JobReads::ReadTaskOutput
// (services/job_reads.h) for an ended check's output.
// Invariants: the module's state is guarded by the controller's core lock: it is read
// and changed only within a transaction of the controller's or a hook it calls (both
// with the lock held; the annotations say so through Controller::core_lock()). A pass is
// two transactions, Tend then Judge, with the ended checks' output read between them
// without the core lock (task output has a lock of its own, never taken with the core
// lock held); one pass at a time (a Step while another runs returns at once). The
// loop is woken after a removal, a run asked for and a pass that judged something.
// Lifetime: the service must outlive the controller it is attached to (the controller
// calls its module's hooks, and its loop the pass, until it stops); one service per
// controller.
// Thread safety: every method may be called from any thread. Lock order: the pass's
// lock before the core lock.
#pragma once

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/mutex.h"
#include "base/status.h"
#include "server/controller.h"
#include "server/modules/validation_runs.h"

namespace tessera {

class ValidationService {
 public:
  // Attaches a new service's module and pass to `controller`, once it is open and before
  // it starts (Controller::Attach): the module's stored state is loaded now.
  static StatusOr<std::unique_ptr<ValidationService>> Open(Controller& controller);
  ValidationService(const ValidationService&) = delete;
  ValidationService& operator=(const ValidationService&) = delete;

  // Add: InvalidArgument naming the field, AlreadyExists for a name in use. Remove: its
  // running check jobs are stopped. Run: every node the check selects (or `node`) is due
  // now. Results: newest first, at most `limit`; "" names all. NotFound for an unknown
  // check (or node, for Run).
  StatusOr<nlohmann::json> Add(const nlohmann::json& body);
  StatusOr<nlohmann::json> Remove(const std::string& name);
  nlohmann::json List();
  StatusOr<nlohmann::json> Run(const std::string& name, const std::string& node);
  StatusOr<nlohmann::json> Results(const std::string& name, const std::string& node,
                                   size_t limit);
  // The pass: holds due nodes, starts checks on held idle nodes, judges the ended ones
  // (at most once a second unless a run was asked for). Takes the core lock itself.
  void Step();

 private:
  explicit ValidationService(Controller& controller);
  void Pass() REQUIRES(step_mu_);  // Step's, one at a time
  // The module, to hand to the controller (Attach): nothing of its state is touched here,
  // and the controller calls its hooks only with the core lock held.
  ControllerModule& module() NO_THREAD_SAFETY_ANALYSIS { return runs_; }

  Controller& controller_;
  Mutex& core_mu_;  // the controller's core lock (Controller::core_lock())
  Mutex step_mu_ ACQUIRED_BEFORE(core_mu_);  // one pass at a time
  ValidationRuns runs_ GUARDED_BY(core_mu_);
};

}  // namespace tessera
