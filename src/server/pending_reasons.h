// Why a pending job waits, from the core's own Filter plugins (plugins/fit_check.h):
//
//   never fits   the job could not run on the schedulable nodes even if they were empty
//                (FitCache, against every known node, up or down, and the drains,
//                rebuilt when they change);
//   down nodes   it could run only on known nodes that are down now: it waits for them;
//   quota        its queue cannot take its charge now: which resource, how much the
//                queue uses of its nominal quota, and when that quota is lent out, to
//                which borrowing queue and jobs and whether reclaim will take it back;
//   held by a drain / resources
//                it does not fit the live nodes now (LiveCache, a copy of the cluster
//                as of the last cycle): the resource that is short, or the drained
//                nodes that would hold it.
//
// Both caches answer per distinct demand, computed once and then shared by every read
// until the controller publishes the next wait context, so that API reads never wait
// for a scheduling cycle and a listing of many pending jobs costs a lookup each.
// Thread safety: both caches are immutable but for their internal, locked memo;
// call from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "model/gpu_catalog.h"
#include "model/job.h"
#include "plugins/fit_check.h"
#include "state/cluster_state.h"

namespace tessera {

// "Never fits" verdicts against the present nodes and their drains.
class FitCache {
 public:
  explicit FitCache(const ClusterState& live);
  // `fingerprint` of whatever the nodes were built from (server/known_nodes.h).
  FitCache(const ClusterState& nodes, uint64_t fingerprint);
  // Of the node set, the specs and the drains: equal fingerprints, equal verdicts.
  static uint64_t Fingerprint(const ClusterState& state);
  uint64_t fingerprint() const { return fingerprint_; }
  size_t nodes() const { return checker_.nodes(); }
  FitVerdict Check(const std::vector<TaskRequest>& tasks, const TopologyPolicy& topology) const;
  // Whether node `name`, empty and schedulable, could hold `task` alone.
  bool Holds(const std::string& name, const TaskRequest& task) const;

 private:
  FitChecker checker_;
  uint64_t fingerprint_;
  mutable Mutex mu_;
  mutable std::map<std::string, FitVerdict> memo_ GUARDED_BY(mu_);
};

// Why a job that could run on the empty nodes does not fit the live ones now.
class LiveCache {
 public:
  explicit LiveCache(const ClusterState& live);
  // "" when the whole gang fits now (it waits for its turn, not for resources).
  std::string Short(const std::vector<TaskRequest>& tasks, const TopologyPolicy& topology) const;

 private:
  std::string Compute(const std::vector<TaskRequest>& tasks, const TopologyPolicy& topology) const;

  FitChecker now_;
  mutable Mutex mu_;
  mutable std::map<std::string, std::string> memo_ GUARDED_BY(mu_);
};

struct WaitContext;
struct JobView;
struct LiveJob;
class JobTable;
class JobLifecycle;

// A job's reason as its view holds it (job_views.h). A pending job in memory that the
// gates keep back shows only `gate()`'s reason (asked of no other job; "": not gated).
// Else a pending job keeps only why it was requeued, if it was, with its restart's
// backoff (from `lifecycle`, the core's, over `jobs`' records) and its demand: why it
// waits now is worked out at read time from the wait context. A running job shows
// `note()` when it says something (what it is doing: its image's pull), else its row's.
void FillJobReason(const LiveJob& job, const JobTable& jobs, const JobLifecycle& lifecycle,
                   const GpuCatalog& catalog, const std::function<std::string()>& gate,
                   JobView& view, const std::function<std::string()>& note = {});

// At submission: InvalidArgument naming what is missing when the job could never run on
// the nodes of `context` (every known node, up or down, as if no drain held: drains end)
// and does not ask to be held; Ok when it could, when it asks to be held, and while no node is known (a
// cluster starting up).
Status CheckSubmissionFits(const WaitContext& context, const JobSpec& spec, bool hold_if_unfit);

}  // namespace tessera
