#include "base/mutex.h"
#include "server/pending_reasons.h"

#include <algorithm>
#include <functional>
#include <string_view>

#include "api/units.h"
#include "base/time_format.h"
#include "sched/gpu_selection.h"
#include "sched/job_lifecycle.h"
#include "server/job_table.h"
#include "server/job_views.h"

namespace tessera {
namespace {

constexpr size_t kMaxMemo = 4096;  // distinct demands remembered per context

void Mix(uint64_t& h, uint64_t v) {
  h ^= std::hash<uint64_t>{}(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
}

// The memo key of a demand: its tasks run-length encoded (gangs repeat one task).
std::string KeyOf(const std::vector<TaskRequest>& tasks, const TopologyPolicy& topology) {
  std::string key = std::to_string(static_cast<int>(topology.scope)) + (topology.hard ? "h" : "s");
  for (size_t i = 0; i < tasks.size();) {
    size_t j = i;
    while (j < tasks.size() && tasks[j] == tasks[i]) {
      ++j;
    }
    const TaskRequest& t = tasks[i];
    key += "|" + std::to_string(j - i) + "x" + std::to_string(t.cpu.value()) + "," +
           std::to_string(t.memory.value()) + "," + std::to_string(t.gpu_count) + "," +
           std::to_string(t.gpu_milli.value()) + "," + std::to_string(t.gpu_memory.value()) + "," +
           t.mig_profile + "," + std::to_string(t.models.bits()) + "," +
           std::to_string(static_cast<int>(t.topology)) + "," + std::to_string(t.identity);
    i = j;
  }
  return key;
}

JobSpec SpecOf(const std::vector<TaskRequest>& tasks, const TopologyPolicy& topology) {
  JobSpec spec;
  spec.tasks = tasks;
  spec.topology = topology;
  return spec;
}

std::string Gpus(int64_t milli) {
  return milli % kMilliPerGpu == 0 ? std::to_string(milli / kMilliPerGpu)
                                   : FormatGpuFraction(milli);
}

std::string Cpus(int64_t milli) {
  return milli % 1000 == 0 ? std::to_string(milli / 1000) : FormatCpuMilli(milli);
}

// "8 GPUs", "16 GiB of GPU memory", ... for a quota resource.
std::string Amount(const ResourceName& r, int64_t v, const GpuCatalog& catalog) {
  switch (r.kind) {
    case ResourceKind::kGpu:
      return Gpus(v) + (r.model.valid() ? " " + catalog.Get(r.model).name : std::string()) +
             (v == kMilliPerGpu ? " GPU" : " GPUs");
    case ResourceKind::kGpuMemory:
      return FormatMiB(v) + " of GPU memory";
    case ResourceKind::kCpu:
      return Cpus(v) + " CPUs";
    case ResourceKind::kMemory:
      return FormatMiB(v) + " of memory";
  }
  return std::to_string(v);
}

// The cohort a queue takes part in: its root (where lending is settled), by name.
QueueId RootOf(const QueueTree& tree, QueueId q) {
  while (tree.parent(q).valid()) {
    q = tree.parent(q);
  }
  return q;
}

std::string QuotaReason(const PendingDemand& job, const WaitContext& c, const GpuCatalog& catalog) {
  if (c.quota == nullptr || c.tree == nullptr || c.charge.resources == 0) {
    return "";
  }
  const QueueTree& tree = *c.tree;
  StatusOr<QueueId> found = tree.FindQueue(job.queue);
  if (!found.ok()) {
    return "";
  }
  const QueueId q = found.value();
  // The scheduler's own charge and borrowing switch, so that the reason and what blocks
  // the job agree.
  const ResourceVector charge = PendingCharge(c.charge, job.gpu_milli, job.tasks, catalog);
  if (c.quota->Check(q, charge, c.borrowing) != QuotaFit::kNo) {
    return "";
  }
  for (size_t r = 0; r < charge.size() && r < tree.resources().size(); ++r) {
    if (charge[r] <= 0) {
      continue;
    }
    const int64_t used = c.quota->Usage(q, r);
    const int64_t nominal = tree.quota(q, r).nominal;
    const bool over_nominal = used + charge[r] > nominal;
    if (charge[r] <= c.quota->Available(q, r) && (c.borrowing || !over_nominal)) {
      continue;
    }
    const ResourceName& name = tree.resources()[r];
    const QueueId parent = tree.parent(q);
    const std::string cohort = parent.valid() ? " of cohort " + tree.spec(parent).name : "";
    std::string out = "waiting for quota: the job asks " + Amount(name, charge[r], catalog) +
                      "; queue " + job.queue + cohort + " uses " + Amount(name, used, catalog) +
                      " of its nominal " + Amount(name, nominal, catalog);
    if (over_nominal && !c.borrowing) {
      return out + "; the queue is at its own quota and borrowing is off under this policy";
    }
    if (over_nominal) {
      const int64_t room = c.quota->Available(q, r);
      return out + (parent.valid() ? " and can borrow only " + Amount(name, room, catalog) +
                                         " more from its cohort now"
                                   : " and has " + Amount(name, room, catalog) + " left");
    }
    // Within its nominal quota: what it lent is in use by borrowing queues.
    const QueueId root = RootOf(tree, q);
    ResourceVector mask(charge.size(), 0);
    mask[r] = 1;
    std::vector<std::string> borrowers;
    for (QueueId other : tree.queues()) {
      if (other != q && RootOf(tree, other) == root && c.quota->IsBorrowing(other, mask)) {
        borrowers.push_back(tree.spec(other).name);
      }
    }
    out += "; the rest of its quota is lent";
    if (borrowers.empty()) {
      return out + " and in use";
    }
    out += " to queue";
    out += borrowers.size() == 1 ? " " : "s ";
    for (size_t i = 0; i < borrowers.size(); ++i) {
      out += (i == 0 ? "" : ", ") + borrowers[i];
    }
    // The borrowing queues' running jobs, oldest first: the ones reclaim may take.
    std::vector<const Borrower*> jobs;
    for (const Borrower& b : c.borrowers) {
      if (std::find(borrowers.begin(), borrowers.end(), b.queue) != borrowers.end()) {
        jobs.push_back(&b);
      }
    }
    std::sort(jobs.begin(), jobs.end(),
              [](const Borrower* a, const Borrower* b) { return a->run_start < b->run_start; });
    if (!jobs.empty()) {
      out += " (job";
      out += jobs.size() == 1 ? " " : "s ";
      for (size_t i = 0; i < jobs.size() && i < 3; ++i) {
        out += (i == 0 ? "" : ", ") + ToString(jobs[i]->job);
      }
      out += jobs.size() > 3 ? " and " + std::to_string(jobs.size() - 3) + " more)" : ")";
    }
    if (!c.reclaim) {
      return out + "; reclaim is off in the policy: it waits for them to finish";
    }
    const auto victim =
        std::find_if(jobs.begin(), jobs.end(), [](const Borrower* b) { return b->preemptible; });
    if (!jobs.empty() && victim == jobs.end()) {
      return out + "; reclaim is on, but they are not preemptible: it waits for them to finish";
    }
    out += "; reclaim is on: they are preempted to give it back";
    if (c.min_run_before_reclaim > 0) {
      out += " once they have run " + FormatDuration(c.min_run_before_reclaim);
      if (victim != jobs.end()) {
        out += " (from " + FormatRfc3339((*victim)->run_start + c.min_run_before_reclaim) + ")";
      }
    }
    return out;
  }
  return "waiting for quota: queue " + job.queue +
         " and its cohort have no unused quota for it now";
}

// It fits the known nodes but not those up: the down nodes that would hold a task.
std::string DownReason(const PendingDemand& job, const WaitContext& c) {
  std::vector<const DownNode*> named;
  for (const DownNode& d : c.down) {
    const bool holds = std::any_of(job.tasks.begin(), job.tasks.end(),
                                   [&](const TaskRequest& t) { return c.fit->Holds(d.name, t); });
    if (holds) {
      named.push_back(&d);
    }
  }
  auto describe = [](const DownNode& d) {
    return d.name + ", which is down since " + FormatRfc3339(d.last_seen) +
           (d.reason.empty() ? std::string() : " (" + d.reason + ")");
  };
  const std::string tail = "; no node that is up could ever hold it";
  if (named.empty()) {
    // Only the gang as a whole needs them.
    std::string names;
    for (size_t i = 0; i < c.down.size() && i < 3; ++i) {
      names += (i == 0 ? "" : ", ") + c.down[i].name;
    }
    return "waiting for nodes that are down (" + names +
           (c.down.size() > 3 ? " and " + std::to_string(c.down.size() - 3) + " more" : "") + ")" +
           tail;
  }
  std::string out = "waiting for node " + describe(*named.front());
  if (named.size() > 1) {
    out += ", or " + std::to_string(named.size() - 1) + " other down node" +
           (named.size() == 2 ? "" : "s");
  }
  return out + tail;
}

}  // namespace

FitCache::FitCache(const ClusterState& live) : checker_(live), fingerprint_(Fingerprint(live)) {}

FitCache::FitCache(const ClusterState& nodes, uint64_t fingerprint)
    : checker_(nodes), fingerprint_(fingerprint) {}

bool FitCache::Holds(const std::string& name, const TaskRequest& task) const {
  if (checker_.nodes() == 0) {
    return false;
  }
  StatusOr<NodeId> id = checker_.state().FindNode(name);
  if (!id.ok()) {
    return false;
  }
  const NodeLedger& node = checker_.state().node(id.value());
  return !node.drained() && checker_.Filter(node, task).fits();
}

uint64_t FitCache::Fingerprint(const ClusterState& state) {
  uint64_t h = state.present_count();
  for (size_t i = 0; i < state.node_count(); ++i) {
    const NodeId id(static_cast<uint32_t>(i));
    if (!state.present(id)) {
      continue;
    }
    const NodeSpec& spec = state.spec(id);
    const NodeLedger& node = state.node(id);
    Mix(h, i);
    Mix(h, std::hash<std::string>{}(spec.name));
    Mix(h, static_cast<uint64_t>(spec.cpu.value()));
    Mix(h, static_cast<uint64_t>(spec.memory.value()));
    Mix(h, node.drained() ? 1 : 0);
    for (size_t g = 0; g < spec.gpus.size(); ++g) {
      const GpuSpec& gpu = spec.gpus[g];
      Mix(h, (static_cast<uint64_t>(gpu.model.value()) << 32) ^
                 (static_cast<uint64_t>(gpu.mode) << 24) ^
                 (static_cast<uint64_t>(gpu.numa_node & 0xff) << 16) ^
                 (static_cast<uint64_t>(gpu.nvlink_domain & 0xffff) << 1) ^
                 (node.gpus()[g].drained() ? 1 : 0));
    }
    for (const auto& [k, v] : spec.labels) {
      Mix(h, std::hash<std::string>{}(k + "=" + v));
    }
  }
  return h;
}

FitVerdict FitCache::Check(const std::vector<TaskRequest>& tasks,
                           const TopologyPolicy& topology) const {
  const std::string key = KeyOf(tasks, topology);
  {
    MutexLock lock(mu_);
    if (auto it = memo_.find(key); it != memo_.end()) {
      return it->second;
    }
  }
  FitVerdict v = checker_.Check(SpecOf(tasks, topology));
  MutexLock lock(mu_);
  if (memo_.size() >= kMaxMemo) {
    memo_.clear();
  }
  memo_.emplace(key, v);
  return v;
}

LiveCache::LiveCache(const ClusterState& live) : now_(live, FitChecker::Copy::kAsIs) {}

std::string LiveCache::Short(const std::vector<TaskRequest>& tasks,
                             const TopologyPolicy& topology) const {
  const std::string key = KeyOf(tasks, topology);
  {
    MutexLock lock(mu_);
    if (auto it = memo_.find(key); it != memo_.end()) {
      return it->second;
    }
  }
  std::string why = Compute(tasks, topology);
  MutexLock lock(mu_);
  if (memo_.size() >= kMaxMemo) {
    memo_.clear();
  }
  memo_.emplace(key, why);
  return why;
}

std::string LiveCache::Compute(const std::vector<TaskRequest>& tasks,
                               const TopologyPolicy& topology) const {
  const JobSpec spec = SpecOf(tasks, topology);
  if (now_.GangPlaces(spec)) {
    return "";
  }
  const ClusterState& state = now_.state();
  const GpuCatalog& catalog = state.catalog();
  int64_t gpus = 0;
  for (const TaskRequest& t : tasks) {
    gpus += t.gpu_count;
  }
  // The first task that fits no schedulable node alone names the resource.
  for (const TaskRequest& t : tasks) {
    std::map<FilterCause, int> busy;        // not-now filter causes, by node count
    std::vector<std::string> drained_room;  // drained nodes that would take it
    bool fits = false;
    int most_free_gpus = 0, free_gpus = 0;
    int64_t most_cpu = 0, most_memory = 0;
    for (size_t i = 0; i < state.node_count() && !fits; ++i) {
      const NodeId id(static_cast<uint32_t>(i));
      if (!state.present(id)) {
        continue;
      }
      const NodeLedger& node = state.node(id);
      const FilterResult r = now_.Filter(node, t);
      if (node.drained()) {
        if (r.fits()) {
          drained_room.push_back(node.spec().name);
        }
        continue;
      }
      if (r.fits()) {
        fits = true;
        break;
      }
      if (r.code != FilterCode::kUnschedulable) {
        continue;  // never on this node: not what it waits for
      }
      ++busy[r.cause];
      int here = 0;
      for (const GpuLedger& gpu : node.gpus()) {
        here += !t.cpu_only() && GpuFitsRequest(gpu, t) ? 1 : 0;
      }
      free_gpus += here;
      most_free_gpus = std::max(most_free_gpus, here);
      most_cpu = std::max(most_cpu, node.free_cpu().value());
      most_memory = std::max(most_memory, node.free_memory().value());
    }
    if (fits) {
      continue;
    }
    if (!drained_room.empty()) {
      return "held by a drain: drained node" + std::string(drained_room.size() == 1 ? " " : "s ") +
             drained_room.front() + (drained_room.size() > 1 ? " and others" : "") +
             " would hold a task now; the schedulable nodes are busy";
    }
    FilterCause top = FilterCause::kNone;
    int most = 0;
    for (const auto& [cause, n] : busy) {
      if (n > most) {
        top = cause;
        most = n;
      }
    }
    std::string kind = t.wants_mig() ? "MIG " + t.mig_profile + " instance"
                       : t.fractional()
                           ? "GPU with " + FormatGpuFraction(t.gpu_milli.value()) + " of a GPU" +
                                 (t.gpu_memory.value() > 0
                                      ? " and " + FormatMiB(t.gpu_memory.value()) + " of its memory"
                                      : std::string()) +
                                 " free"
                           : std::string("free GPU");
    if (!t.models.empty()) {
      std::string models;
      for (const GpuModel& m : catalog.models()) {
        if (t.models.Contains(m.id)) {
          models += (models.empty() ? "" : "/") + m.name;
        }
      }
      kind = models + " " + kind;
    }
    if (top == FilterCause::kCpu) {
      return "waiting for resources: a task needs " + Cpus(t.cpu.value()) +
             " free CPUs on one node; the most free on a schedulable node is " + Cpus(most_cpu) +
             "; jobs ahead of it or running hold them";
    }
    if (top == FilterCause::kMemory) {
      return "waiting for resources: a task needs " + FormatMiB(t.memory.value()) +
             " of free memory on one node; the most free on a schedulable node is " +
             FormatMiB(most_memory) + "; jobs ahead of it or running hold them";
    }
    if (top == FilterCause::kMig) {
      return "waiting for resources: no schedulable GPU has a free slot for a MIG " +
             t.mig_profile + " instance now; jobs ahead of it or running hold them";
    }
    if (top == FilterCause::kMpsUser) {
      return "waiting for resources: the shared GPUs with room for a task hold another "
             "tenant's shares, and their MPS serves one Unix user per GPU at a time (the "
             "node has no mps-multi-user=on); it starts when those shares end";
    }
    if (top == FilterCause::kLocality) {
      return "waiting for resources: a task needs " + std::to_string(t.gpu_count) +
             " free GPUs in one NVLink domain or NUMA node; no schedulable node has them now";
    }
    return "waiting for resources: a task needs " + std::to_string(t.gpu_count) + " " + kind +
           (t.gpu_count == 1 ? "" : "s") + " on one node; the most on a schedulable node is " +
           std::to_string(most_free_gpus) + " (" + std::to_string(free_gpus) +
           " in all); jobs ahead of it or running hold them";
  }
  // Each task fits somewhere alone, not the gang together.
  std::string where = topology.hard && topology.scope != TopologyScope::kAny
                          ? " within one " + std::string(TopologyScopeName(topology.scope))
                          : std::string();
  return "waiting for resources: the gang's " + std::to_string(tasks.size()) + " tasks (" +
         std::to_string(gpus) + " GPUs) do not fit together" + where +
         " now; jobs ahead of it or running hold the rest";
}

void FillJobReason(const LiveJob& job, const JobTable& jobs, const JobLifecycle& lifecycle,
                   const GpuCatalog& catalog, const std::function<std::string()>& gate,
                   JobView& view, const std::function<std::string()>& note) {
  const JobState state = jobs.StateOf(job);
  view.pending = state == JobState::kPending;
  view.reason = job.row.reason;
  if (state == JobState::kRunning && note) {
    if (std::string now = note(); !now.empty()) {
      view.reason = std::move(now);
      return;
    }
  }
  const bool archived = job.slot == JobTable::kArchived;
  if (view.pending && !archived) {
    if (std::string why = gate(); !why.empty()) {
      view.gated = true;
      view.reason = std::move(why);
      return;
    }
  }
  if (!view.pending) {
    return;
  }
  // Why it was requeued, if it was, then (at read time) why it waits now.
  const bool requeued = view.reason.rfind("requeued", 0) == 0 ||
                        view.reason.rfind("preempted", 0) == 0 ||
                        view.reason.rfind("restarting", 0) == 0;
  if (!requeued) {
    view.reason.clear();
  }
  if (!archived) {
    view.restart_at = lifecycle.HeldUntil(jobs.Rec(job).id);  // its backoff
  }
  // The core's copy of the spec: its shares carry the tenant's identity (MPS rule).
  view.demand = DemandOf(job.id(), job.row.queue,
                         archived ? job.submission.spec : jobs.Rec(job).spec, catalog);
}

Status CheckSubmissionFits(const WaitContext& c, const JobSpec& spec, bool hold_if_unfit) {
  // Drains end: a job that fits only drained nodes is kept, and its reason says so.
  const FitCache* fit = c.fit_undrained != nullptr ? c.fit_undrained.get() : c.fit.get();
  if (hold_if_unfit || fit == nullptr || fit->nodes() == 0) {
    return Status::Ok();
  }
  FitVerdict v = fit->Check(spec.tasks, spec.topology);
  if (v.fits || v.no_schedulable_node) {
    return Status::Ok();
  }
  return InvalidArgumentError(v.reason +
                              " (set hold_if_unfit, `tessera submit --hold-if-unfit`, to keep "
                              "it pending until nodes that fit it join)");
}

std::string PendingReasonOf(const PendingDemand& job, const WaitContext& c,
                            const GpuCatalog& catalog) {
  if (!c.built) {
    return "waiting for the next scheduling cycle";
  }
  if (c.nodes_up == 0) {
    return "no node is up";
  }
  if (c.fit != nullptr) {
    if (FitVerdict v = c.fit->Check(job.tasks, job.topology); !v.fits) {
      if (!v.no_schedulable_node && c.fit_undrained != nullptr &&
          c.fit_undrained->Check(job.tasks, job.topology).fits) {
        return "held by a drain: only drained nodes or GPUs could run it; it starts when a "
               "drain ends (`tessera nodes` shows them; " + v.reason + ")";
      }
      return v.reason;
    }
  }
  if (c.fit != nullptr && c.fit_up != nullptr && !c.down.empty()) {
    if (FitVerdict v = c.fit_up->Check(job.tasks, job.topology); !v.fits) {
      return v.no_schedulable_node ? v.reason : DownReason(job, c);
    }
  }
  if (auto held = c.held_victims.find(job.job); held != c.held_victims.end()) {
    return "waiting for job " + ToString(held->second.preemptor) +
           ", which it was preempted for, to start first (at most until " +
           FormatRfc3339(held->second.until) + ")";
  }
  if (c.reserved_job.valid() && c.reserved_job == job.job) {
    return "next to start: resources are reserved for it (expected " +
           FormatRfc3339(c.reserved_start) + ")";
  }
  if (std::string quota = QuotaReason(job, c, catalog); !quota.empty()) {
    return quota;
  }
  if (c.live != nullptr) {
    std::string short_of = c.live->Short(job.tasks, job.topology);
    if (!short_of.empty()) {
      return short_of;
    }
    if (c.reserved_job.valid()) {
      return "waiting for its turn: it fits now, but resources are reserved for job " +
             ToString(c.reserved_job) + " (expected " + FormatRfc3339(c.reserved_start) + ")";
    }
    return "waiting for its turn: it fits the free resources now; jobs ahead of it go first "
           "(at the next scheduling cycle)";
  }
  // No live copy: nothing was pending at the last cycle, so the job came after it.
  return "waiting for the next scheduling cycle";
}

}  // namespace tessera
