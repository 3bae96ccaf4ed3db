// JobScheduler: one scheduling cycle over pending jobs (order, admit, place,
// preempt, reserve ahead, backfill), the half of the cycle above task placement.
//
// The driver owns the jobs (a vector indexed by JobId), the ClusterState and the
// QuotaLedger. It tells the scheduler about every job that becomes pending
// (Enqueue) and every job whose resources it releases (Released). RunCycle
// decides; for the jobs it starts it also reserves their resources (allocations in
// the ClusterState, charges in the QuotaLedger) so that later decisions in the same
// cycle see them. The driver applies the rest of each decision: it marks jobs
// running, signals preemption victims and, after their grace period, evicts them
// (releasing allocations and charges) and enqueues them again.
//
// Guarantees: a job starts only when its whole gang is placed and its charge fits
// its queue's quota (QuotaLedger::Check), so quotas hold at every instant; a queue
// is a reclaim target only while it borrows, and a job reclaims only what fits its
// own nominal quota, so two queues cannot preempt each other back and forth. For
// that, preemptions in flight count as done when more victims are chosen (a victim's
// charge as gone, its preemptor's as taken), and a preemptor waits for its own
// victims rather than starting on room freed for another job.
//
// Pure: time and randomness come in as arguments. Thread safety: none.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "base/rng.h"
#include "sched/job_order.h"
#include "sched/job_record.h"
#include "sched/placer.h"
#include "state/cluster_state.h"
#include "state/quota_ledger.h"

