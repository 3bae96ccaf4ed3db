#include "sim/job_run_recorder.h"

#include <string>
#include <string_view>
#include <utility>

namespace tessera {
namespace {

std::string_view EndName(JobEnd end) {
  switch (end) {
    case JobEnd::kSucceeded:
      return "succeeded";
    case JobEnd::kFailed:
      return "failed";
    case JobEnd::kCancelled:
      return "cancelled";
  }
  return "?";
}

}  // namespace

JobRunRecorder::JobRunRecorder(const QueueTree& tree, Options options) : options_(options) {
  std::unordered_map<std::string, size_t> tenant_index;
  tenant_of_queue_.assign(tree.size(), 0);
  for (QueueId q : tree.queues()) {
    const std::string& t = tree.tenant(q);
    auto [it, inserted] = tenant_index.try_emplace(t, run_.tenants.size());
    if (inserted) {
      run_.tenants.push_back(t);
      run_.tenant_quota_milli.push_back(0);
    }
    tenant_of_queue_[q.value()] = it->second;
    for (size_t r = 0; r < tree.resources().size(); ++r) {
      const ResourceName& name = tree.resources()[r];
      if (name.kind == ResourceKind::kGpu && !name.model.valid()) {
        run_.tenant_quota_milli[it->second] += tree.quota(q, r).nominal;
      }
    }
  }
  tenant_milli_.assign(run_.tenants.size(), 0);
}

void JobRunRecorder::Track(JobId id, QueueId queue, size_t index, JobOutcome outcome) {
  outcome.tenant = run_.tenants[tenant_of_queue_[queue.value()]];
  index_of_[id.value()] = index;
  if (run_.jobs.size() <= index) {
    run_.jobs.resize(index + 1);
  }
  run_.jobs[index] = std::move(outcome);
}

void JobRunRecorder::OnJobEvent(const JobRecord& job, const LifecycleEvent& event) {
  auto found = index_of_.find(event.job.value());
  if (found == index_of_.end()) {
    return;
  }
  JobOutcome& o = run_.jobs[found->second];
  const size_t tenant = tenant_of_queue_[job.queue.value()];
  SimEvent e;
  e.time = event.time;
  e.job = o.name;
  switch (event.kind) {
    case LifecycleEvent::Kind::kSubmitted:
      e.kind = SimEvent::Kind::kSubmit;
      break;
    case LifecycleEvent::Kind::kStarted: {
      e.kind = SimEvent::Kind::kStart;
      ++o.attempts;
      if (o.first_start < 0) {
        o.first_start = event.time;
        o.predicted = job.predicted_runtime;
      }
      int64_t milli = 0;
      for (const Allocation& a : job.allocations) {
        milli += a.TotalGpuMilli().value();
      }
      milli_of_[event.job.value()] = milli;
      tenant_milli_[tenant] += milli;
      usage_changed_ = true;
      if (options_.record_events && event.state != nullptr) {
        for (const Allocation& a : job.allocations) {
          e.nodes.push_back(event.state->spec(a.node).name);
        }
      }
      e.backfilled = event.backfilled;
      e.borrowing = event.borrowing;
      break;
    }
    case LifecycleEvent::Kind::kSignalled: {
      e.kind = SimEvent::Kind::kPreempt;
      ++o.preemptions;
      auto by = index_of_.find(event.by.value());
      e.by = by != index_of_.end() ? run_.jobs[by->second].name : std::string();
      break;
    }
    case LifecycleEvent::Kind::kRequeued:
    case LifecycleEvent::Kind::kFinished: {
      const bool requeued = event.kind == LifecycleEvent::Kind::kRequeued;
      e.kind = requeued ? SimEvent::Kind::kEvict : SimEvent::Kind::kFinish;
      o.service += event.ran;
      o.lost_gpu_seconds += event.lost_gpu_seconds;
      o.restarts = job.attempt.restarts;
      if (!requeued) {
        o.finish = event.time;
        o.end = EndName(event.end);
      }
      auto m = milli_of_.find(event.job.value());
      if (m != milli_of_.end()) {
        tenant_milli_[tenant] -= m->second;
        usage_changed_ = true;
        milli_of_.erase(m);
      }
      break;
    }
  }
  if (options_.record_events) {
    events_.push_back(std::move(e));
  }
}

void JobRunRecorder::EndCycle(Micros now, std::vector<std::string> violations) {
  if (!violations.empty()) {
    ++run_.quota_violations;
    for (std::string& v : violations) {
      if (violations_.size() < 20) {
        violations_.push_back("t=" + std::to_string(now / 1'000'000) + "s: " + std::move(v));
      }
    }
  }
  if (options_.record_usage && usage_changed_) {
    if (!run_.usage.empty() && run_.usage.back().time == now) {
      run_.usage.back().gpu_milli = tenant_milli_;
    } else {
      run_.usage.push_back(UsageSample{now, tenant_milli_});
    }
    usage_changed_ = false;
  }
}

JobSimResult JobRunRecorder::Take(int64_t events) {
  run_.events = events;
  JobSimResult result;
  result.run = std::move(run_);
  result.events = std::move(events_);
  result.violations = std::move(violations_);
  return result;
}

}  // namespace tessera
