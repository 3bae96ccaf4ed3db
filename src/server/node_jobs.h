// Node jobs: what a module's job on one whole node (ModuleStep::StartNodeJob; the
// validation checks of modules/validation_runs.h) takes of the node and is submitted as.
//
// Pure: from the node's spec and ledger, the queue tree and the request, so that what a
// node job holds is tested on its own. The core session checks the allocation against
// its live ledger and adds the job (CoreSession::AddNodeJob, JobTable::AddStarted); the
// controller starts it (Controller::StartNodeJob).
// Thread safety: values.
#pragma once

#include "api/job_codec.h"
#include "base/clock.h"
#include "base/strong_id.h"
#include "model/node.h"
#include "model/queue_tree.h"
#include "server/modules/controller_module.h"
#include "state/node_ledger.h"

namespace tessera {

struct NodeJobStart {
  // The whole node: every CPU, all its memory and every GPU not in MIG mode, whole (a MIG
  // GPU's instances are left to what runs there: a check of the node does not hold them).
  Allocation allocation;
  // One task asking for exactly `allocation`, not preemptible, in the request's queue
  // (its tree's first queue when it names none or one the tree lacks), running
  // request.command with /bin/sh -c; held rather than refused when it does not fit.
  JobSubmission submission;
};

// `spec` and `ledger` are node `node`'s (its ledger says which GPUs are in MIG mode);
// `tree` has at least one queue. Submitted at `now`.
NodeJobStart PlanNodeJob(NodeId node, const NodeSpec& spec, const NodeLedger& ledger,
                         const NodeJob& request, const QueueTree& tree, Micros now);

}  // namespace tessera
