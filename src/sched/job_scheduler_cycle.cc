// JobScheduler's cycle (declared in job_scheduler.h): which pending jobs it tries, in
// what order, and what it does with each (start, preempt for, reserve, skip).
#include <algorithm>
#include <functional>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_set>
#include <utility>
#include <vector>

#include "sched/job_scheduler.h"
#include "sched/job_scheduler_internal.h"

namespace tessera {

using job_scheduler_internal::FreeMilli;
using job_scheduler_internal::kNotRunning;
using job_scheduler_internal::ShapeHash;

// What one cycle has decided and remembers so far.
struct JobScheduler::CycleContext {
  std::vector<JobRecord>& jobs;
  ClusterState& state;
  QuotaLedger& quota;
  Micros now;
  Rng& rng;
  CycleResult out;
  int searches = 0;  // victim searches left
  // Those left for jobs within their queue's nominal quota, apart: searches spent on
  // borrowers ahead in the order would otherwise delay a reclaim for cycles on end.
  int reclaim_searches = 0;
  std::vector<uint8_t> queue_blocked;
  std::vector<int> skips;
  std::unordered_set<uint64_t> failed_shapes;    // gangs that did not fit
  std::unordered_set<uint64_t> failed_searches;  // victim searches that found none
  std::vector<JobId> started;
  // The cycle's first pass: only starts within the job's nominal quota.
  bool nominal_pass = false;
};

namespace {

bool Touches(const std::vector<Allocation>& allocations, const std::vector<NodeId>& nodes) {
  for (const Allocation& a : allocations) {
    if (std::binary_search(nodes.begin(), nodes.end(), a.node)) {
      return true;
    }
  }
  return false;
}

}  // namespace

CycleResult JobScheduler::RunCycle(std::vector<JobRecord>& jobs, ClusterState& state,
                                   QuotaLedger& quota, Micros now, Rng& rng) {
  usage_.Advance(now);
  if (seen_.size() < jobs.size()) {
    seen_.resize(jobs.size(), 0);
    victim_stamp_.resize(jobs.size(), 0);
  }
  if (running_pos_.size() < jobs.size()) {
    running_pos_.resize(jobs.size(), kNotRunning);
  }
  ++cycle_stamp_;
  const bool preempting = options_.preempt_priority || options_.preempt_reclaim ||
                          options_.preempt_las || options_.preempt_srtf;
  CycleContext c{jobs,
                 state,
                 quota,
                 now,
                 rng,
                 {},
                 preempting ? options_.max_preemption_searches : 0,
                 options_.preempt_reclaim ? options_.max_preemption_searches : 0,
                 std::vector<uint8_t>(tree_->size(), 0),
                 std::vector<int>(tree_->size(), 0),
                 {},
                 {},
                 {}};
  // Preemptors stay listed until their victims are gone, then come first once: a
  // pending one leaves the list at that visit (ForgetPreemptor); one that started, or
  // was held or gated meanwhile (it may not start), here.
  std::erase_if(preemptors_, [&](uint64_t id) {
    const JobRecord& j = jobs[id];
    return j.phase == JobPhase::kPending ? !Enqueued(id) : j.victims_in_flight == 0;
  });
  VisitOrder order;
  order.stop = [&] { return Exhausted(c); };
  order.queue_open = [&](uint32_t q) { return c.queue_blocked[q] == 0; };
  if (NominalFirst()) {
    // Jobs that fit their own queue's nominal quota start before any job borrows, as
    // in Kueue: what frees up goes to a queue within its guarantee first, rather than
    // to a borrower that a reclaim would then evict (work moving back and forth).
    // Bounded like the second pass, apart from its count of jobs tested.
    int visits = 0;
    VisitOrder first = order;
    first.stop = [&] { return visits >= options_.max_jobs_tested || Exhausted(c); };
    first.visit = [&](uint64_t id) {
      ++visits;
      VisitWithinNominal(c, id);
    };
    c.nominal_pass = true;
    WalkVisitOrder(jobs, now, first);
    c.nominal_pass = false;
    std::fill(c.skips.begin(), c.skips.end(), 0);
    std::fill(c.queue_blocked.begin(), c.queue_blocked.end(), 0);
  }
  order.visit = [&](uint64_t id) { Visit(c, id); };
  WalkVisitOrder(jobs, now, order);
  for (JobId id : c.started) {
    Dequeue(jobs[id.value()]);
  }
  return std::move(c.out);
}

void JobScheduler::ForgetPreemptor(const JobRecord& job, const ClusterState& state) {
  const auto times = static_cast<int64_t>(std::erase(preemptors_, job.id.value()));
  if (times > 0) {
    AddPreemptorInFlight(job.queue, ChargeOf(job, nullptr, state), -times);
  }
}

void JobScheduler::SkipQueue(CycleContext& c, QueueId q) const {
  if (++c.skips[q.value()] >= options_.max_skips_per_queue) {
    c.queue_blocked[q.value()] = 1;
  }
}

bool JobScheduler::Exhausted(const CycleContext& c) const {
  return c.out.tested >= options_.max_jobs_tested ||
         (FreeMilli(c.state) == 0 && c.searches == 0 && c.reclaim_searches == 0 &&
          cpu_only_pending_ == 0);
}

void JobScheduler::Visit(CycleContext& c, uint64_t id) {
  if (seen_[id] == cycle_stamp_) {
    return;
  }
  seen_[id] = cycle_stamp_;
  JobRecord& job = c.jobs[id];
  // A job waiting for its victims does not start elsewhere meanwhile: its victims
  // are evicted anyway, and what they free would go to another job (often another
  // queue's preemptor, whose own victims then free room for a third: a loop).
  if (job.phase != JobPhase::kPending || c.queue_blocked[job.queue.value()] ||
      job.victims_in_flight > 0 || job.WaitsForPreemptor(c.jobs, c.now)) {
    return;
  }
  ForgetPreemptor(job, c.state);  // its victims are gone: this is its one visit first
  TryJob(c, job);
}

bool JobScheduler::NominalFirst() const {
  // Not where the policy's promise is an order of its own: strict FIFO, and the
  // reservation of backfill or of a starving job (which the first pass would not see).
  return options_.borrowing && !options_.strict_fifo && options_.backfill == Backfill::kNone &&
         options_.starvation_limit == 0 && has_nominal_quota_;
}

void JobScheduler::VisitWithinNominal(CycleContext& c, uint64_t id) {
  JobRecord& job = c.jobs[id];
  if (job.nominated && TimesInFlight(job) > 0) {
    // A preemptor whose victims are gone, at its one visit first (it is forgotten as a
    // preemptor there): what they freed is its own, borrowed or not.
    c.nominal_pass = false;
    Visit(c, id);
    c.nominal_pass = true;
    return;
  }
  if (seen_[id] == cycle_stamp_ || job.phase != JobPhase::kPending ||
      c.queue_blocked[job.queue.value()] || job.victims_in_flight > 0 ||
      job.WaitsForPreemptor(c.jobs, c.now)) {
    return;
  }
  // A queue's jobs start in its own order: its first job that cannot start within the
  // nominal quota closes the queue for this pass (a later one starting ahead of it
  // would be preempted by it, its work lost). Any job not started here is tried again,
  // with borrowing, in the second pass.
  const ResourceVector pre = ChargeOf(job, nullptr, c.state);
  const size_t started = c.started.size();
  if (c.quota.Check(job.queue, pre, /*allow_borrowing=*/false) == QuotaFit::kNominal &&
      job.gpu_milli <= FreeMilli(c.state) && TryStart(c, job) && c.started.size() > started) {
    seen_[id] = cycle_stamp_;
  } else {
    c.queue_blocked[job.queue.value()] = 1;
  }
}

bool JobScheduler::TryStart(CycleContext& c, JobRecord& job) {
  const QueueId q = job.queue;
  std::vector<Allocation> allocations;
  if (!PlaceGang(job, c.state, c.rng, &allocations)) {
    return false;
  }
  const ResourceVector charge = ChargeOf(job, &allocations, c.state);
  const QuotaFit fit = c.quota.Check(q, charge, options_.borrowing && !c.nominal_pass);
  const bool delays_reserved =
      c.out.reservation && c.out.reservation->job != job.id &&
      c.now + job.RemainingBy(RuntimeEstimate(job), c.now) > c.out.reservation->start &&
      Touches(allocations, c.out.reservation->nodes);
  if (fit == QuotaFit::kNo || delays_reserved) {
    Unplace(c.state, allocations);
    SkipQueue(c, q);
    return true;  // tried: the job stays pending
  }
  c.quota.Add(q, charge);
  usage_.Add(q, allocations);
  if (options_.user_fair_share) {
    usage_.AddUser(UserSlotOf(job), allocations);
  }
  running_pos_[job.id.value()] = running_.size();
  running_.push_back(job.id.value());
  c.started.push_back(job.id);
  c.out.starts.push_back(StartDecision{job.id, std::move(allocations), charge,
                                       fit == QuotaFit::kBorrow, c.out.reservation.has_value()});
  return true;
}

bool JobScheduler::TryPreempt(CycleContext& c, JobRecord& job, uint64_t shape) {
  // A search that failed fails again for a job of the same queue, shape, priority
  // and LAS level in the same cycle: remember it instead of scanning the running jobs.
  // (A job evicted for another queue's job takes from no other queue: keyed too.)
  const uint64_t evicted_for = EvictedBy(job, c.jobs).valid() ? 1 : 0;
  uint64_t search_key = shape;
  for (const uint64_t part :
       {uint64_t{job.queue.value()}, evicted_for,
        static_cast<uint64_t>(static_cast<uint32_t>(job.spec.priority)),
        static_cast<uint64_t>(LasLevel(job, c.now))}) {
    search_key = (search_key ^ part) * 0x100000001b3ULL;  // FNV-1a's step over the parts
  }
  // (Not under SRTF, where the outcome also depends on the job's remaining time.)
  const bool known_to_fail = !options_.preempt_srtf && c.failed_searches.contains(search_key);
  if (job.victims_in_flight != 0 || known_to_fail) {
    return false;
  }
  int& budget = c.reclaim_searches > 0 && MayReclaim(job, c.jobs, c.state, c.quota)
                    ? c.reclaim_searches
                    : c.searches;
  if (budget <= 0) {
    return false;
  }
  --budget;
  std::vector<double> costs;
  std::vector<JobId> victims = FindVictims(job, c.jobs, c.state, c.quota, c.now, c.rng, &costs);
  if (victims.empty()) {
    c.failed_searches.insert(search_key);
    return false;
  }
  for (size_t i = 0; i < victims.size(); ++i) {
    c.out.preemptions.push_back(PreemptDecision{
        victims[i], job.id, EvictionTime(c.jobs[victims[i].value()], c.now), costs[i]});
  }
  preemptors_.push_back(job.id.value());
  AddPreemptorInFlight(job.queue, ChargeOf(job, nullptr, c.state), 1);
  return true;
}

void JobScheduler::TryJob(CycleContext& c, JobRecord& job) {
  ++c.out.tested;
  const QueueId q = job.queue;
  const ResourceVector pre = ChargeOf(job, nullptr, c.state);
  const QuotaFit pre_fit = c.quota.Check(q, pre, options_.borrowing);
  const uint64_t shape = ShapeHash(job.spec);  // keys the per-cycle failure memos
  if (pre_fit != QuotaFit::kNo) {
    if (!c.failed_shapes.contains(shape) && job.gpu_milli <= FreeMilli(c.state) &&
        TryStart(c, job)) {
      return;
    }
    if (job.gpu_milli > 0) {
      c.failed_shapes.insert(shape);
    }
  }
  // Blocked, by quota or by capacity.
  if (TryPreempt(c, job, shape)) {
    return;
  }
  if (pre_fit == QuotaFit::kNo) {
    SkipQueue(c, q);
    return;
  }
  // A starving job blocked by capacity reserves even without backfill: going first
  // is not enough for a large gang while smaller jobs take each GPU that frees up.
  const bool starving =
      options_.starvation_limit > 0 && job.eligible_since + options_.starvation_limit <= c.now;
  if ((options_.backfill == Backfill::kEasy || starving) && !c.out.reservation &&
      job.victims_in_flight == 0) {
    c.out.reservation = Reserve(job, c.jobs, c.state, c.now);
  }
  if (options_.strict_fifo) {
    c.queue_blocked[q.value()] = 1;
  } else {
    SkipQueue(c, q);
  }
}

}  // namespace tessera
