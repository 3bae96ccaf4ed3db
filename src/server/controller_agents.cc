// Controller: the agents' side (registration, heartbeats and the reports they carry)
// (declared in controller.h).
#include "server/controller.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <set>

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
    node.inventory = request.inventory;
    node.agent_id = request.agent_id;
    node.address = address;
    node.up = true;
    node.reason.clear();
    node.last_seen = now;
    node.launches.clear();
    node.stops.clear();
    // Reconcile: what the agent runs against what the controller believes.
    std::set<std::tuple<uint64_t, int, int>> reported;
    for (const TaskReport& r : request.tasks) {
      reported.insert({r.key.job, r.key.task, r.key.attempt});
    }
    for (auto& [id, job] : jobs_.all()) {
      const JobPhase phase = jobs_.Rec(job).phase;
      if (phase != JobPhase::kRunning && phase != JobPhase::kStopping) {
        continue;
      }
      for (size_t t = 0; t < job.tasks.size(); ++t) {
        if (job.tasks[t].node != spec.name || jobs_.TaskExited(job, t) ||
            reported.count({id.value(), static_cast<int>(t), job.row.attempts}) > 0) {
          continue;
        }
        // An agent keeps every task it received until the task's end is durable here,
        // across its own restarts: one it does not report never reached it (the
        // launch was lost with a crash of either side). Send it again; nothing ran.
        if (jobs_.Rec(job).phase == JobPhase::kRunning) {
          nodes_.relaunch().emplace_back(
              spec.name, TaskKey{id.value(), static_cast<int>(t), job.row.attempts});
        } else {
          // Was being stopped anyway.
          ApplyAttempt(job, Attempts().TaskExited(jobs_.Rec(job), t, 0, 0, now), now, out);
        }
      }
    }
    HandleReports(node, request.tasks, now, out);
    NodeJoined(node, now, out);  // after reconciling: what still runs there is held again
    // Stops decided before this controller restarted, or sent to the agent's previous
    // connection: send them again for what still runs here.
    for (const TaskReport& r : request.tasks) {
      LiveJob* job = jobs_.Find(JobNumber(r.key.job));
      if (r.state == TaskState::kRunning && job != nullptr &&
          jobs_.Rec(*job).phase == JobPhase::kStopping && job->row.attempts == r.key.attempt &&
          static_cast<size_t>(r.key.task) < job->tasks.size() &&
          !jobs_.TaskExited(*job, static_cast<size_t>(r.key.task))) {
        out.stops.emplace_back(spec.name, TaskStop{r.key, options_.stop_grace / 1000, 15});
      }
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
    std::erase_if(node.stops, [&](const TaskStop& s) REQUIRES(mu_) {
      LiveJob* job = jobs_.Find(JobNumber(s.key.job));
      return job == nullptr || job->row.attempts != s.key.attempt ||
             static_cast<size_t>(s.key.task) >= job->tasks.size() ||
             jobs_.TaskExited(*job, static_cast<size_t>(s.key.task));
    });
    // A launch whose attempt stopped before the agent took it is not sent again: the
    // stop that follows it ends that attempt on the agent (it never had it).
    std::erase_if(node.launches, [&](const TaskLaunch& l) REQUIRES(mu_) {
      LiveJob* job = jobs_.Find(JobNumber(l.key.job));
      return job == nullptr || job->row.attempts != l.key.attempt ||
             jobs_.Rec(*job).phase != JobPhase::kRunning;
    });
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
