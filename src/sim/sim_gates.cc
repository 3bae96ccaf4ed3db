#include "sim/sim_gates.h"

#include <algorithm>
#include <string>
#include <utility>

namespace tessera {

bool DependencySatisfied(const DependencySpec& spec,
                         const std::function<DependencyTarget(uint64_t job)>& target) {
  size_t satisfied = 0;
  for (const Dependency& d : spec.items) {
    std::vector<DependencyTarget> targets;
    targets.reserve(d.jobs.size());
    for (const JobRef& ref : d.jobs) {
      targets.push_back(target(ref.id));
    }
    if (EvaluateDependency(d.kind, targets) == DependencyState::kSatisfied) {
      ++satisfied;
    }
  }
  return spec.any ? (spec.items.empty() || satisfied > 0) : satisfied == spec.items.size();
}

Status ValidateSimGates(const std::vector<SimJob>& jobs) {
  for (size_t i = 0; i < jobs.size(); ++i) {
    const SimJob& job = jobs[i];
    auto bad = [&job](const std::string& what) {
      return InvalidArgumentError("job '" + job.spec.name + "': " + what);
    };
    if (job.release && !job.hold) {
      return bad("released, but not submitted held");
    }
    if (job.release && *job.release < job.spec.submit_time) {
      return bad("released before its submission");
    }
    for (const Dependency& d : job.dependency.items) {
      if (d.kind == DependencyKind::kSingleton) {
        return bad("dependency: singleton is not simulated");
      }
      if (d.jobs.empty()) {
        return bad("dependency: " + std::string(DependencyKindName(d.kind)) + " names no job");
      }
      for (const JobRef& ref : d.jobs) {
        if (ref.index >= 0) {
          return bad("dependency: array elements are not simulated");
        }
        if (ref.id >= jobs.size()) {
          return bad("dependency: no job " + std::to_string(ref.id) + " among the " +
                     std::to_string(jobs.size()) + " jobs");
        }
        if (ref.id == i) {
          return bad("dependency: a job cannot wait for itself");
        }
      }
    }
  }
  return Status::Ok();
}

SimGates::SimGates(const std::vector<SimJob>& jobs)
    : watch_(jobs.size(), 0), held_(jobs.size(), 0), ends_(jobs.size()) {
  dependencies_.reserve(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    dependencies_.push_back(jobs[i].dependency);
    held_[i] = jobs[i].hold ? 1 : 0;
    watch_[i] = jobs[i].hold || !jobs[i].dependency.items.empty() ? 1 : 0;
  }
}

void SimGates::Arrived(JobRecord& job, JobLifecycle& lifecycle) {
  const uint64_t id = job.id.value();
  if (!Watches(id)) {
    return;
  }
  watched_.push_back(id);
  lifecycle.Gate(job);
}

DependencyTarget SimGates::TargetOf(const std::vector<JobRecord>& jobs, uint64_t id) const {
  const JobRecord& job = jobs[id];
  const bool running = job.phase == JobPhase::kRunning || job.phase == JobPhase::kStopping;
  return DependencyTarget{job.starts > 0 || running, ends_[id].has_value(),
                          ends_[id] == JobEnd::kSucceeded};
}

bool SimGates::Passes(const std::vector<JobRecord>& jobs, uint64_t id) const {
  return held_[id] == 0 && DependencySatisfied(dependencies_[id], [&](uint64_t target) {
           return TargetOf(jobs, target);
         });
}

void SimGates::Update(std::vector<JobRecord>& jobs, JobLifecycle& lifecycle, Micros now) {
  for (uint64_t id : watched_) {
    JobRecord& job = jobs[id];
    if (job.phase != JobPhase::kPending || ends_[id]) {
      continue;
    }
    if (Passes(jobs, id)) {
      lifecycle.Ungate(job, now);
    } else {
      lifecycle.Gate(job);
    }
  }
  // The finished leave (a gated job never finishes: it never starts).
  watched_.erase(std::remove_if(watched_.begin(), watched_.end(),
                                [this](uint64_t id) { return ends_[id].has_value(); }),
                 watched_.end());
}

bool SimGates::AnyDue(const std::vector<JobRecord>& jobs, const JobLifecycle& lifecycle) const {
  return std::any_of(watched_.begin(), watched_.end(), [&](uint64_t id) {
    return jobs[id].phase == JobPhase::kPending && lifecycle.Gated(jobs[id].id) && Passes(jobs, id);
  });
}

}  // namespace tessera
