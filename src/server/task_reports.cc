#include "server/task_reports.h"

#include <algorithm>

namespace tessera {

AttemptEffects ApplyTaskReport(AttemptMachine machine, JobRecord& rec, const TaskReport& report,
                               const std::string& node, Micros now) {
  if (report.checkpointed) {
    machine.Checkpointed(rec, now);
  }
  const size_t task = static_cast<size_t>(report.key.task);
  switch (report.state) {
    case TaskState::kFailedToStart:
      // No program ran: no exit code of its own (an older agent reports 127), the reason
      // says what failed (a missing program, a MIG instance the driver would not make).
      return machine.TaskFailedToStart(
          rec, task, report.exit_code,
          "task " + std::to_string(report.key.task) + " failed to start: " + report.message, now);
    case TaskState::kLost:
      // Gone without a known outcome (its agent killed it, or lost its supervisor): as
      // for a lost node, the job runs again from its checkpoint.
      return machine.TasksLost(rec, {task}, RequeueCause::kTaskLost,
                               "requeued: task " + std::to_string(report.key.task) + " on " + node +
                                   " was lost (" + report.message + ")",
                               now);
    case TaskState::kExited:
      return machine.TaskExited(rec, task, report.exit_code, report.signal, now);
    case TaskState::kRunning:
      break;
  }
  return AttemptEffects{};
}

bool AnyTaskEnded(const std::vector<TaskReport>& reports) {
  return std::any_of(reports.begin(), reports.end(),
                     [](const TaskReport& r) { return r.state != TaskState::kRunning; });
}

}  // namespace tessera
