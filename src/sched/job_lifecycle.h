// JobLifecycle: the one state machine of a job's scheduling state, which every driver
// (the simulator, the server's controller, what-if runs) uses to apply a cycle's
// decisions and to report what happened to a job since.
//
//   submitted -> pending -(cycle starts it)-> running -(chosen as a victim)-> stopping
//   running | stopping -(every task gone)-> requeued (pending again) | finished
//   pending -(cancelled)-> finished
//
// A requeue may hold the job back until a time (a restart's backoff): it is pending
// but not offered to the scheduler until then (ReleaseDue, which RunCycle calls first).
//
// Identity: at Submit and Restore it stamps the job's shares with its tenant's identity
// (model/request.h TenantIdentity of the queue tree's tenant of its queue), and its
// allocations with their tasks' before they are held, so that every driver places
// shares under the single-user MPS rule alike (state/gpu_ledger.h).
//
// It owns the bookkeeping a driver would otherwise repeat: a started job's allocations
// and quota charge, the victims a preemptor waits for (counted at the decision, so a
// preemption is a signal whether or not the victim is then evicted), releasing in
// order (allocations in the ClusterState, the charge in the QuotaLedger, the
// scheduler's running set and fair-share usage), attained service, saved progress on
// requeue and the runtime predictor's observations. Drivers keep what is theirs: the
// simulator its events and outcomes, the server durability, agents and rows.
//
// The core it acts on (ClusterState, QuotaLedger, JobScheduler) is bound by the driver
// and may be rebound when the driver rebuilds it (the server does when its queue tree
// changes or it restarts); Restore then puts a job back. Node changes happen in place:
// the driver detaches a lost node's tasks and attaches those of a node that rejoined.
// While unbound, releases only settle the job.
//
// Invariants (CheckInvariants, which drivers run after every cycle): the ledgers hold
// exactly what the lifecycle placed (GPU and CPU totals), each queue's quota usage is
// the sum of its jobs' charges and within quota, every preemptor waits for exactly
// its victims still in flight, and the guarantee: a queue within its nominal quota is
// never preempted by another queue's job (a victim of another queue than its
// preemptor's comes from a queue that borrows, on a resource the victim holds, with
// the stops already in flight done), and none is taken below its nominal quota for a
// job of a queue then over its own. Checked as each preemption is applied; each breach
// is reported once, and counted (guarantee_breaches).
//
// Pure: time comes in as arguments. Thread safety: none; the driver serialises calls.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/clock.h"
#include "base/rng.h"
#include "base/status.h"
#include "sched/job_record.h"
#include "sched/job_scheduler.h"
#include "sched/runtime_predictor.h"
#include "state/cluster_state.h"
#include "state/quota_ledger.h"

namespace tessera {

struct LifecycleEvent {
  enum class Kind : uint8_t {
    kSubmitted,
    kStarted,
    kSignalled,  // chosen as a preemption victim; stopping until its tasks are gone
    kRequeued,   // an attempt ended early; pending again from its saved progress
    kFinished,
  };
  Kind kind = Kind::kSubmitted;
  Micros time = 0;
  JobId job;  // the job's id as the driver knows it (the record's, unless it renumbers)
  JobId by;                     // kSignalled: the preemptor
  bool backfilled = false;      // kStarted
  bool borrowing = false;       // kStarted
  Micros ran = 0;               // kRequeued, kFinished: this attempt's run time (0 if none)
  Micros saved = 0;             // kRequeued: the progress it resumes from
  double lost_gpu_seconds = 0;  // kRequeued: work thrown away
  RequeueCause cause = RequeueCause::kPreempted;  // kRequeued
  JobEnd end = JobEnd::kSucceeded;                // kFinished
  // The bound cluster state (null when unbound), for a listener to name nodes; valid
  // during the call only.
  const ClusterState* state = nullptr;
};

class LifecycleListener {
 public:
  virtual ~LifecycleListener() = default;
  // Called after the job's record reflects the event.
  virtual void OnJobEvent(const JobRecord& job, const LifecycleEvent& event) = 0;
};

class JobLifecycle {
 public:
  struct Options {
    bool uses_predictor = false;       // predict at submission, learn at success
    bool lossless_preemption = false;  // requeued jobs keep all their progress
  };
  // `jobs` is indexed by JobId and outlives the lifecycle; the driver may append to it.
  // `predictor` may be null (no predictions).
  JobLifecycle(std::vector<JobRecord>* jobs, const QueueTree* tree, RuntimePredictor* predictor,
               Options options);

  // The core to act on; any may be null (unbound).
  void Bind(ClusterState* state, QuotaLedger* quota, JobScheduler* scheduler);
  void set_listener(LifecycleListener* listener) { listener_ = listener; }
  void set_tree(const QueueTree* tree) { tree_ = tree; }
  bool bound() const { return state_ != nullptr && quota_ != nullptr && scheduler_ != nullptr; }

