// TaskStartNotes: what a starting task's agent says it is doing (pulling its image: "pulling
// image R: 1.2 of 4.8 GB"), shown as its job's reason until the task has started.
//
// A core module (modules/core_modules.h). Hooks: OnTaskReport (a running task's report
// carries its note, "" once it started; an ended one's drops it), JobNote (the job's
// reason while it has one) and OnAttemptEnded (the job's notes go).
// Owns: the latest note of each task that reported one, by job, for the attempt that
// reported it; in memory only (a restarted controller hears the next report). A note
// goes when its task reports none (it started) or ends, when a later attempt of the job
// reports, and when the attempt ends.
// Thread safety: none; its hooks run under the controller's core lock.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "api/agent_protocol.h"
#include "server/job_number.h"
#include "server/modules/controller_module.h"

namespace tessera {

class TaskStartNotes final : public ControllerModule {
 public:
  bool OnTaskReport(const TaskReport& report) override {
    return report.state == TaskState::kRunning ? Report(report.key, report.message)
                                               : Ended(report.key);
  }
  std::string JobNote(JobNumber job, int attempt) const override { return Reason(job, attempt); }
  void OnAttemptEnded(const JobFacts& job, const EndedAttempt& ended, nlohmann::json& stored,
                      const ModuleStep& step) override {
    (void)ended;
    (void)stored;
    (void)step;
    Forget(job.id);
  }

  // A running task's report: its note ("" once it has started). Whether what the job
  // shows changed (its view is then published again).
  bool Report(const TaskKey& key, const std::string& note);
  // The task ended (its attempt's note goes with it). Whether a note was dropped.
  bool Ended(const TaskKey& key);
  // "task 1: pulling image ..." for the lowest task of `attempt` with a note, with how
  // many others start too; "" when none.
  std::string Reason(JobNumber job, int attempt) const;
  void Forget(JobNumber job) { by_job_.erase(job); }
  size_t jobs() const { return by_job_.size(); }

 private:
  struct JobNotes {
    int attempt = 0;
    std::map<int, std::string> by_task;
  };
  std::map<JobNumber, JobNotes> by_job_;
};

}  // namespace tessera
