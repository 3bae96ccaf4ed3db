// JobScheduler's preemption: whom a job may preempt, and the cheapest set of victims
// that lets it start (declared in job_scheduler.h).
#include <algorithm>
#include <vector>

#include "sched/job_scheduler.h"
#include "sched/job_scheduler_internal.h"

namespace tessera {

using job_scheduler_internal::FreeMilli;
using job_scheduler_internal::LedgerOverlay;
using job_scheduler_internal::MustSucceed;

int JobScheduler::CycleLasLevel(const JobRecord& job, Micros now) {
  const uint64_t id = job.id.value();
  if (las_stamp_.size() <= id) {
    las_stamp_.resize(id + 1, 0);
    las_level_.resize(id + 1, 0);
  }
  if (las_stamp_[id] != cycle_stamp_) {
    las_stamp_[id] = cycle_stamp_;
    las_level_[id] = LasLevel(job, now);
  }
  return las_level_[id];
}

bool JobScheduler::CheaperVictim(const VictimCandidate& a, const VictimCandidate& b) {
  if (a.cost != b.cost) return a.cost < b.cost;
  if (a.evict_at != b.evict_at) return a.evict_at < b.evict_at;
  if (a.priority != b.priority) return a.priority < b.priority;
  if (a.run_start != b.run_start) return a.run_start > b.run_start;
  return a.id < b.id;
}

void JobScheduler::GroupVictims(const std::vector<JobRecord>& jobs, Micros now) {
  if (victim_order_stamp_ == cycle_stamp_) {
    return;
  }
  victim_order_stamp_ = cycle_stamp_;
  const size_t levels = options_.las_thresholds.size() + 1;
  victim_groups_.resize(tree_->size() * levels);
  victim_groups_used_.clear();
  for (uint64_t id : running_) {
    const JobRecord& v = jobs[id];
    if (v.phase != JobPhase::kRunning) {
      continue;
    }
    const int level = CycleLasLevel(v, now);
    const size_t g = v.queue.value() * levels + static_cast<size_t>(level);
    VictimGroup& group = victim_groups_[g];
    if (group.filled_stamp != cycle_stamp_) {
      group.filled_stamp = cycle_stamp_;
      group.queue = v.queue.value();
      group.las_level = level;
      group.jobs.clear();
      group.min_priority = v.spec.priority;
      victim_groups_used_.push_back(g);
    }
    group.min_priority = std::min(group.min_priority, v.spec.priority);
    // The cost and eviction time are worked out when the group is sorted.
    group.jobs.push_back({0.0, 0, v.spec.priority, v.run_start, id, level});
  }
}

const std::vector<JobScheduler::VictimCandidate>& JobScheduler::SortedGroup(
    VictimGroup& group, const std::vector<JobRecord>& jobs, Micros now) {
  if (group.sorted_stamp != cycle_stamp_) {
    group.sorted_stamp = cycle_stamp_;
    for (VictimCandidate& c : group.jobs) {
      const JobRecord& v = jobs[c.id];
      c.cost = options_.victims_by_cost ? VictimCost(v, now) : -static_cast<double>(c.las_level);
      c.evict_at = EvictionTime(v, now);
    }
    std::sort(
        group.jobs.begin(), group.jobs.end(),
        [](const VictimCandidate& a, const VictimCandidate& b) { return CheaperVictim(a, b); });
  }
  return group.jobs;
}

bool JobScheduler::MayPreemptFrom(const VictimGroup& group, const JobRecord& preemptor,
                                  int preemptor_level, bool reclaim) const {
  // CanPreempt's ways to say yes, for the group's job of the lowest priority.
  const bool same_queue = group.queue == preemptor.queue.value();
  const bool not_above = group.min_priority <= preemptor.spec.priority;
  return (options_.preempt_priority && same_queue &&
          group.min_priority < preemptor.spec.priority) ||
         (reclaim && !same_queue) ||
         (options_.preempt_las && not_above && group.las_level > preemptor_level &&
          (options_.las_protected_level == 0 || group.las_level < options_.las_protected_level)) ||
         (options_.preempt_srtf && not_above);
}

bool JobScheduler::MayPreemptAny(const JobRecord& preemptor, int preemptor_level,
                                 bool reclaim) const {
  // MayPreemptFrom for the best group there could be, whatever runs.
  const int top_level = static_cast<int>(options_.las_thresholds.size());
  const bool las_above =
      preemptor_level < top_level &&
      (options_.las_protected_level == 0 || preemptor_level + 1 < options_.las_protected_level);
  return (options_.preempt_priority && lowest_priority_ < preemptor.spec.priority) || reclaim ||
         (options_.preempt_las && las_above) || options_.preempt_srtf;
}

bool JobScheduler::CanPreempt(const JobRecord& victim, int victim_level, const JobRecord& preemptor,
                              int preemptor_level, bool reclaim, Micros now) const {
  if (victim.phase != JobPhase::kRunning || !victim.spec.preemptible) {
    return false;
  }
  if (options_.max_preemptions_per_job > 0 &&
      victim.preemptions >= options_.max_preemptions_per_job) {
    return false;
  }
  // A job that started at this instant is never a victim: a preemption must let
  // virtual time move, or a requeued job and its preemptor could trade places forever.
  if (now - victim.run_start < std::max<Micros>(options_.min_run_before_preemption, 1)) {
    return false;
  }
  // Nor is a job still in its start-up (restoring its checkpoint): its restart would be
  // paid for nothing, and jobs preempting each other there could never progress.
  if (now < victim.run_start + victim.startup) {
    return false;
  }
  const bool same_queue = victim.queue == preemptor.queue;
  if (options_.preempt_priority && same_queue && victim.spec.priority < preemptor.spec.priority) {
    return true;
  }
  if (now - victim.run_start < options_.min_run_before_reclaim) {
    return false;
  }
  if (reclaim && !same_queue) {
    return true;  // borrowing is re-checked as victims are taken
  }
  return MayReorder(victim, victim_level, preemptor, preemptor_level, now);
}

bool JobScheduler::MayReorder(const JobRecord& victim, int victim_level,
                              const JobRecord& preemptor, int preemptor_level, Micros now) const {
  if (victim.spec.priority > preemptor.spec.priority) {
    return false;
  }
  // LAS and SRTF preemptions reorder work rather than give back a quota: each attempt
  // first runs N times what its restart costs (the overhead, and the work lost when
  // the eviction comes before a checkpoint), so that restarts take at most about 1/N
  // of it. Where evictions lose work, victims are then taken soon after a checkpoint.
  if (options_.restart_amortization > 0 &&
      now - victim.run_start < static_cast<Micros>(options_.restart_amortization) *
                                   (options_.restart_overhead + WorkLostIfEvicted(victim, now))) {
    return false;
  }
  if (options_.preempt_las && victim_level > preemptor_level &&
      (options_.las_protected_level == 0 || victim_level < options_.las_protected_level)) {
    return true;
  }
  return options_.preempt_srtf && victim.oracle_runtime >= 0 && preemptor.oracle_runtime >= 0 &&
         victim.RemainingBy(victim.oracle_runtime, now) >
             preemptor.RemainingBy(preemptor.oracle_runtime, now);
}

std::vector<JobScheduler::VictimCandidate> JobScheduler::VictimCandidates(
    const JobRecord& job, const std::vector<JobRecord>& jobs, bool reclaim, Micros now,
    int64_t* reachable) {
  // Running jobs in victim order (cheapest first), built once per cycle: the order
  // does not depend on the preemptor, only which of them it may take does. The groups
  // it may not take from are left out; the others are merged back into victim order.
  GroupVictims(jobs, now);
  const int job_level = CycleLasLevel(job, now);
  // A heap of each group's next job (the group's jobs, and an index into them), the
  // cheapest on top.
  using Head = std::pair<const std::vector<VictimCandidate>*, size_t>;
  auto later = [](const Head& x, const Head& y) {
    return CheaperVictim((*y.first)[y.second], (*x.first)[x.second]);
  };
  std::vector<Head> heads;
  for (size_t g : victim_groups_used_) {
    VictimGroup& group = victim_groups_[g];
    if (MayPreemptFrom(group, job, job_level, reclaim)) {
      heads.emplace_back(&SortedGroup(group, jobs, now), 0);
    }
  }
  std::make_heap(heads.begin(), heads.end(), later);
  const auto keep = static_cast<size_t>(options_.max_victim_candidates);
  std::vector<VictimCandidate> candidates;
  while (!heads.empty() && candidates.size() < keep) {
    std::pop_heap(heads.begin(), heads.end(), later);
    const auto [group, index] = heads.back();
    heads.pop_back();
    if (index + 1 < group->size()) {
      heads.emplace_back(group, index + 1);
      std::push_heap(heads.begin(), heads.end(), later);
    }
    const VictimCandidate& c = (*group)[index];
    if (victim_stamp_[c.id] != cycle_stamp_ &&
        CanPreempt(jobs[c.id], c.las_level, job, job_level, reclaim, now)) {
      candidates.push_back(c);
      *reachable += jobs[c.id].gpu_milli;
    }
  }
  return candidates;
}

void JobScheduler::CountInFlight(const std::vector<JobRecord>& jobs, const ClusterState& state) {
  if (in_flight_stamp_ == cycle_stamp_) {
    return;
  }
  in_flight_stamp_ = cycle_stamp_;
  in_flight_.assign(tree_->size(), ResourceVector(tree_->resources().size(), 0));
  awaiting_.assign(tree_->size(), ResourceVector(tree_->resources().size(), 0));
  for (uint64_t id : running_) {
    const JobRecord& v = jobs[id];
    if (v.phase == JobPhase::kStopping || victim_stamp_[id] == cycle_stamp_) {
      AddVictimInFlight(v.queue, v.charge);
    }
  }
  for (uint64_t id : preemptors_) {
    const JobRecord& p = jobs[id];
    if (p.phase == JobPhase::kPending) {
      AddPreemptorInFlight(p.queue, ChargeOf(p, nullptr, state), 1);
    }
  }
}

void JobScheduler::AddVictimInFlight(QueueId queue, const ResourceVector& charge) {
  if (in_flight_stamp_ != cycle_stamp_) {
    return;  // counted when the cycle's first search builds the sums
  }
  ResourceVector& sum = in_flight_[queue.value()];
  for (size_t r = 0; r < charge.size() && r < sum.size(); ++r) {
    sum[r] -= charge[r];
  }
}

void JobScheduler::AddPreemptorInFlight(QueueId queue, const ResourceVector& charge,
                                        int64_t times) {
  if (in_flight_stamp_ != cycle_stamp_) {
    return;
  }
  ResourceVector& sum = in_flight_[queue.value()];
  ResourceVector& awaiting = awaiting_[queue.value()];
  for (size_t r = 0; r < charge.size() && r < sum.size(); ++r) {
    sum[r] += times * charge[r];
    awaiting[r] += times * charge[r];
  }
}

namespace {

// What a victim frees is what it holds: a task whose node was lost holds nothing.
void TakeVictim(const JobRecord& v, ClusterState& state, QuotaLedger& quota) {
  quota.Remove(v.queue, v.charge);
  for (size_t t = v.allocations.size(); t-- > 0;) {
    if (v.Holds(t)) {
      MustSucceed(state.Release(v.allocations[t]));
    }
  }
}

// Undoes TakeVictim.
void GiveBackVictim(const JobRecord& v, ClusterState& state, QuotaLedger& quota) {
  for (size_t t = 0; t < v.allocations.size(); ++t) {
    if (v.Holds(t)) {
      MustSucceed(state.Allocate(v.allocations[t]));
    }
  }
  quota.Add(v.queue, v.charge);
}

// Counts the preemptions in flight (`in_flight`, by queue) as done in `overlay`, less
// the job's own demand (`own` times its charge `pre`) in its queue.
void OverlayInFlight(const std::vector<ResourceVector>& in_flight, const JobRecord& job,
                     const ResourceVector& pre, int64_t own, LedgerOverlay& overlay) {
  auto nonzero = [](const ResourceVector& v) {
    return std::any_of(v.begin(), v.end(), [](int64_t x) { return x != 0; });
  };
  for (size_t q = 0; q < in_flight.size(); ++q) {
    const QueueId queue(static_cast<uint32_t>(q));
    if (own > 0 && queue == job.queue) {
      ResourceVector delta = in_flight[q];
      for (size_t r = 0; r < delta.size(); ++r) {
        delta[r] -= own * pre[r];
      }
      if (nonzero(delta)) {
        overlay.Add(queue, delta);
      }
    } else if (nonzero(in_flight[q])) {
      overlay.Add(queue, in_flight[q]);
    }
  }
}

}  // namespace

bool JobScheduler::WithinNominal(const JobRecord& job, const ResourceVector& pre, int64_t own,
                                 const QuotaLedger& quota) const {
  const ResourceVector& queue_in_flight = in_flight_[job.queue.value()];
  for (size_t r = 0; r < pre.size(); ++r) {
    const int64_t usage = quota.Usage(job.queue, r) + queue_in_flight[r] - own * pre[r];
    if (pre[r] > 0 && usage + pre[r] > tree_->quota(job.queue, r).nominal) {
      return false;
    }
  }
  return true;
}

bool JobScheduler::MayReclaim(const JobRecord& job, const std::vector<JobRecord>& jobs,
                              const ClusterState& state, const QuotaLedger& quota) {
  // Reclaim applies when the job would fit its own nominal quota: usage plus charge
  // within nominal, with the preemptions in flight done (a queue's usage moves only
  // with its own charges). (Not QuotaLedger::Check, which also wants the quota
  // available now: what the queue lent out is exactly what reclaim takes back.)
  if (!options_.preempt_reclaim) {
    return false;
  }
  CountInFlight(jobs, state);
  return WithinNominal(job, ChargeOf(job, nullptr, state), TimesInFlight(job), quota);
}

int64_t JobScheduler::TimesInFlight(const JobRecord& job) const {
  return job.phase == JobPhase::kPending
             ? static_cast<int64_t>(
                   std::count(preemptors_.begin(), preemptors_.end(), job.id.value()))
             : 0;
}

QueueId JobScheduler::EvictedBy(const JobRecord& job, const std::vector<JobRecord>& jobs) {
  if (!job.evicted_for.valid() || job.evicted_for.value() >= jobs.size()) {
    return QueueId();
  }
  const QueueId by = jobs[job.evicted_for.value()].queue;
  return by != job.queue ? by : QueueId();
}

bool JobScheduler::MayTakeAcrossQueues(const VictimSearch& s, const JobRecord& v, int job_level,
                                       Micros now, bool* reclaiming) {
  // A job waiting to run again after another queue's job evicted it takes nothing from
  // any other queue, by any path: reclaim overshoots (a victim may free more than its
  // queue borrowed), so the victim could otherwise reclaim back from that queue, or
  // from a third one that then reclaims from the first (a loop through three queues).
  if (s.evicted_by.valid()) {
    return false;
  }
  // v's queue as it stands with the preemptions in flight done, less its own waiting
  // preemptors, on each resource v is charged.
  const ResourceVector& awaiting = awaiting_[v.queue.value()];
  bool borrowing = false;   // on some resource v holds: reclaim may take v
  bool keeps_nominal = true;  // on every resource v holds, once v is gone
  for (size_t r = 0; r < v.charge.size(); ++r) {
    if (v.charge[r] <= 0) {
      continue;
    }
    const int64_t usage = s.quota.Usage(v.queue, r) - (r < awaiting.size() ? awaiting[r] : 0);
    const int64_t nominal = s.quota.SubtreeQuota(v.queue, r);
    borrowing = borrowing || usage > nominal;
    keeps_nominal = keeps_nominal && usage - v.charge[r] >= nominal;
  }
  if (keeps_nominal && MayReorder(v, CycleLasLevel(v, now), s.job, job_level, now)) {
    *reclaiming = false;
    return true;
  }
  *reclaiming = true;
  return s.reclaim && borrowing;
}

bool JobScheduler::TakeUntilAdmissible(VictimSearch& s,
                                       const std::vector<VictimCandidate>& candidates, Micros now) {
  const int job_level = CycleLasLevel(s.job, now);
  for (const VictimCandidate& c : candidates) {
    const JobRecord& v = s.jobs[c.id];
    bool reclaiming = false;
    if (v.queue != s.job.queue && !MayTakeAcrossQueues(s, v, job_level, now, &reclaiming)) {
      continue;
    }
    TakeVictim(v, s.state, s.quota);
    s.chosen.push_back(c.id);
    s.nominal_only = s.nominal_only || reclaiming;
    if (Admissible(s.job, s.state, s.quota, s.nominal_only, s.rng)) {
      return true;
    }
  }
  for (auto it = s.chosen.rbegin(); it != s.chosen.rend(); ++it) {
    GiveBackVictim(s.jobs[*it], s.state, s.quota);
  }
  return false;
}

void JobScheduler::DropUnneededVictims(VictimSearch& s) {
  for (size_t i = s.chosen.size(); i-- > 0;) {
    if (s.chosen.size() == 1) {
      break;
    }
    const JobRecord& v = s.jobs[s.chosen[i]];
    GiveBackVictim(v, s.state, s.quota);
    if (Admissible(s.job, s.state, s.quota, s.nominal_only, s.rng)) {
      s.chosen.erase(s.chosen.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      TakeVictim(v, s.state, s.quota);
    }
  }
}

std::vector<JobId> JobScheduler::CommitVictims(VictimSearch& s, Micros now,
                                               std::vector<double>* costs) {
  std::vector<JobId> victims;
  for (auto it = s.chosen.rbegin(); it != s.chosen.rend(); ++it) {
    GiveBackVictim(s.jobs[*it], s.state, s.quota);
  }
  for (uint64_t id : s.chosen) {
    victim_stamp_[id] = cycle_stamp_;  // not a victim twice in one cycle
    AddVictimInFlight(s.jobs[id].queue, s.jobs[id].charge);
    victims.push_back(JobId(id));
    costs->push_back(VictimCost(s.jobs[id], now));
  }
  return victims;
}

std::vector<JobId> JobScheduler::FindVictims(JobRecord& job, std::vector<JobRecord>& jobs,
                                             ClusterState& state, QuotaLedger& quota, Micros now,
                                             Rng& rng, std::vector<double>* costs) {
  // Preemptions in flight count as done while victims are chosen: a victim (stopping,
  // or chosen earlier in this cycle) holds its charge until it is evicted, and its
  // preemptor holds none until it starts. Seen as they are, two preemptors would
  // reclaim the same borrowed quota twice, pushing the lender below its nominal
  // quota, which it would then reclaim back: a preemption loop.
  CountInFlight(jobs, state);
  const ResourceVector pre = ChargeOf(job, nullptr, state);
  // The job's own demand, counted for the other preemptors, is not counted for itself.
  const int64_t own = TimesInFlight(job);
  const bool reclaim = options_.preempt_reclaim && WithinNominal(job, pre, own, quota);
  if (!MayPreemptAny(job, CycleLasLevel(job, now), reclaim)) {
    return {};  // without grouping the running jobs
  }

  int64_t reachable = FreeMilli(state);
  const std::vector<VictimCandidate> candidates =
      VictimCandidates(job, jobs, reclaim, now, &reachable);
  // Not even every candidate together would make room: skip the search.
  if (candidates.empty() || reachable < job.gpu_milli) {
    return {};
  }
  LedgerOverlay in_flight(quota);
  OverlayInFlight(in_flight_, job, pre, own, in_flight);
  VictimSearch search{job, jobs, state, quota, rng, {}, false, reclaim, EvictedBy(job, jobs)};
  if (!TakeUntilAdmissible(search, candidates, now)) {
    return {};
  }
  DropUnneededVictims(search);
  return CommitVictims(search, now, costs);
}

}  // namespace tessera