namespace tessera {

enum class Backfill : uint8_t {
  kNone,
  kEasy,  // one reservation for the first job blocked by capacity; others start only
          // if they end before it (by the runtime estimate) or stay off its nodes
};

// Which runtime estimate backfill and reservations trust.
enum class RuntimeSource : uint8_t { kUserLimit, kPredicted, kOracle };

// Where a job's demand is charged among a queue tree's resources (-1: not a quota
// resource of the tree).
struct ChargeIndex {
  size_t resources = 0;
  int any_gpu = -1, cpu = -1, memory = -1, gpu_memory = -1;
  std::vector<int> per_model;  // by GpuModelId value: the "gpu:<model>" resource or -1
  static ChargeIndex Of(const QueueTree& tree, const GpuCatalog& catalog);
};

// The quota charge of a job not placed yet: its GPUs, CPU, memory and GPU memory, and a
// task held to one GPU model also to that model's quota ("gpu:H100-80GB", a Kueue
// flavor), as its placement will be. The one source for the scheduler's admission, the
// start forecast and pending jobs' quota reasons, so that they agree.
ResourceVector PendingCharge(const ChargeIndex& index, int64_t gpu_milli,
                             const std::vector<TaskRequest>& tasks, const GpuCatalog& catalog);

struct SchedulerOptions {
  bool strict_fifo = false;     // a job blocked by capacity blocks its queue
  bool borrowing = true;        // may use the cohort's unused quota
  bool preempt_priority = false;  // lower priority jobs of the same queue
  bool preempt_reclaim = false;   // borrowers, to give a queue back its nominal quota
  bool preempt_las = false;       // jobs with more attained service (Tiresias)
  bool preempt_srtf = false;      // jobs with more remaining time (oracle)
  bool lossless_preemption = false;  // victims lose no work (the oracle reference)
  Backfill backfill = Backfill::kNone;
  RuntimeSource runtime_source = RuntimeSource::kPredicted;
  // Least-attained-service thresholds (GPU-seconds) of Tiresias' discretised queues.
  std::vector<double> las_thresholds = {3200.0, 32000.0};
  // With preempt_las: jobs at this LAS level or above have proven long and are not
  // preempted for less served ones (their delay would land in the JCT tail); 0: off.
  int las_protected_level = 0;
  // sjf orders by predicted remaining time x GPUs^this (1: GPU-time, 0: time).
  double sjf_gpu_exponent = 1.0;
  // sjf: jobs with JobRecord::runtime_guessed by size, then arrival, not by the guess.
  bool sjf_no_guess = false;
  // Default 0: off. Jobs eligible for longer go first, oldest first, so that no
  // job (a large gang included) waits forever.
  Micros starvation_limit = 0;
  Micros grace = 30'000'000;  // time a victim gets to checkpoint before eviction
  // When > 0: a victim whose next periodic checkpoint comes within this time is evicted
  // right after it (losing nothing), whether or not it also checkpoints on the signal;
  // others are evicted when the grace period ends. Waiting longer for a checkpoint that
  // comes later would only lose the extra work too.
  Micros checkpoint_wait = 0;
  // GPU time a resumed job spends before it makes progress again (restoring its
  // checkpoint, warming up): part of what preempting a job costs.
  Micros restart_overhead = 0;
  // When > 0: a job is not preempted by LAS or SRTF (reclaim and priority still may)
  // until it has run N times what its restart would cost since it started: the restart
  // overhead plus the work its eviction would lose (none when it checkpoints in time),
  // so that restarts never take more than about 1/N of the GPU time. 0: off.
  int restart_amortization = 0;
  // Preempted jobs resume before jobs that never ran (bounds their delay).
  bool resume_first = false;
  // Fair share between the users of a queue (Slurm's fair tree below the queues): within
  // one queue and priority, the jobs of the user with the least decayed GPU usage go
  // first (equal shares), the job order among one user's jobs. Default off.
  bool user_fair_share = false;
  // Victims by work lost (checkpoint-aware), or as Tiresias does: most attained
  // service first, then the most recently started.
  bool victims_by_cost = true;
  // A job preempted this many times is not preempted again (bounds the delay of
  // long jobs); 0: no bound.
  int max_preemptions_per_job = 0;
  // Minimum service before a job may be preempted (avoids thrashing); 0: none.
  Micros min_run_before_preemption = 0;
  // The same for every preemption but by priority (reclaim, LAS, SRTF): without it a
  // job restarted after a reclaim, having lost nothing yet, is the cheapest victim of
  // the next one, again and again. Default 0: off (the simulator's presets).
  Micros min_run_before_reclaim = 0;
  // A victim stays pending while the job it was evicted for still waits to start, up to
  // this long after its eviction: what it freed is that job's, and a victim restarted
  // into it is the cheapest victim again (a gang waiting for a second GPU once evicted
  // the same job hundreds of times a minute). Default 0: off (the simulator's presets).
  Micros victim_hold = 0;
  // Bounds on one cycle's work, like Slurm's default_queue_depth/bf_max_job_test.
  int max_jobs_tested = 2000;
  int max_skips_per_queue = 64;
  // Victim searches; with reclaim on, as many again for jobs within their quota.
  int max_preemption_searches = 4;
  int max_victim_candidates = 128;
};

struct StartDecision {
  JobId job;
  std::vector<Allocation> allocations;
  ResourceVector charge;
  bool borrowing = false;   // needed the cohort's quota
  bool backfilled = false;  // started ahead of a reserved job
};

struct PreemptDecision {
  JobId victim;
  JobId preemptor;
  Micros evict_at = 0;          // end of its grace period
  double lost_gpu_seconds = 0;  // the work it is expected to lose
};

struct Reservation {
  JobId job;
  Micros start = 0;  // earliest start by the runtime estimates
  std::vector<NodeId> nodes;
};

struct CycleResult {
  std::vector<StartDecision> starts;
  std::vector<PreemptDecision> preemptions;
  std::optional<Reservation> reservation;
  int tested = 0;
};

class JobScheduler {
 public:
  JobScheduler(const QueueTree& tree, const ClusterState& state, SchedulerOptions options,
               std::unique_ptr<JobOrderPlugin> job_order,
               std::unique_ptr<QueueOrderPlugin> queue_order, Profile placement,
               Micros fairshare_half_life);

