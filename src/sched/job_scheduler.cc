#include "sched/job_scheduler.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <queue>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "sched/job_scheduler_internal.h"

namespace tessera {
namespace {

using job_scheduler_internal::FreeMilli;
using job_scheduler_internal::kNotRunning;
using job_scheduler_internal::LedgerOverlay;
using job_scheduler_internal::MustSucceed;

// Groups nodes by a label's value; nodes without it form groups of their own.
std::vector<std::vector<NodeId>> GroupByLabel(const ClusterState& state, std::string_view key) {
  std::vector<std::vector<NodeId>> groups;
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < state.node_count(); ++i) {
    NodeId id(static_cast<uint32_t>(i));
    if (!state.present(id)) {
      continue;
    }
    std::string_view value = state.spec(id).Label(key);
    if (value.empty()) {
      groups.push_back({id});
      continue;
    }
    auto [it, inserted] = index.try_emplace(std::string(value), groups.size());
    if (inserted) {
      groups.emplace_back();
    }
    groups[it->second].push_back(id);
  }
  return groups;
}

int64_t TotalMemory(const ClusterState& state) {
  int64_t m = 0;
  for (const NodeLedger& n : state.nodes()) {
    m += n.spec().memory.value();  // 0 for an absent node
  }
  return m;
}

}  // namespace

ChargeIndex ChargeIndex::Of(const QueueTree& tree, const GpuCatalog& catalog) {
  ChargeIndex index;
  const auto& resources = tree.resources();
  index.resources = resources.size();
  index.per_model.assign(catalog.models().size(), -1);
  for (size_t r = 0; r < resources.size(); ++r) {
    const ResourceName& n = resources[r];
    const int at = static_cast<int>(r);
    switch (n.kind) {
      case ResourceKind::kGpu:
        if (!n.model.valid()) {
          index.any_gpu = at;
        } else if (n.model.value() < index.per_model.size()) {
          index.per_model[n.model.value()] = at;
        }
        break;
      case ResourceKind::kGpuMemory:
        index.gpu_memory = at;
        break;
      case ResourceKind::kCpu:
        index.cpu = at;
        break;
      case ResourceKind::kMemory:
        index.memory = at;
        break;
    }
  }
  return index;
}

ResourceVector PendingCharge(const ChargeIndex& index, int64_t gpu_milli,
                             const std::vector<TaskRequest>& tasks, const GpuCatalog& catalog) {
  ResourceVector charge(index.resources, 0);
  if (charge.empty()) {
    return charge;
  }
  auto add = [&charge](int at, int64_t v) {
    if (at >= 0 && static_cast<size_t>(at) < charge.size()) {
      charge[static_cast<size_t>(at)] += v;
    }
  };
  add(index.any_gpu, gpu_milli);
  for (const TaskRequest& t : tasks) {
    add(index.cpu, t.cpu.value());
    add(index.memory, t.memory.value());
    add(index.gpu_memory, t.gpu_memory.value() * t.gpu_count);
    // Held to one model: its placement is charged to that model's quota.
    if (t.gpu_count > 0 && t.models.size() == 1) {
      for (size_t m = 0; m < index.per_model.size(); ++m) {
        if (index.per_model[m] >= 0 && m < GpuModelSet::kMaxModels &&
            t.models.Contains(GpuModelId(static_cast<uint16_t>(m)))) {
          add(index.per_model[m], t.TotalGpuMilli(catalog).value());
        }
      }
    }
  }
  return charge;
}

JobScheduler::JobScheduler(const QueueTree& tree, const ClusterState& state,
                           SchedulerOptions options, std::unique_ptr<JobOrderPlugin> job_order,
                           std::unique_ptr<QueueOrderPlugin> queue_order, Profile placement,
                           Micros fairshare_half_life)
    : tree_(&tree),
      options_(std::move(options)),
      job_order_(std::move(job_order)),
      queue_order_(std::move(queue_order)),
      placer_(std::move(placement)),
      usage_(tree, state.total_gpu_milli().value(), state.total_cpu().value(), TotalMemory(state),
             fairshare_half_life),
      queues_(tree.size()),
      racks_(GroupByLabel(state, "rack")),
      blocks_(GroupByLabel(state, "block")),
      nvlink_groups_(GroupByLabel(state, "nvlink-domain")) {
  index_ = ChargeIndex::Of(tree, state.catalog());
  for (QueueId q : tree.queues()) {
    for (size_t r = 0; r < tree.resources().size(); ++r) {
      has_nominal_quota_ = has_nominal_quota_ || tree.quota(q, r).nominal > 0;
    }
  }
}

