// RunJobsThroughController: a run of jobs (a scenario's) through the live controller in
// process, the second driver of the scenario suite. The controller runs as it does in
// the server (its store, its lifecycle, its rows, its launch and stop messages), on a
// manual clock and an in-memory store, with one fake agent per node that speaks the
// agent protocol (Register, Heartbeat): it runs each task for exactly its job's
// remaining work, obeys a stop at the end of the grace the controller sent, and reports
// a checkpoint on exit when the job checkpoints on its signal (or under lossless
// preemption). Cycles run where the simulator runs them: after every instant with an
// event, and every `tick` while jobs wait.
//
// The signature and result are RunJobSimulation's, recorded by the same JobRunRecorder,
// so the two drivers' outcomes compare field by field (times are the run's, from 0).
// Thread safety: one run per call; runs share nothing.
#pragma once

#include <functional>
#include <vector>

#include "api/agent_protocol.h"
#include "base/status.h"
#include "model/gpu_catalog.h"
#include "model/node.h"
#include "model/queue_tree.h"
#include "sim/job_sim.h"

namespace tessera {

class Controller;
class Store;

// `inspect`, when given, is called with the controller and its store once the run has
// ended, before it closes (what-if tests read its recorded history); its error is the run's.
StatusOr<JobSimResult> RunJobsThroughController(
    const std::vector<NodeSpec>& nodes, const QueueTreeSpec& queues,
    const std::vector<SimJob>& jobs, const JobSimOptions& options, const GpuCatalog& catalog,
    const std::function<Status(Controller&, Store&)>& inspect = nullptr);

// What a fake agent of `node` registers with: its spec, a made-up UUID per GPU
// ("GPU-<node>-<index>") and no MIG instances (the replays' agents and this runner's).
RegisterRequest FakeAgentRegistration(const NodeSpec& node);

}  // namespace tessera