  const SchedulerOptions& options() const { return options_; }
  const QueueUsage& usage() const { return usage_; }
  // Fair-share usage integrated up to `now`, to carry over (QueueUsage::Save).
  QueueUsage::Saved SaveUsage(Micros now) {
    usage_.Advance(now);
    return usage_.Save();
  }
  // Before the first cycle of a new scheduler: the usage history of an earlier one.
  void RestoreUsage(const QueueUsage::Saved& saved) { usage_.Restore(saved); }

  // The node set of `state` changed in place (ClusterState::AddNode and the like):
  // the node groups and fair share's capacity follow it, and `placement` (made for the
  // new cluster's scale) replaces the placer. Queues, running jobs and usage are kept.
  void NodesChanged(const ClusterState& state, Profile placement);
  // The placement profile alone changed (a new workload model): the placer and its
  // score caches are replaced; nothing else is.
  void SetPlacement(Profile placement) { placer_ = Placer(std::move(placement)); }

  // A job became pending (submitted, or requeued after eviction).
  void Enqueue(const JobRecord& job, Micros now);
  // A pending job left without running (cancelled), or may not start for now (held,
  // gated).
  void Dequeue(const JobRecord& job);
  // The job is finished and its id may be reused for another job: forget it as a
  // preemptor (a preemptor cancelled while its victims stop).
  void Forget(const JobRecord& job);
  // The driver released a running or stopping job's resources at `now`. Fair-share
  // usage is integrated up to `now` first, so that the job's service since the last
  // cycle counts; a negative `now` skips that (the service since the last cycle is
  // then lost to fair share).
  void Released(const JobRecord& job, Micros now = -1);
  // A running or stopping job placed before this scheduler existed (recovered after
  // a restart, or carried over when the node set changed): counts it as running, for
  // victim search and fair share. Its allocations and quota charge are the driver's
  // to restore in the ClusterState and QuotaLedger.
  void Adopt(const JobRecord& job);

  size_t pending() const { return pending_count_; }

  // One cycle at `now`. `jobs` is indexed by JobId.
  CycleResult RunCycle(std::vector<JobRecord>& jobs, ClusterState& state, QuotaLedger& quota,
                       Micros now, Rng& rng);

  // The quota charge of a job placed by `allocations` (GPU milli per model among
  // the tree's resources, CPU, memory, GPU memory); null: PendingCharge of its demand.
  ResourceVector ChargeOf(const JobRecord& job, const std::vector<Allocation>* allocations,
                          const ClusterState& state) const;

  // Where ChargeOf puts a job's demand among the tree's resources.
  const ChargeIndex& charge_index() const { return index_; }

  // Least-attained-service level of a job at `now` (0 = least served).
  int LasLevel(const JobRecord& job, Micros now) const;
  // The runtime estimate the options select.
  Micros RuntimeEstimate(const JobRecord& job) const;

  // The order in which a cycle at `now` considers jobs (job_scheduler_order.cc), the one
  // definition the cycle and PendingOrder walk: preemptors whose victims are gone, by
  // submission; starving jobs, longest eligible first; then the queues' sorted jobs
  // merged by (priority, queue key, job key). `visit` is called per job (a starving
  // preemptor comes twice); `stop` (optional) is asked before each starving or queued
  // job and ends the walk; a queue whose `queue_open` (optional) is false yields no more.
  struct VisitOrder {
    std::function<void(uint64_t)> visit;
    std::function<bool()> stop;
    std::function<bool(uint32_t)> queue_open;
  };
  void WalkVisitOrder(const std::vector<JobRecord>& jobs, Micros now, const VisitOrder& v) const;

  // The pending jobs in the order a cycle at `now` would try them, each once; what a
  // cycle would skip (blocked queues, its bounds) is not left out. For queue positions.
  std::vector<JobId> PendingOrder(const std::vector<JobRecord>& jobs, Micros now);