// ---- bookkeeping -------------------------------------------------------------

void JobScheduler::NodesChanged(const ClusterState& state, Profile placement) {
  usage_.SetCapacity(state.total_gpu_milli().value(), state.total_cpu().value(),
                     TotalMemory(state));
  racks_ = GroupByLabel(state, "rack");
  blocks_ = GroupByLabel(state, "block");
  nvlink_groups_ = GroupByLabel(state, "nvlink-domain");
  placer_ = Placer(std::move(placement));
}

void JobScheduler::Enqueue(const JobRecord& job, Micros now) {
  const uint64_t id = job.id.value();
  if (entry_of_.size() <= id) {
    entry_of_.resize(id + 1);
  }
  if (entry_of_[id]) {
    return;
  }
  const bool by_priority = job_order_ == nullptr || job_order_->by_priority();
  double key = job_order_ ? job_order_->Key(job, now) : 0.0;
  if (options_.resume_first && job.preemptions > 0) {
    key -= 1e15;  // ahead of every job that never ran, in the same order among themselves
  }
  Entry e{by_priority ? -static_cast<int64_t>(job.spec.priority) : 0, key, job.spec.submit_time,
          id};
  lowest_priority_ = std::min(lowest_priority_, job.spec.priority);
  queues_[job.queue.value()].jobs.insert(e);
  if (options_.user_fair_share) {
    queues_[job.queue.value()].by_user[UserSlotOf(job)].insert(e);
  }
  by_eligible_.emplace(job.eligible_since, id);
  entry_of_[id] = e;
  ++pending_count_;
  if (job.gpu_milli == 0) {
    ++cpu_only_pending_;
  }
}

void JobScheduler::Dequeue(const JobRecord& job) {
  const uint64_t id = job.id.value();
  if (id >= entry_of_.size() || !entry_of_[id]) {
    return;
  }
  queues_[job.queue.value()].jobs.erase(*entry_of_[id]);
  if (options_.user_fair_share) {
    auto& by_user = queues_[job.queue.value()].by_user;
    auto it = by_user.find(UserSlotOf(job));
    if (it != by_user.end() && (it->second.erase(*entry_of_[id]), it->second.empty())) {
      by_user.erase(it);
    }
  }
  by_eligible_.erase({job.eligible_since, id});
  entry_of_[id].reset();
  --pending_count_;
  if (job.gpu_milli == 0) {
    --cpu_only_pending_;
  }
}

void JobScheduler::Forget(const JobRecord& job) {
  std::erase(preemptors_, job.id.value());
}

void JobScheduler::Released(const JobRecord& job, Micros now) {
  if (now >= 0) {
    usage_.Advance(now);
  }
  usage_.Remove(job.queue, job.allocations);
  if (options_.user_fair_share) {
    usage_.RemoveUser(UserSlotOf(job), job.allocations);
  }
  const uint64_t id = job.id.value();
  if (id < running_pos_.size() && running_pos_[id] != kNotRunning) {
    size_t pos = running_pos_[id];
    uint64_t last = running_.back();
    running_[pos] = last;
    running_pos_[last] = pos;
    running_.pop_back();
    running_pos_[id] = kNotRunning;
  }
}

void JobScheduler::Adopt(const JobRecord& job) {
  const uint64_t id = job.id.value();
  if (running_pos_.size() <= id) {
    running_pos_.resize(id + 1, kNotRunning);
  }
  if (running_pos_[id] != kNotRunning) {
    return;
  }
  lowest_priority_ = std::min(lowest_priority_, job.spec.priority);
  usage_.Add(job.queue, job.allocations);
  if (options_.user_fair_share) {
    usage_.AddUser(UserSlotOf(job), job.allocations);
  }
  running_pos_[id] = running_.size();
  running_.push_back(id);
}

