// Controller: the agents' side (registration, heartbeats and the reports they carry)
// (declared in controller.h).
#include "server/controller.h"
#include "server/inventory_bounds.h"
#include "server/task_reports.h"

namespace tessera {

// ---- agents ------------------------------------------------------------------

// Agents' reports change durable state: once a commit has failed, what this controller
// holds in memory is ahead of its store, so it takes none (the agent keeps them and
// tells them to a controller restarted on a working store).
StatusOr<RegisterResponse> Controller::Register(const RegisterRequest& request,
                                                const std::string& address) {
  if (!healthy()) {
    return UnavailableError("the state store failed; the controller takes no reports");
  }
  TESSERA_RETURN_IF_ERROR(ValidateInventory(request.inventory, *catalog_));
  const NodeSpec& spec = request.inventory.spec;
  Pending out;
  RegisterResponse response;
  {
    MutexLock lock(mu_);
    const Micros now = clock_->NowMicros();
    NodeInfo& node = nodes_.Register(request.inventory, request.agent_id, address, now);
    // Reconcile: what the agent runs against what the controller believes. What it
    // did not report never reached it (the launch was lost with a crash of either side).
    for (const TaskKey& key : jobs_.Unreported(spec.name, request.tasks)) {
      LiveJob& job = jobs_.all().at(JobNumber(key.job));
      if (jobs_.Rec(job).phase == JobPhase::kRunning) {
        nodes_.relaunch().emplace_back(spec.name, key);  // nothing ran: send it again
      } else {  // was being stopped anyway (a no-op once an earlier exit ended the attempt)
        ApplyAttempt(job, Attempts().TaskExited(jobs_.Rec(job), key.task, 0, 0, now), now, out);
      }
    }
    HandleReports(node, request.tasks, now, out);
    NodeJoined(node, now, out);  // after reconciling: what still runs there is held again
    for (const TaskKey& key : jobs_.StopsToResend(request.tasks)) {
      out.stops.emplace_back(spec.name, TaskStop{key, options_.stop_grace / 1000, 15});
    }
    out.batch.kv.push_back(NodeRegistry::InventoryRow(request.inventory, *catalog_));
    host_.OnNodeJoined(request.inventory, *HookStep(now, &out));  // the node history records it
    Seal(out);
    response.node = spec.name;
    response.heartbeat_interval_ms = HeartbeatInterval() / 1000;
    response.node_timeout_ms = options_.node_timeout / 1000;
  }
  TESSERA_RETURN_IF_ERROR(Publish(std::move(out)));
  Wake();
  return response;
}

void Controller::HandleReports(NodeInfo& node, const std::vector<TaskReport>& reports, Micros now,
                               Pending& out) {
  const std::string& name = node.inventory.spec.name;
  for (const TaskReport& r : reports) {
    LiveJob* job = jobs_.CurrentTaskOn(r.key, name);
    if (job == nullptr) {
      if (r.state == TaskState::kRunning) {
        out.stops.emplace_back(name, TaskStop{r.key, 0, 9});  // not ours (any more)
      }
      continue;
    }
    // The launch reached the agent: stop resending it.
    std::erase_if(node.launches, [&](const TaskLaunch& l) REQUIRES(mu_) { return l.key == r.key; });
    if (r.pty_port > 0) {
      ptys_.Reported(r.key, node.address, r.pty_port, now);
    }
    if (auto log = jobs_.ReceiveLog(*job, r.key.task, r.log_offset, r.log_chunk)) {
      out.logs.push_back(std::move(*log));
      host_.OnOutput(job->id(), clock_->NowMicros());
    }
    ApplyAttempt(*job, ApplyTaskReport(Attempts(), jobs_.Rec(*job), r, name, now), now, out);
    if (host_.OnTaskReport(r)) {
      PublishView(*job);  // e.g. a starting task's note (modules/task_start_notes.h)
    }
  }
}

StatusOr<HeartbeatResponse> Controller::Heartbeat(const HeartbeatRequest& request) {
  if (!healthy()) {
    return UnavailableError("the state store failed; the controller takes no reports");
  }
  Pending out;
  HeartbeatResponse response;
  {
    MutexLock lock(mu_);
    const Micros now = clock_->NowMicros();
    NodeInfo* found = nodes_.Heard(request.node, request.agent_id, now);
    if (found == nullptr) {
      response.reregister = true;
      return response;
    }
    NodeInfo& node = *found;
    HandleReports(node, request.tasks, now, out);
    // An exit frees what its job held: decide what takes it now, so that the report and
    // the starts it allows share one commit (the scheduling loop would make a second)
    // and the launches are pushed the moment it returns. Both are durable together or
    // not at all, and the agent keeps the report until it has the answer.
    if (AnyTaskEnded(request.tasks) && options_.cycle_on_exit && !core_.rebuild_pending()) {
      RunCoreCycle(now, out);
      ++counters_.report_cycles;
    }
    if (!request.gpus.empty()) {
      HandleTelemetry(node, request.agent_id, request.gpus, now, out);
    }
    // Stops stay until the task is gone; launches until the agent reports the task.
    jobs_.PruneCommands(node.launches, node.stops);
    response.launch = node.launches;
    response.stop = node.stops;
    response.heartbeat_interval_ms = HeartbeatInterval() / 1000;
    Seal(out);
  }
  // Only a change of durable state (an exit, a drain) can let the loop decide anything
  // new; a heartbeat that only says "alive" must not run a cycle over every node.
  const bool changed = !out.batch.empty();
  // The agent forgets what it reported once it has this answer: make it durable first.
  TESSERA_RETURN_IF_ERROR(Publish(std::move(out)));
  if (changed) {
    Wake();
  }
  return response;
}

}  // namespace tessera