 private:
  struct Entry {
    int64_t priority_rank;  // -priority, or 0
    double key;
    Micros submit;
    uint64_t id;
    auto operator<=>(const Entry&) const = default;
  };
  struct QueueState {
    std::set<Entry> jobs;
    // With user_fair_share: the same jobs by user (QueueUsage::UserSlot).
    std::map<size_t, std::set<Entry>> by_user;
  };
  // The job's user slot in usage_ (user_fair_share).
  size_t UserSlotOf(const JobRecord& job) { return usage_.UserSlot(job.queue, job.spec.user); }
  struct VictimCandidate {
    double cost;  // the sort key: work lost, or minus the LAS level
    Micros evict_at;
    int32_t priority;
    Micros run_start;
    uint64_t id;
    int las_level;  // at the cycle's time
  };
  // The running jobs of one queue and LAS level, put in victim order (their costs
  // worked out) by the first search that may take from them in a cycle.
  struct VictimGroup {
    uint32_t queue = 0;
    int las_level = 0;
    int32_t min_priority = 0;  // of its jobs
    std::vector<VictimCandidate> jobs;
    uint32_t filled_stamp = 0;  // the cycle `jobs` holds
    uint32_t sorted_stamp = 0;  // the cycle `jobs` was sorted in
  };

  // The cycle (job_scheduler_cycle.cc): what it has decided and remembers so far, and
  // its steps.
  struct CycleContext;
  void Visit(CycleContext& c, uint64_t id);
  // Starts the job, preempts for it, reserves for it or skips it.
  void TryJob(CycleContext& c, JobRecord& job);
  // False when the job cannot be placed now; true when it started or its placement was
  // refused (its queue's quota, the reservation).
  bool TryStart(CycleContext& c, JobRecord& job);
  // Whether a cycle starts the jobs within their nominal quota first (borrowing allowed,
  // no strict order, some queue has a nominal quota).
  bool NominalFirst() const;
  // The first pass's visit: starts the job if it fits its nominal quota and the cluster.
  void VisitWithinNominal(CycleContext& c, uint64_t id);
  // Whether victims were chosen for the job.
  bool TryPreempt(CycleContext& c, JobRecord& job, uint64_t shape);
  // The job's victims are gone: it is no longer a preemptor in flight, whether it now
  // starts or not (one that does not searches again, or waits in order).
  void ForgetPreemptor(const JobRecord& job, const ClusterState& state);
  // Whether the pending job `id` is in the queues (not held or gated).
  bool Enqueued(uint64_t id) const { return id < entry_of_.size() && entry_of_[id].has_value(); }
  void SkipQueue(CycleContext& c, QueueId q) const;
  bool Exhausted(const CycleContext& c) const;

