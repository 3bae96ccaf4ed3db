// What an agent's report of one task means for its job's attempt: the report mapped onto
// the attempt machine (sched/attempt_machine.h), with the reason the job shows when the
// task ended its attempt. Whether the report is about a current task of the reporting
// node is the JobTable's (CurrentTaskOn); carrying out the effects is the controller's.
// Pure: no state of its own; the machine and the record are the caller's.
#pragma once

#include <string>
#include <vector>

#include "api/agent_protocol.h"
#include "base/clock.h"
#include "sched/attempt_machine.h"

namespace tessera {

// `report`, about a current task of `rec`'s attempt placed on `node`, at `now`: a
// reported checkpoint noted, then a task that failed to start (the job fails), was lost
// (requeued, as for a lost node) or exited handed to `machine`. No effects for a task
// that still runs.
AttemptEffects ApplyTaskReport(AttemptMachine machine, JobRecord& rec, const TaskReport& report,
                               const std::string& node, Micros now);

// Whether any of `reports` says a task no longer runs (it ended, or never started).
bool AnyTaskEnded(const std::vector<TaskReport>& reports);

}  // namespace tessera
