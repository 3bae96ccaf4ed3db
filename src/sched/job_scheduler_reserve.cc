// JobScheduler::Reserve (declared in job_scheduler.h): when and where a job that cannot
// start now would start as the running jobs end at their estimated times.
#include <algorithm>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "sched/job_scheduler.h"

namespace tessera {
namespace {

// A node-level estimate: free whole GPUs, CPU and memory per node as running jobs end;
// the job's tasks are fitted greedily, tightest node first. Shares count as one GPU;
// timeslice GPUs, which take shares only, do not count for a job with a whole-GPU task.
class FreeEstimate {
 public:
  FreeEstimate(const JobRecord& job, const ClusterState& state)
      : job_(job),
        state_(state),
        n_(state.node_count()),
        whole_(std::any_of(job.spec.tasks.begin(), job.spec.tasks.end(),
                           [](const TaskRequest& t) { return t.whole_gpus(); })),
        one_node_(job.spec.topology.scope == TopologyScope::kNode),
        one_place_(one_node_ || job.spec.tasks.size() == 1),
        tasks_(static_cast<int64_t>(job.spec.tasks.size())),
        like_(LikeTask()) {
    for (const TaskRequest& t : job.spec.tasks) {
      want_.gpus += t.gpu_count;
      want_.cpu += t.cpu.value();
      want_.memory += t.memory.value();
    }
    CountFree();
  }

  // The ended job's held allocations come free.
  void Release(const JobRecord& ending) {
    for (size_t t = 0; t < ending.allocations.size(); ++t) {
      if (!ending.Holds(t)) {
        continue;  // its node was lost: nothing comes free there
      }
      const Allocation& a = ending.allocations[t];
      Free& f = free_[a.node.value()];
      if (one_place_) {
        candidates_.push_back(a.node.value());
      }
      if (like_ != nullptr) {
        slots_ -= Holds(f);
      }
      int64_t gpus = 0;
      for (const GpuGrant& g : a.gpus) {
        gpus += Counts(state_.nodes()[a.node.value()].gpus()[static_cast<size_t>(g.gpu)]) ? 1 : 0;
      }
      f.gpus += gpus;
      f.cpu += a.cpu.value();
      f.memory += a.memory.value();
      if (like_ != nullptr) {
        slots_ += Holds(f);
      }
      free_gpus_ += gpus;  // held: never on a node that is gone
    }
  }

  // Whether the job fits now; its nodes into `nodes` when it does.
  bool Fits(std::vector<NodeId>* nodes) {
    if (free_gpus_ < want_.gpus) {
      return false;
    }
    if (one_place_) {
      return FitsOnePlace(nodes);
    }
    if (like_ != nullptr && slots_ < tasks_) {
      return false;
    }
    return FitsGreedily(nodes);
  }

 private:
  struct Free {
    int64_t gpus = 0, cpu = 0, memory = 0;
  };
  // Nodes that are gone never hold the reservation: they start below any demand (no held
  // allocation is ever on them, so nothing is released there).
  static constexpr int64_t kUnusable = int64_t{1} << 50;

  bool Counts(const GpuLedger& g) const { return !whole_ || g.mode() != SharingMode::kTimeslice; }

  // A gang of like tasks fits, tightest node first, exactly when the nodes hold as many
  // such tasks between them (a task placed takes one of its node's, and no other's):
  // that count is kept as nodes free up, and the greedy fit runs only once it suffices.
  // Null: the tasks differ, or take nothing (any node holds any number).
  const TaskRequest* LikeTask() const {
    if (one_place_ || tasks_ <= 1) {
      return nullptr;
    }
    const TaskRequest* like = &job_.spec.tasks[0];
    for (const TaskRequest& t : job_.spec.tasks) {
      if (t.gpu_count != like->gpu_count || t.cpu != like->cpu || t.memory != like->memory) {
        return nullptr;
      }
    }
    if (like->gpu_count <= 0 && like->cpu.value() <= 0 && like->memory.value() <= 0) {
      return nullptr;
    }
    return like;
  }

  // Like tasks a node's free room holds, at most the job's task count.
  int64_t Holds(const Free& f) const {
    int64_t k = tasks_;
    auto per = [&k](int64_t have, int64_t need) {
      if (need > 0) {
        k = std::min(k, std::max<int64_t>(have, 0) / need);
      }
    };
    per(f.gpus, like_->gpu_count);
    per(f.cpu, like_->cpu.value());
    per(f.memory, like_->memory.value());
    return k;
  }