  bool PlaceGang(const JobRecord& job, ClusterState& state, Rng& rng,
                 std::vector<Allocation>* out);
  bool PlaceTasksWithin(const JobRecord& job, ClusterState& state, Rng& rng,
                        std::span<const NodeId> nodes, std::vector<Allocation>* out);
  static void Unplace(ClusterState& state, const std::vector<Allocation>& allocations);
  // The LAS levels are the jobs' at `now` (CycleLasLevel).
  bool CanPreempt(const JobRecord& victim, int victim_level, const JobRecord& preemptor,
                  int preemptor_level, bool reclaim, Micros now) const;
  // CanPreempt's reordering part (LAS, SRTF), for a victim that passed its gates: the
  // preemption that serves the less served or the shorter job first.
  bool MayReorder(const JobRecord& victim, int victim_level, const JobRecord& preemptor,
                  int preemptor_level, Micros now) const;
  // LasLevel within a cycle, computed once per job: `now` does not move during a cycle,
  // and a job started or stopped at `now` keeps its attained service.
  int CycleLasLevel(const JobRecord& job, Micros now);
  // Cheapest work lost first; then soonest evicted; then lowest priority; then the most
  // recently started; ids last, so the order is total and every partial sort agrees.
  static bool CheaperVictim(const VictimCandidate& a, const VictimCandidate& b);
  // Groups the running jobs for this cycle's searches (once per cycle).
  void GroupVictims(const std::vector<JobRecord>& jobs, Micros now);
  // Whether some running job of the group could pass CanPreempt for `preemptor`: a
  // group that cannot is skipped without looking at its jobs.
  bool MayPreemptFrom(const VictimGroup& group, const JobRecord& preemptor, int preemptor_level,
                      bool reclaim) const;
  // Whether any job could pass CanPreempt for `preemptor`, by what it and the options
  // allow, before the running jobs are grouped (false: none could).
  bool MayPreemptAny(const JobRecord& preemptor, int preemptor_level, bool reclaim) const;
  // The group's jobs in victim order, their costs at `now`.
  const std::vector<VictimCandidate>& SortedGroup(VictimGroup& group,
                                                  const std::vector<JobRecord>& jobs, Micros now);
  // Up to max_victim_candidates running jobs `job` may preempt, cheapest first; adds
  // the GPU milli they hold to *reachable.
  std::vector<VictimCandidate> VictimCandidates(const JobRecord& job,
                                                const std::vector<JobRecord>& jobs, bool reclaim,
                                                Micros now, int64_t* reachable);
  // The charges of this cycle's preemptions in flight, summed per queue once per cycle
  // (victims' as refunds, waiting preemptors' as charges), then kept up to date.
  void CountInFlight(const std::vector<JobRecord>& jobs, const ClusterState& state);
  // A victim's charge refunded to its queue, or `times` more (negative: fewer) of a
  // preemptor's demand charged to it; no-ops until the cycle's CountInFlight.
  void AddVictimInFlight(QueueId queue, const ResourceVector& charge);
  void AddPreemptorInFlight(QueueId queue, const ResourceVector& charge, int64_t times);
  // Finds a minimal, cheapest victim set letting `job` start; empty when none.
  std::vector<JobId> FindVictims(JobRecord& job, std::vector<JobRecord>& jobs, ClusterState& state,
                                 QuotaLedger& quota, Micros now, Rng& rng,
                                 std::vector<double>* costs);
  // FindVictims' steps (job_scheduler_preemption.cc). One search: the preemptor, what
  // its victims are taken from, and the victims taken so far (ids, in victim order).
  struct VictimSearch {
    const JobRecord& job;
    std::vector<JobRecord>& jobs;
    ClusterState& state;
    QuotaLedger& quota;
    Rng& rng;
    std::vector<uint64_t> chosen;
    bool nominal_only;  // a victim was counted on as reclaim: the job must fit its nominal
    bool reclaim;       // the job fits its nominal quota: it may reclaim from borrowers
    // The queue whose job evicted this one, while it waits to run again: it then takes
    // nothing from any other queue (invalid: none).
    QueueId evicted_by;
  };
  // Whether `job`, of charge `pre`, fits its queue's nominal quota with the preemptions
  // in flight done (its own demand, counted `own` times among them, left out).
  bool WithinNominal(const JobRecord& job, const ResourceVector& pre, int64_t own,
                     const QuotaLedger& quota) const;
  // How often `job`'s demand is counted among the preemptors in flight (pending).
  int64_t TimesInFlight(const JobRecord& job) const;
  // Whether reclaim is on and `job` fits its queue's nominal quota (WithinNominal).
  bool MayReclaim(const JobRecord& job, const std::vector<JobRecord>& jobs,
                  const ClusterState& state, const QuotaLedger& quota);
  // The guarantee, for a victim `v` of another queue than the search's job: whether
  // `v` may be taken, and whether only as reclaim (*reclaiming). Reordering (LAS,
  // SRTF) may take only what v's queue borrows beyond its nominal quota; reclaim only
  // from a queue that borrows, for a job within its own nominal quota; and a job that
  // another queue's job evicted takes from no other queue until it has run again.
  // Counted without v's queue's own preemptors in flight, which may never start.
  // The queue of the job that evicted `job`, while it waits to run again, when that is
  // another queue than its own; invalid otherwise.
  static QueueId EvictedBy(const JobRecord& job, const std::vector<JobRecord>& jobs);
  bool MayTakeAcrossQueues(const VictimSearch& s, const JobRecord& v, int job_level, Micros now,
                           bool* reclaiming);
  // Takes candidates, cheapest first, until the job is admissible; false (all given
  // back) when it never is.
  bool TakeUntilAdmissible(VictimSearch& s, const std::vector<VictimCandidate>& candidates,
                           Micros now);
  // Minimal: gives back the chosen victims (costliest first) the job can do without.
  void DropUnneededVictims(VictimSearch& s);
  // Gives every chosen victim back and marks it chosen for this cycle; their ids, and
  // their costs appended to *costs.
  std::vector<JobId> CommitVictims(VictimSearch& s, Micros now, std::vector<double>* costs);
  bool Admissible(const JobRecord& job, ClusterState& state, QuotaLedger& quota, bool nominal_only,
                  Rng& rng);
  std::optional<Reservation> Reserve(const JobRecord& job, const std::vector<JobRecord>& jobs,
                                     const ClusterState& state, Micros now) const;
  // When a victim signalled at `now` is evicted, and the GPU-seconds it then loses.
  Micros EvictionTime(const JobRecord& victim, Micros now) const;
  // The progress a victim signalled at `now` loses (0 under lossless preemption).
  Micros WorkLostIfEvicted(const JobRecord& victim, Micros now) const;
  double VictimCost(const JobRecord& victim, Micros now) const;