// ---- charges, estimates --------------------------------------------------------

ResourceVector JobScheduler::ChargeOf(const JobRecord& job,
                                      const std::vector<Allocation>* allocations,
                                      const ClusterState& state) const {
  ResourceVector charge(tree_->resources().size(), 0);
  if (charge.empty()) {
    return charge;
  }
  auto add = [&charge](int index, int64_t v) {
    if (index >= 0) {
      charge[static_cast<size_t>(index)] += v;
    }
  };
  if (allocations == nullptr) {
    return PendingCharge(index_, job.gpu_milli, job.spec.tasks, state.catalog());
  }
  for (const Allocation& a : *allocations) {
    add(index_.cpu, a.cpu.value());
    add(index_.memory, a.memory.value());
    const NodeSpec& spec = state.spec(a.node);
    for (const GpuGrant& g : a.gpus) {
      add(index_.any_gpu, g.milli.value());
      add(index_.gpu_memory, g.memory.value());
      const GpuModelId model = spec.gpus[static_cast<size_t>(g.gpu)].model;
      if (model.value() < index_.per_model.size()) {
        add(index_.per_model[model.value()], g.milli.value());
      }
    }
  }
  return charge;
}

int JobScheduler::LasLevel(const JobRecord& job, Micros now) const {
  double attained = job.attained_gpu_seconds;
  if (InAttempt(job.phase)) {
    attained += static_cast<double>(job.gpu_milli) / 1000.0 *
                static_cast<double>(now - job.run_start) / 1e6;
  }
  int level = 0;
  for (double t : options_.las_thresholds) {
    if (attained >= t) {
      ++level;
    }
  }
  return level;
}

Micros JobScheduler::RuntimeEstimate(const JobRecord& job) const {
  switch (options_.runtime_source) {
    case RuntimeSource::kOracle:
      if (job.oracle_runtime >= 0) {
        return job.oracle_runtime;
      }
      break;
    case RuntimeSource::kPredicted:
      if (job.predicted_runtime > 0) {
        return job.predicted_runtime;
      }
      break;
    case RuntimeSource::kUserLimit:
      break;
  }
  if (job.spec.runtime_limit > 0) {
    return job.spec.runtime_limit;
  }
  return job.predicted_runtime > 0 ? job.predicted_runtime : 3600LL * 1'000'000;
}

Micros JobScheduler::EvictionTime(const JobRecord& victim, Micros now) const {
  const Micros after_grace = now + options_.grace;
  const Micros interval = victim.spec.checkpoint_interval;
  // A job that also checkpoints on the signal waits for its periodic checkpoint all
  // the same: it would lose nothing either way, and evicting it sooner only makes
  // preemptions cheaper to trigger (more of them, each with its restart overhead).
  if (options_.checkpoint_wait <= 0 || interval <= 0) {
    return after_grace;
  }
  const Micros progress = victim.Progress(now);
  const Micros next = (progress / interval + 1) * interval;  // next checkpoint, in progress
  // Progress stands still during a resumption's start-up: the checkpoint comes later.
  const Micros startup_left = std::max<Micros>(0, victim.run_start + victim.startup - now);
  const Micros at = now + (progress % interval == 0 && startup_left == 0
                               ? 0
                               : startup_left + next - progress);
  return at <= now + options_.checkpoint_wait ? at : after_grace;
}

double JobScheduler::VictimCost(const JobRecord& victim, Micros now) const {
  // Every resumption costs the restart overhead on all the victim's GPUs.
  const double gpus = static_cast<double>(victim.gpu_milli) / 1000.0;
  const double restart = gpus * static_cast<double>(options_.restart_overhead) / 1e6;
  return restart + gpus * static_cast<double>(WorkLostIfEvicted(victim, now)) / 1e6;
}