  void CountFree() {
    free_.resize(n_);
    for (size_t i = 0; i < n_; ++i) {
      const NodeLedger& node = state_.nodes()[i];
      if (!state_.present(NodeId(static_cast<uint32_t>(i)))) {
        free_[i] = {-kUnusable, -kUnusable, -kUnusable};
        continue;
      }
      int64_t idle = 0;
      for (const GpuLedger& g : node.gpus()) {
        idle += g.idle() && Counts(g) ? 1 : 0;
      }
      free_[i] = {idle, node.free_cpu().value(), node.free_memory().value()};
      free_gpus_ += idle;
      if (one_place_ && free_[i].gpus >= want_.gpus && free_[i].cpu >= want_.cpu &&
          free_[i].memory >= want_.memory) {
        candidates_.push_back(static_cast<uint32_t>(i));
      }
      if (like_ != nullptr) {
        slots_ += Holds(free_[i]);
      }
    }
  }

  // Free capacity only grows as jobs end, so a job that needs one place can fit, at any
  // release, only on a node it fits now or on one freed since: those are all a check
  // looks at (and each check forgets the ones it found too small). It picks what a scan
  // of every node would (the first fit for scope node; for one task the tightest, then
  // the first), since no other node fits.
  bool FitsOnePlace(std::vector<NodeId>* nodes) {
    size_t best = n_;
    for (uint32_t i : candidates_) {
      const Free& f = free_[i];
      if (f.gpus < want_.gpus || f.cpu < want_.cpu || f.memory < want_.memory) {
        continue;
      }
      if (best == n_ ||
          (one_node_ ? i < best
                     : f.gpus < free_[best].gpus || (f.gpus == free_[best].gpus && i < best))) {
        best = i;
      }
    }
    candidates_.clear();
    if (best == n_) {
      return false;
    }
    nodes->assign(1, NodeId(static_cast<uint32_t>(best)));
    return true;
  }

  bool FitsGreedily(std::vector<NodeId>* nodes) {
    left_.assign(free_.begin(), free_.end());
    nodes->clear();
    for (const TaskRequest& t : job_.spec.tasks) {
      size_t best = n_;
      for (size_t i = 0; i < n_; ++i) {
        if (left_[i].gpus >= t.gpu_count && left_[i].cpu >= t.cpu.value() &&
            left_[i].memory >= t.memory.value() && (best == n_ || left_[i].gpus < left_[best].gpus)) {
          best = i;
        }
      }
      if (best == n_) {
        return false;
      }
      left_[best].gpus -= t.gpu_count;
      left_[best].cpu -= t.cpu.value();
      left_[best].memory -= t.memory.value();
      nodes->push_back(NodeId(static_cast<uint32_t>(best)));
    }
    return true;
  }

  const JobRecord& job_;
  const ClusterState& state_;
  const size_t n_;
  const bool whole_;
  const bool one_node_;   // one node takes the whole job: its tasks' sum (scope node)
  const bool one_place_;  // ... or its only task
  const int64_t tasks_;
  const TaskRequest* const like_;
  Free want_;
  std::vector<Free> free_;
  std::vector<Free> left_;  // FitsGreedily's scratch
  int64_t free_gpus_ = 0;
  int64_t slots_ = 0;  // like tasks the nodes hold, each node's count capped at tasks_
  std::vector<uint32_t> candidates_;
};

}  // namespace

std::optional<Reservation> JobScheduler::Reserve(const JobRecord& job,
                                                 const std::vector<JobRecord>& jobs,
                                                 const ClusterState& state, Micros now) const {
  FreeEstimate estimate(job, state);
  std::vector<std::pair<Micros, uint64_t>> ends;
  ends.reserve(running_.size());
  for (uint64_t id : running_) {
    const JobRecord& r = jobs[id];
    // A job started earlier in this cycle is still pending in its record: it starts now.
    const Micros start = r.phase == JobPhase::kPending ? now : r.run_start;
    Micros end = start + r.startup + (RuntimeEstimate(r) - r.resumed_from);
    if (r.phase == JobPhase::kStopping) {
      end = EvictionTime(r, now);
    }
    ends.emplace_back(std::max(end, now), id);
  }
  // A heap, not a sort: the reservation is usually found after a few releases.
  std::make_heap(ends.begin(), ends.end(), std::greater<>());
  std::vector<NodeId> nodes;
  while (!ends.empty()) {
    std::pop_heap(ends.begin(), ends.end(), std::greater<>());
    const auto [end, id] = ends.back();
    ends.pop_back();
    estimate.Release(jobs[id]);
    if (estimate.Fits(&nodes)) {
      std::sort(nodes.begin(), nodes.end());
      nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
      return Reservation{job.id, end, std::move(nodes)};
    }
  }
  return std::nullopt;
}

}  // namespace tessera
