#include "server/modules/task_start_notes.h"

namespace tessera {

bool TaskStartNotes::Report(const TaskKey& key, const std::string& note) {
  const JobNumber job{key.job};
  auto it = by_job_.find(job);
  if (note.empty()) {
    return it != by_job_.end() && it->second.attempt == key.attempt && Ended(key);
  }
  if (it == by_job_.end() || it->second.attempt < key.attempt) {
    it = by_job_.insert_or_assign(job, JobNotes{key.attempt, {}}).first;  // a new attempt
  } else if (it->second.attempt > key.attempt) {
    return false;  // an earlier attempt's late report
  }
  std::string& slot = it->second.by_task[key.task];
  if (slot == note) {
    return false;
  }
  slot = note;
  return true;
}

bool TaskStartNotes::Ended(const TaskKey& key) {
  auto it = by_job_.find(JobNumber{key.job});
  if (it == by_job_.end() || it->second.attempt != key.attempt ||
      it->second.by_task.erase(key.task) == 0) {
    return false;
  }
  if (it->second.by_task.empty()) {
    by_job_.erase(it);
  }
  return true;
}

std::string TaskStartNotes::Reason(JobNumber job, int attempt) const {
  auto it = by_job_.find(job);
  if (it == by_job_.end() || it->second.attempt != attempt || it->second.by_task.empty()) {
    return "";
  }
  const auto& [task, note] = *it->second.by_task.begin();
  std::string out = "task " + std::to_string(task) + ": " + note;
  if (const size_t others = it->second.by_task.size() - 1; others > 0) {
    out +=
        " (and " + std::to_string(others) + " more task" + (others == 1 ? "" : "s") + " starting)";
  }
  return out;
}

}  // namespace tessera
