// The order of a cycle's visits (declared in job_scheduler.h): one definition, walked by
// the cycle (job_scheduler_cycle.cc) and by PendingOrder for queue positions.
#include <algorithm>
#include <queue>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "sched/job_scheduler.h"

namespace tessera {

void JobScheduler::WalkVisitOrder(const std::vector<JobRecord>& jobs, Micros now,
                                  const VisitOrder& v) const {
  auto stopped = [&] { return v.stop && v.stop(); };
  // Jobs whose victims are gone, by submission, then starving jobs, oldest first.
  std::vector<std::pair<Micros, uint64_t>> front;
  for (uint64_t id : preemptors_) {
    if (id < jobs.size() && jobs[id].phase == JobPhase::kPending && Enqueued(id)) {
      front.emplace_back(jobs[id].spec.submit_time, id);
    }
  }
  std::sort(front.begin(), front.end());
  for (const auto& [t, id] : front) {
    v.visit(id);
  }
  if (options_.starvation_limit > 0) {
    for (const auto& [since, id] : by_eligible_) {
      if (since + options_.starvation_limit > now || stopped()) {
        break;
      }
      v.visit(id);
    }
  }
  // Everyone else: merge the queues' sorted jobs by (priority, queue key, job key). A
  // queue's key is taken when its next job comes up: a cycle moves it as jobs start.
  // With user_fair_share each user of a queue is a run of its own, ordered by the user's
  // decayed usage between the queue key and the job key (constant within a cycle).
  struct Head {
    int64_t priority_rank;
    double major, user, minor;
    Micros submit;
    uint64_t id;
    uint32_t queue;
    std::set<Entry>::const_iterator it;
    const std::set<Entry>* run;
    bool operator>(const Head& o) const {
      return std::tie(priority_rank, major, user, minor, submit, id) >
             std::tie(o.priority_rank, o.major, o.user, o.minor, o.submit, o.id);
    }
  };
  const bool additive = queue_order_ != nullptr && queue_order_->additive();
  auto make_head = [&](uint32_t q, const std::set<Entry>* run, std::set<Entry>::const_iterator it,
                       double user) {
    const double qk = queue_order_ ? queue_order_->Key(QueueId(q), usage_) : 0.0;
    return Head{it->priority_rank,
                additive ? qk + it->key : qk,
                user,
                additive ? 0.0 : it->key,
                it->submit,
                it->id,
                q,
                it,
                run};
  };
  std::priority_queue<Head, std::vector<Head>, std::greater<>> heap;
  for (QueueId q : tree_->queues()) {
    const QueueState& state = queues_[q.value()];
    if (!options_.user_fair_share) {
      if (!state.jobs.empty()) {
        heap.push(make_head(q.value(), &state.jobs, state.jobs.begin(), 0.0));
      }
      continue;
    }
    for (const auto& [slot, run] : state.by_user) {
      if (!run.empty()) {
        heap.push(make_head(q.value(), &run, run.begin(), usage_.user_decayed(slot)));
      }
    }
  }
  while (!heap.empty() && !stopped()) {
    Head h = heap.top();
    heap.pop();
    v.visit(h.id);
    auto next = std::next(h.it);
    if (next != h.run->end() && (!v.queue_open || v.queue_open(h.queue))) {
      heap.push(make_head(h.queue, h.run, next, h.user));
    }
  }
}

std::vector<JobId> JobScheduler::PendingOrder(const std::vector<JobRecord>& jobs, Micros now) {
  usage_.Advance(now);
  std::vector<JobId> order;
  order.reserve(pending_count_);
  std::vector<uint8_t> listed(jobs.size(), 0);
  VisitOrder v;
  v.visit = [&](uint64_t id) {
    // A job comes once (a starving preemptor is offered twice, as in a cycle).
    if (id < jobs.size() && !listed[id] && jobs[id].phase == JobPhase::kPending) {
      listed[id] = 1;
      order.push_back(JobId(id));
    }
  };
  WalkVisitOrder(jobs, now, v);
  return order;
}

}  // namespace tessera
