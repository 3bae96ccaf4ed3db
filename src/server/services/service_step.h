// ServiceStep: the locked step a service's transaction runs in (Controller::Transact and
// Controller::Read). A service (services/*.h) holds no part of the core: it acts on it
// only through this step, with the core lock held for it by the controller, and the
// controller seals, makes durable and hands out what the step decided.
//
// It is a ModuleStep (modules/controller_module.h: jobs as JobFacts, stops, a pending
// job cancelled, ...) with what users' actions need besides: the jobs a user's name
// stands for, a job's reason set, the gates told of a hold, the loop woken, and a job's
// JSON as the API shows it; and what the admin's actions on nodes need (a node down, a
// node forgotten). Modules are not handed one: hooks get a ModuleStep.
// Thread safety: a step is used on the thread that holds the core lock, for the call only.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/job_relations.h"
#include "base/status.h"
#include "server/job_number.h"
#include "server/modules/controller_module.h"

namespace tessera {

class ServiceStep : public ModuleStep {
 public:
  // The jobs `ref` names: one job, or every element of an array by the array's id (the
  // gates module knows arrays; nothing is remembered of the name). A job not in memory
  // is looked for in the store, letting go of the core lock as FindOrLoad does. An
  // error or nothing: no such job.
  virtual StatusOr<std::vector<JobNumber>> JobsNamed(const JobRef& ref) = 0;
  // The job's row reason from now on: the row is stored and the view republished with
  // the step. No effect on a job not in memory; on a read-only step a programming error
  // (the process aborts with a message, as Put).
  virtual void SetReason(JobNumber job, std::string reason) = 0;
  // A user's hold was just set on pending job `job` (its reason): the gates watch it and
  // gate it at once (JobGatesModule::Watch).
  virtual void WatchGates(JobNumber job) = 0;
  // A hold was lifted: the gates' next pass looks at their jobs again.
  virtual void RecheckGates() = 0;
  // The gates' pass now, within this step (gates and ungates the watched jobs).
  virtual void UpdateGates() = 0;
  // The scheduling loop is woken once the transaction ends, whatever its outcome.
  virtual void WakeLoop() = 0;
  // The job's JSON as GET /v1/jobs/{id} shows it (its spec too); null for a job not in
  // memory. Read it after the step is sealed (Transact's `sealed`) to see the stored row.
  virtual nlohmann::json Describe(JobNumber job) const = 0;

  // ---- the admin's actions on nodes (services/node_actions.h) ----
  // The jobs running or stopping with a task still running on `node`, in id order.
  virtual std::vector<JobNumber> JobsOnNode(const std::string& node) const = 0;
  // `node` is down from now on with `reason`: its tasks still running are lost with it
  // (requeued or failed by their restart policies), as when its heartbeats stop. No
  // effect on an unknown node or on a step that commits nothing.
  virtual void NodeDown(const std::string& node, const std::string& reason) = 0;
  // The core forgets `node` (put down first: NodeDown): the modules are told
  // (OnNodeRemoved), its removal marker (read at Open and cleared at its next first
  // registration) and its cleared drains are durable with the step, and it is no longer
  // known: a NodeInfo of it read before does not survive, and its jobs' views are sealed
  // without it. Not from within a visit. No effect on an unknown node or on a step that
  // commits nothing.
  virtual void ForgetNode(const std::string& node) = 0;
  // A token row made durable with the step (as Put's key-value rows; the same rules).
  virtual void PutToken(TokenRow row) = 0;
  // The node's JSON as GET /v1/nodes shows it to the admin; null for an unknown node.
  virtual nlohmann::json DescribeNode(const std::string& node) const = 0;
};

}  // namespace tessera