  // A job becomes pending for the first time (its id, spec, queue and gpu_milli set).
  void Submit(JobRecord& job, Micros now);
  // Runs one cycle of the bound scheduler and applies its decisions: started jobs run
  // (their tasks held), victims stop and their preemptors wait for them. Returns the
  // decisions, for the driver to carry out (launch tasks, signal victims).
  CycleResult RunCycle(Micros now, Rng& rng);
  // A running job is asked to stop for a reason of the driver's (cancelled, a failed
  // task of its gang, a lost node): it holds its resources until its attempt ends.
  void Stopping(JobRecord& job);
  // Task `task` of a running or stopping job lost its node: its allocation is released
  // now; the rest of the job is released when its attempt ends.
  void DetachTask(JobRecord& job, size_t task);
  // The inverse: task `task` of a running or stopping job is on a node that joined the
  // bound cluster since (after a driver restart, before its agent came back): its
  // allocation (node id set by the driver) is held again, the job's charge follows,
  // and a running job whose tasks are all held counts as running for the scheduler.
  // Internal error when it does not fit.
  Status AttachTask(JobRecord& job, size_t task);
  // A running or stopping job's attempt ended early: releases it and makes it pending
  // again from max(its periodic checkpoint, `checkpoint`) (all of its progress when
  // lossless), counting a preemption when it was stopping for another job. With
  // `not_before` after `now` the job is held back until then (HoldUntil).
  void Requeue(JobRecord& job, Micros checkpoint, RequeueCause cause, Micros now,
               Micros not_before = 0);
  // A pending job is not offered to the scheduler before `until` (a driver restoring a
  // restart's backoff after its own restart). Kept across Bind; ignored when not pending.
  void HoldUntil(JobRecord& job, Micros until);
  // When a held-back job is released; 0 when it is not held.
  Micros HeldUntil(JobId job) const;
  // Enqueues the held-back jobs whose time has come (bound only); returns them.
  std::vector<JobId> ReleaseDue(Micros now);
  // The driver keeps a pending job back until it calls Ungate (a dependency, a user's
  // hold, an array's throttle): it is not offered to the scheduler meanwhile, across
  // Bind, Restore and ReleaseDue. Ignored when not pending; a gated job stays gated if
  // it is requeued. Ungate enqueues it unless HoldUntil still holds it back.
  void Gate(JobRecord& job);
  void Ungate(JobRecord& job, Micros now);
  bool Gated(JobId job) const { return gated_.count(job.value()) != 0; }
  // The job is done: releases it when running or stopping, dequeues it when pending.
  // A success teaches the predictor the job's runtime (its progress at `now`).
  void Finish(JobRecord& job, JobEnd end, Micros now);

  // After Bind to a fresh core: puts a job back. Pending jobs are enqueued; running and
  // stopping ones get their held allocations (`held` true, nodes set by the driver to
  // the new ClusterState's ids) and their charge back, and a running one whose tasks
  // are all held counts as running for the scheduler. Internal error when a held
  // allocation no longer fits: that task is then not held, the rest is, and the job is
  // charged for what it holds (the driver should stop it).
  Status Restore(JobRecord& job);

  // What breaks the invariants above now; empty when they hold.
  std::vector<std::string> CheckInvariants() const;
  // Preemptions applied so far that took from a queue within its nominal quota for
  // another queue's job (0 while the guarantee holds).
  int64_t guarantee_breaches() const { return guarantee_breaches_; }

 private:
  void Emit(const JobRecord& job, const LifecycleEvent& event);
  // SetShareIdentity of the tenant of the job's queue (nothing without a tree).
  void StampIdentity(JobRecord& job) const;
  // Frees what a running or stopping job holds and accounts its service; returns the
  // attempt's run time.
  Micros Release(JobRecord& job, Micros now);
  void Hold(const Allocation& allocation, int sign);
  void Charge(const JobRecord& job, int sign);
  // A running job starts stopping: its charge counts as leaving its queue.
  void MarkStopping(JobRecord& job);
  // Records a breach of the guarantee if `victim`, about to stop for `preemptor`, is
  // of another queue that does not borrow (with the stops in flight done), or that
  // drops below its nominal quota for a preemptor whose queue is then over its own.
  // `started`: the charges of this cycle's starts, per queue.
  void CheckGuarantee(const JobRecord& victim, const JobRecord& preemptor,
                      const std::vector<ResourceVector>& started);
  // The job's charge for what it holds now, in the quota and the tally; a running job
  // holding all its tasks is adopted by the scheduler.
  void Recharge(JobRecord& job);

  std::vector<JobRecord>* jobs_;
  const QueueTree* tree_;
  RuntimePredictor* predictor_;
  Options options_;
  ClusterState* state_ = nullptr;
  QuotaLedger* quota_ = nullptr;
  JobScheduler* scheduler_ = nullptr;
  LifecycleListener* listener_ = nullptr;
  // What the lifecycle believes the bound core holds, to check the ledgers against.
  int64_t held_gpu_milli_ = 0;
  int64_t held_cpu_milli_ = 0;
  std::vector<ResourceVector> charged_;  // per queue
  std::vector<ResourceVector> stopping_;  // per queue: the part of charged_ stopping
  int64_t guarantee_breaches_ = 0;
  mutable int64_t breaches_reported_ = 0;  // by CheckInvariants, which reports each once
  std::string first_breach_;
  // Preemptor id -> its victims still stopping, tallied apart from the records.
  std::unordered_map<uint64_t, int> waits_;
  // Pending jobs held back until a time (restart backoff), by job id.
  std::unordered_map<uint64_t, Micros> held_until_;
  std::unordered_set<uint64_t> gated_;  // by JobId value
};

}  // namespace tessera