Micros JobScheduler::WorkLostIfEvicted(const JobRecord& victim, Micros now) const {
  if (options_.lossless_preemption) {
    return 0;
  }
  // The victim keeps running until its eviction, then loses what it has not saved.
  const Micros at = EvictionTime(victim, now);
  return victim.Progress(at) - victim.SavedProgress(at, victim.spec.checkpoint_on_signal);
}

// ---- placement -------------------------------------------------------------------

void JobScheduler::Unplace(ClusterState& state, const std::vector<Allocation>& allocations) {
  for (auto it = allocations.rbegin(); it != allocations.rend(); ++it) {
    MustSucceed(state.Release(*it));
  }
}

bool JobScheduler::PlaceTasksWithin(const JobRecord& job, ClusterState& state, Rng& rng,
                                    std::span<const NodeId> nodes, std::vector<Allocation>* out) {
  out->clear();
  for (const TaskRequest& task : job.spec.tasks) {
    Placement p = nodes.empty() ? placer_.Place(state, task, rng)
                                : placer_.PlaceWithin(state, task, nodes, rng);
    if (!p.placed || !state.Allocate(p.allocation).ok()) {
      Unplace(state, *out);
      out->clear();
      return false;
    }
    out->push_back(std::move(p.allocation));
  }
  return true;
}

bool JobScheduler::PlaceGang(const JobRecord& job, ClusterState& state, Rng& rng,
                             std::vector<Allocation>* out) {
  const TopologyPolicy& topo = job.spec.topology;
  if (job.spec.tasks.size() == 1 || topo.scope == TopologyScope::kAny) {
    return PlaceTasksWithin(job, state, rng, {}, out);
  }
  // Node groups that could hold the whole gang, tightest first (keeps big holes whole).
  std::vector<std::vector<NodeId>> singles;
  const std::vector<std::vector<NodeId>>* groups = nullptr;
  switch (topo.scope) {
    case TopologyScope::kNode:
      singles.reserve(state.node_count());
      for (size_t i = 0; i < state.node_count(); ++i) {
        if (state.present(NodeId(static_cast<uint32_t>(i)))) {
          singles.push_back({NodeId(static_cast<uint32_t>(i))});
        }
      }
      groups = &singles;
      break;
    case TopologyScope::kNvlinkDomain:
      groups = &nvlink_groups_;
      break;
    case TopologyScope::kRack:
      groups = &racks_;
      break;
    case TopologyScope::kBlock:
      groups = &blocks_;
      break;
    case TopologyScope::kAny:
      break;
  }
  std::vector<std::pair<int64_t, size_t>> candidates;
  for (size_t g = 0; g < groups->size(); ++g) {
    int64_t free = 0;
    for (NodeId n : (*groups)[g]) {
      free += state.node(n).free_gpu_milli().value();
    }
    if (free >= job.gpu_milli) {
      candidates.emplace_back(free, g);
    }
  }
  std::sort(candidates.begin(), candidates.end());
  for (const auto& [free, g] : candidates) {
    if (PlaceTasksWithin(job, state, rng, (*groups)[g], out)) {
      return true;
    }
  }
  if (topo.hard) {
    return false;
  }
  return PlaceTasksWithin(job, state, rng, {}, out);
}

bool JobScheduler::Admissible(const JobRecord& job, ClusterState& state, QuotaLedger& quota,
                              bool nominal_only, Rng& rng) {
  if (job.gpu_milli > FreeMilli(state)) {
    return false;
  }
  QuotaFit fit = quota.Check(job.queue, ChargeOf(job, nullptr, state), options_.borrowing);
  if (fit == QuotaFit::kNo || (nominal_only && fit != QuotaFit::kNominal)) {
    return false;
  }
  std::vector<Allocation> allocations;
  if (!PlaceGang(job, state, rng, &allocations)) {
    return false;
  }
  fit = quota.Check(job.queue, ChargeOf(job, &allocations, state), options_.borrowing);
  Unplace(state, allocations);
  return fit != QuotaFit::kNo && !(nominal_only && fit != QuotaFit::kNominal);
}

}  // namespace tessera
