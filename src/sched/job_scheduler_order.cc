// JobScheduler::PendingOrder (declared in job_scheduler.h): the order of the cycle's
// visits (job_scheduler_cycle.cc) without its skips, for queue positions.
#include <algorithm>
#include <queue>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "sched/job_scheduler.h"

namespace tessera {

std::vector<JobId> JobScheduler::PendingOrder(const std::vector<JobRecord>& jobs, Micros now) {
  usage_.Advance(now);
  std::vector<JobId> order;
  order.reserve(pending_count_);
  std::vector<uint8_t> listed(jobs.size(), 0);
  auto add = [&](uint64_t id) {
    if (id < jobs.size() && !listed[id] && jobs[id].phase == JobPhase::kPending) {
      listed[id] = 1;
      order.push_back(JobId(id));
    }
  };
  // As VisitPreemptorsAndStarving: preemptors first, by submission, then starving jobs.
  std::vector<std::pair<Micros, uint64_t>> front;
  for (uint64_t id : preemptors_) {
    if (id < jobs.size() && jobs[id].phase == JobPhase::kPending) {
      front.emplace_back(jobs[id].spec.submit_time, id);
    }
  }
  std::sort(front.begin(), front.end());
  for (const auto& [t, id] : front) {
    add(id);
  }
  if (options_.starvation_limit > 0) {
    for (const auto& [since, id] : by_eligible_) {
      if (since + options_.starvation_limit > now) {
        break;
      }
      add(id);
    }
  }
  // As VisitQueuesInOrder: the queues' sorted jobs merged by (priority, queue key, job
  // key). Queue keys are taken at `now`; a cycle moves them as jobs start.
  struct Head {
    int64_t priority_rank;
    double major, minor;
    Micros submit;
    uint64_t id;
    uint32_t queue;
    std::set<Entry>::const_iterator it;
    bool operator>(const Head& o) const {
      return std::tie(priority_rank, major, minor, submit, id) >
             std::tie(o.priority_rank, o.major, o.minor, o.submit, o.id);
    }
  };
  const bool additive = queue_order_ != nullptr && queue_order_->additive();
  std::vector<double> queue_key(tree_->size(), 0.0);
  auto make_head = [&](uint32_t q, std::set<Entry>::const_iterator it) {
    const double qk = queue_key[q];
    return Head{it->priority_rank, additive ? qk + it->key : qk, additive ? 0.0 : it->key,
                it->submit, it->id, q, it};
  };
  std::priority_queue<Head, std::vector<Head>, std::greater<>> heap;
  for (QueueId q : tree_->queues()) {
    const auto& set = queues_[q.value()].jobs;
    if (!set.empty()) {
      queue_key[q.value()] = queue_order_ ? queue_order_->Key(q, usage_) : 0.0;
      heap.push(make_head(q.value(), set.begin()));
    }
  }
  while (!heap.empty()) {
    Head h = heap.top();
    heap.pop();
    add(h.id);
    auto next = std::next(h.it);
    if (next != queues_[h.queue].jobs.end()) {
      heap.push(make_head(h.queue, next));
    }
  }
  return order;
}

}  // namespace tessera
