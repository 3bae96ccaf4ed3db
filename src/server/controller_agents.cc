// Controller: the agents' side (registration, heartbeats and the reports they carry)
// (declared in controller.h).
#include "server/controller.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>

#include "api/queue_config.h"
#include "base/time_format.h"
#include "plugins/registry.h"
#include "sched/runtime_predictor.h"
#include "server/inventory_bounds.h"

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
  TESSERA_RETURN_IF_ERROR(CheckInventoryBounds(request.inventory));
  const NodeSpec& spec = request.inventory.spec;
  TESSERA_RETURN_IF_ERROR(ValidateNodeSpec(spec, *catalog_));
  if (spec.name.empty()) {
    return InvalidArgumentError("inventory: node name is empty");
  }
  Pending out;
  RegisterResponse response;
  {
    MutexLock lock(mu_);
    const Micros now = clock_->NowMicros();
    NodeInfo& node = nodes_.FindOrAdd(spec.name);
    if (node.up && node.agent_id != request.agent_id) {
      std::cerr << "tessera server: node " << spec.name << " re-registered by a new agent\n";
    }
    NodeRegistry::Registered(node, request.inventory, request.agent_id, address, now);
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
    out.batch.kv.emplace_back(kNodeKeyPrefix + spec.name,
                              ToJson(request.inventory, *catalog_).dump());
    host_.OnNodeJoined(request.inventory, *HookStep(now, &out));  // the node history records it
    Seal(out);
    response.node = spec.name;
    response.heartbeat_interval_ms = HeartbeatIntervalLocked() / 1000;
    response.node_timeout_ms = options_.node_timeout / 1000;
  }
  TESSERA_RETURN_IF_ERROR(Publish(std::move(out)));
  Wake();
  return response;
}

Micros Controller::HeartbeatIntervalLocked() const {
  const Micros floor = options_.heartbeat_interval;
  if (options_.max_heartbeats_per_second <= 0) {
    return floor;
  }
  const auto nodes = static_cast<Micros>(nodes_.all().size());
  const Micros spread = nodes * 1'000'000 / options_.max_heartbeats_per_second;
  // Several heartbeats within the timeout, whatever the fleet (a lost one is no loss).
  const Micros ceiling = std::max(floor, options_.node_timeout / 4);
  return std::clamp(spread, floor, ceiling);
}

void Controller::HandleReports(NodeInfo& node, const std::vector<TaskReport>& reports, Micros now,
                               Pending& out) {
  const std::string& name = node.inventory.spec.name;
  for (const TaskReport& r : reports) {
    LiveJob* job = jobs_.Find(JobNumber(r.key.job));
    const bool current = job != nullptr && job->row.attempts == r.key.attempt && r.key.task >= 0 &&
                         static_cast<size_t>(r.key.task) < job->tasks.size() &&
                         job->tasks[static_cast<size_t>(r.key.task)].node == name &&
                         (jobs_.Rec(*job).phase == JobPhase::kRunning ||
                          jobs_.Rec(*job).phase == JobPhase::kStopping);
    if (!current) {
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
    AppendLog(*job, r.key.task, r.log_offset, r.log_chunk, out);
    JobRecord& rec = jobs_.Rec(*job);
    if (r.checkpointed) {
      Attempts().Checkpointed(rec, now);
    }
    const size_t task = static_cast<size_t>(r.key.task);
    if (r.state == TaskState::kFailedToStart) {
      // No program ran: no exit code of its own (an older agent reports 127), the reason
      // says what failed (a missing program, a MIG instance the driver would not make).
      ApplyAttempt(*job,
                   Attempts().TaskFailedToStart(
                       rec, task, r.exit_code,
                       "task " + std::to_string(r.key.task) + " failed to start: " + r.message, now),
                   now, out);
    } else if (r.state == TaskState::kLost) {
      // Gone without a known outcome (its agent killed it, or lost its supervisor): as
      // for a lost node, the job runs again from its checkpoint.
      ApplyAttempt(*job,
                   Attempts().TasksLost(rec, {task}, RequeueCause::kTaskLost,
                                        "requeued: task " + std::to_string(r.key.task) + " on " +
                                            name + " was lost (" + r.message + ")",
                                        now),
                   now, out);
    } else if (r.state == TaskState::kExited) {
      ApplyAttempt(*job, Attempts().TaskExited(rec, task, r.exit_code, r.signal, now), now, out);
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
    auto it = nodes_.all().find(request.node);
    if (it == nodes_.all().end() || !it->second.up || it->second.agent_id != request.agent_id) {
      response.reregister = true;
      return response;
    }
    NodeInfo& node = it->second;
    const Micros now = clock_->NowMicros();
    node.last_seen = now;
    HandleReports(node, request.tasks, now, out);
    // An exit frees what its job held: decide what takes it now, so that the report and
    // the starts it allows share one commit (the scheduling loop would make a second)
    // and the launches are pushed the moment it returns. Both are durable together or
    // not at all, and the agent keeps the report until it has the answer.
    const bool ended =
        std::any_of(request.tasks.begin(), request.tasks.end(),
                    [](const TaskReport& r) { return r.state != TaskState::kRunning; });
    if (ended && options_.cycle_on_exit && !core_.rebuild_pending()) {
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
    response.heartbeat_interval_ms = HeartbeatIntervalLocked() / 1000;
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
