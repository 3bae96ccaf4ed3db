// PublishedJobs: the jobs as the API reads them (GET /v1/jobs and /v1/jobs/{id}),
// published by the controller whenever a job changes, so that reads take only this
// table's lock, never the controller's, which a scheduling cycle holds for its length.
//
// A view is immutable once published; a change publishes a new one (readers keep the
// one they hold). A pending job's reason is not part of its view: it is worked out at
// read time from the job's demand and the wait context the controller publishes after
// every cycle, so it is as of the last cycle without the cycle rewriting the view of
// every pending job. Jobs archived out of the controller's memory leave the table; the
// controller answers for them from the store.
// Thread safety: every method may be called from any thread; none holds the table's
// lock for more than a short, bounded step.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/clock.h"
#include "base/shared_text.h"
#include "model/gpu_catalog.h"
#include "model/job.h"
#include "model/node.h"
#include "model/queue_tree.h"
#include "sched/job_scheduler.h"
#include "server/http/auth.h"
#include "server/job_eta.h"
#include "server/job_number.h"
#include "state/quota_ledger.h"

namespace tessera {

// Filters of a job listing; empty means any.
struct JobFilter {
  std::vector<std::string> states;
  std::string queue;
  std::string tenant;
  std::string user;
  size_t limit = 1000;
};

class FitCache;
class LiveCache;
// A running job of a queue that borrows, for quota reasons.
struct Borrower {
  std::string queue;
  JobNumber job;
  Micros run_start = 0;
  bool preemptible = true;  // reclaim may take only preemptible jobs
};

// A known node whose agent is silent (or not back since a controller restart).
struct DownNode {
  std::string name;
  std::string reason;  // why it is down
  Micros last_seen = 0;
};

// What pending jobs' reasons are worked out from, as of the last cycle
// (server/pending_reasons.h).
struct WaitContext {
  bool built = false;  // false: the core is built at the next cycle
  size_t nodes_up = 0;
  JobNumber reserved_job;     // the job resources are reserved for (invalid: none)
  Micros reserved_start = 0;  // when it is expected to start
  // The queues' quota usage; `tree` keeps the ledger's tree alive. Null: not built.
  std::shared_ptr<const QueueTree> tree;
  std::shared_ptr<const QuotaLedger> quota;
  // Where a pending job's demand is charged among the quota's resources (PendingCharge,
  // as the scheduler charges it).
  ChargeIndex charge;
  // "Never fits" against every node the controller knows, up or down, and their drains;
  // the same against the nodes that are up (a job that fits only nodes that are down
  // waits for them); both kept while the nodes do not change and republished when they
  // do. The live nodes as of the last cycle (null when no job was pending).
  std::shared_ptr<const FitCache> fit;
  std::shared_ptr<const FitCache> fit_up;
  // Every known node as if no drain held: a job refused at submission only when it could
  // not run even once the drains end (draining a model's only node queues its jobs).
  std::shared_ptr<const FitCache> fit_undrained;
  std::vector<DownNode> down;  // the known nodes that are down, by name
  std::shared_ptr<const LiveCache> live;
  // The policy's borrowing switch (a queue over its nominal quota waits when off) and
  // its reclaim rule, and the running jobs of borrowing queues.
  bool borrowing = true;
  bool reclaim = false;
  Micros min_run_before_reclaim = 0;
  std::vector<Borrower> borrowers;
  // Evicted jobs that wait for the job they were evicted for to start
  // (SchedulerOptions::victim_hold): the victim, its preemptor, until when at most.
  struct HeldVictim {
    JobNumber preemptor;
    Micros until = 0;
  };
  std::map<JobNumber, HeldVictim> held_victims;
};

// What a pending job asks for, for its reason.
struct PendingDemand {
  JobNumber job;
  std::string queue;
  std::vector<TaskRequest> tasks;
  TopologyPolicy topology;
  int64_t gpu_milli = 0, cpu = 0, memory = 0, gpu_memory = 0;  // totals over its tasks
  int gpus = 0;
};

PendingDemand DemandOf(JobNumber id, const std::string& queue, const JobSpec& spec,
                       const GpuCatalog& catalog);
// Why the job waits, in words a user can act on (server/pending_reasons.cc).
std::string PendingReasonOf(const PendingDemand& job, const WaitContext& context,
                            const GpuCatalog& catalog);

struct JobView {
  JobNumber id;
  std::string tenant, queue, state;
  std::string user;  // the spec's user ("" when none)
  // The job's JSON object without its closing brace, "spec" and "reason".
  std::string body;
  SharedText spec;  // the stored spec text (shared with the job's row); empty: null
  // Not pending: the reason. Pending: why it was requeued, if it was ("" otherwise);
  // why it waits now is added at read time.
  std::string reason;
  bool pending = false;
  // A restart waiting out its backoff (api/restart_policy.h): until then the reason is
  // `reason` and the time left; 0: none.
  Micros restart_at = 0;
  // Kept back by a hold, a dependency, a singleton or its array's throttle
  // (modules/job_gates_module.h): `reason` says which, and is the whole reason.
  bool gated = false;
  int tasks = 0;         // the gang's size (its logs are tasks 0..tasks-1)
  PendingDemand demand;  // when pending
};

class PublishedJobs {
 public:
  explicit PublishedJobs(const GpuCatalog& catalog) : catalog_(&catalog) {}
  // For a restart's time left; set before the first read.
  void set_clock(const Clock* clock) { clock_ = clock; }