  const QueueTree* tree_;
  SchedulerOptions options_;
  std::unique_ptr<JobOrderPlugin> job_order_;
  std::unique_ptr<QueueOrderPlugin> queue_order_;
  Placer placer_;
  QueueUsage usage_;
  std::vector<QueueState> queues_;
  std::set<std::pair<Micros, uint64_t>> by_eligible_;  // (eligible_since, id): starvation
  std::vector<std::optional<Entry>> entry_of_;  // by id: its Entry while pending
  std::vector<uint64_t> running_;               // ids of running/stopping jobs
  std::vector<size_t> running_pos_;             // by id: index in running_
  std::vector<uint64_t> preemptors_;            // chose victims; until visited once they are gone
  std::vector<uint32_t> seen_;                  // by id: cycle stamp (tried this cycle)
  std::vector<uint32_t> victim_stamp_;          // by id: cycle stamp (chosen as a victim)
  uint32_t cycle_stamp_ = 0;
  // Running jobs grouped by queue and LAS level (queue * levels + level): a search
  // merges only the groups it may take from, back into the one victim order, and
  // only those groups are sorted.
  std::vector<VictimGroup> victim_groups_;
  std::vector<size_t> victim_groups_used_;  // the groups holding jobs this cycle
  uint32_t victim_order_stamp_ = 0;         // the cycle they were grouped in
  std::vector<ResourceVector> in_flight_;   // by queue (CountInFlight)
  std::vector<ResourceVector> awaiting_;    // by queue: its waiting preemptors' charges
  uint32_t in_flight_stamp_ = 0;
  std::vector<uint32_t> las_stamp_;         // by id: cycle stamp of las_level_
  std::vector<int> las_level_;
  int32_t lowest_priority_ = INT32_MAX;  // of the jobs ever enqueued or adopted
  int64_t cpu_only_pending_ = 0;
  size_t pending_count_ = 0;
  std::vector<std::vector<NodeId>> racks_;           // node groups by "rack" label
  std::vector<std::vector<NodeId>> blocks_;          // by "block" label (a block holds racks)
  std::vector<std::vector<NodeId>> nvlink_groups_;   // by "nvlink-domain" label, else per node
  ChargeIndex index_;
  bool has_nominal_quota_ = false;  // some queue has a nominal quota on some resource
};

}  // namespace tessera