  void Put(std::shared_ptr<const JobView> view);
  void Erase(JobNumber id);
  // Published jobs of `queue` that are pending now (held and gated ones included).
  size_t PendingIn(const std::string& queue) const;
  void SetContext(std::shared_ptr<const WaitContext> context);
  // The last ETA refresh (job_eta.h): a pending job's text shows its entry.
  void SetEtas(std::shared_ptr<const EtaTable> etas);
  std::shared_ptr<const EtaTable> etas() const;
  std::shared_ptr<const WaitContext> context() const;
  // The reason a job shows now (a pending one's worked out from the context).
  std::string ReasonOf(const JobView& view) const;

  // Null when the job is not published (unknown, not yet durable, or archived).
  std::shared_ptr<const JobView> Get(JobNumber id) const;
  // The job's JSON text as GET /v1/jobs/{id} shows it.
  std::string Text(const JobView& view) const;

  // Newest first from below `after` (JobNumber(0), below every id: from the newest): at most
  // `limit` jobs visible to `who` that pass `filter`; `more` when others follow the last one. A
  // page costs its own rows (and the jobs it skips), not the whole table.
  struct Page {
    std::vector<std::shared_ptr<const JobView>> jobs;
    bool more = false;
  };
  Page List(const Principal& who, const JobFilter& filter, JobNumber after, size_t limit) const;

  static bool Visible(const Principal& who, const std::string& tenant) {
    return who.role == Role::kAdmin || (who.role == Role::kTenant && who.tenant == tenant);
  }

 private:
  const GpuCatalog* catalog_;
  const Clock* clock_ = nullptr;
  // A plain mutex, held for a lookup, an insert or a bounded step of a listing's walk:
  // a reader-preferring lock could starve the controller's publishing under read load.
  mutable Mutex mu_;
  std::map<JobNumber, std::shared_ptr<const JobView>> jobs_ GUARDED_BY(mu_);
  std::map<std::string, size_t> pending_by_queue_ GUARDED_BY(mu_);  // kept with jobs_ (PendingIn)
  // Each tenant's jobs, kept with jobs_: a tenant's listing walks its own jobs, not
  // every other tenant's (one tenant's 50,000 pending jobs once cost another's listing
  // of 100 rows 20 ms).
  std::map<std::string, std::set<JobNumber>, std::less<>> by_tenant_ GUARDED_BY(mu_);
  void Unpend(const JobView& view) REQUIRES(mu_);  // `view` leaves the pending counts
  std::shared_ptr<const WaitContext> context_ GUARDED_BY(mu_) = std::make_shared<WaitContext>();
  std::shared_ptr<const EtaTable> etas_ GUARDED_BY(mu_);  // null until the first refresh
};

}  // namespace tessera
