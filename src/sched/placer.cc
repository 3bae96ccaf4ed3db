#include "sched/placer.h"

#include <algorithm>
#include <map>

#include "sched/gpu_selection.h"

namespace tessera {
namespace {

inline void HashMix(size_t& h, uint64_t v) {
  h ^= std::hash<uint64_t>{}(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
}

}  // namespace

size_t Placer::RequestHash::operator()(const TaskRequest& r) const {
  size_t h = 0;
  HashMix(h, static_cast<uint64_t>(r.cpu.value()));
  HashMix(h, static_cast<uint64_t>(r.memory.value()));
  HashMix(h, static_cast<uint64_t>(r.gpu_count));
  HashMix(h, static_cast<uint64_t>(r.gpu_milli.value()));
  HashMix(h, static_cast<uint64_t>(r.gpu_memory.value()));
  HashMix(h, std::hash<std::string>{}(r.mig_profile));
  HashMix(h, r.models.bits());
  HashMix(h, static_cast<uint64_t>(r.topology));
  HashMix(h, r.needs_containers ? 1 : 0);
  return h;
}

Placer::Placer(Profile profile, TieBreak tie_break)
    : profile_(std::move(profile)), tie_break_(profile_.tie_break.value_or(tie_break)) {
  for (const WeightedScorer& s : profile_.scorers) {
    cacheable_ = cacheable_ && s.plugin->cacheable();
  }
}

uint32_t Placer::RankOf(size_t node) const {
  return node < ranks_.size() ? ranks_[node] : static_cast<uint32_t>(node);
}

void Placer::SetNodeRanks(std::vector<uint32_t> ranks) {
  ranks_ = std::move(ranks);
  classes_.clear();
}

FilterResult Placer::Check(const NodeLedger& node, const TaskRequest& request) const {
  if (node.drained()) {
    return FilterResult::NotNow("node drained");
  }
  for (const auto& f : profile_.filters) {
    FilterResult r = f->Filter(node, request);
    if (!r.fits()) {
      return r;
    }
  }
  return FilterResult::Fits();
}

int64_t Placer::Evaluate(const NodeLedger& node, const TaskRequest& request, GpuChoice* choice) {
  *choice = GpuChoice{};
  if (!Check(node, request).fits()) {
    return kInfeasibleScore;
  }
  int64_t total = 0;
  for (WeightedScorer& s : profile_.scorers) {
    NodeScore ns = s.plugin->Score(node, request);
    if (ns.score == kInfeasibleScore) {
      return kInfeasibleScore;
    }
    total += ns.score * s.weight;
    if (choice->empty() && !ns.gpus.empty()) {
      *choice = ns.gpus;
    }
  }
  return total;
}

void Placer::Sync(ClassCache& cache, const ClusterState& state, const TaskRequest& request) {
  const size_t n = state.node_count();
  changed_.clear();
  bool incremental = cache.state_uid == state.uid() && cache.tree.size() == n &&
                     state.ChangesSince(cache.synced_seq, &changed_);
  const bool ranked = tie_break_ == TieBreak::kNodePriority;
  if (ranked && ranks_.size() != n) {
    // No ranks for this cluster: fall back to node order.
    ranks_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      ranks_[i] = static_cast<uint32_t>(i);
    }
  }
  if (!incremental) {
    cache.tree.Reset(n, ranked ? &ranks_ : nullptr);
    cache.choices.assign(n, GpuChoice{});
    for (size_t i = 0; i < n; ++i) {
      cache.tree.Set(i, Evaluate(state.nodes()[i], request, &cache.choices[i]));
    }
  } else {
    if (seen_stamp_.size() < n) {
      seen_stamp_.assign(n, 0);
    }
    ++stamp_;
    for (NodeId id : changed_) {
      size_t i = id.value();
      if (seen_stamp_[i] == stamp_) {
        continue;
      }
      seen_stamp_[i] = stamp_;
      cache.tree.Set(i, Evaluate(state.nodes()[i], request, &cache.choices[i]));
    }
  }
  cache.state_uid = state.uid();
  cache.synced_seq = state.change_seq();
}

Placement Placer::Place(const ClusterState& state, const TaskRequest& request, Rng& rng,
                        const PlaceOptions& options) {
  Placement out;
  if (state.node_count() == 0) {
    return out;
  }
  for (WeightedScorer& s : profile_.scorers) {
    s.plugin->PreScore(state, request);
  }
  if (cacheable_) {
    if (classes_.size() >= kMaxClasses && !classes_.contains(request)) {
      classes_.clear();
    }
    ClassCache& cache = classes_[request];
    Sync(cache, state, request);
    uint32_t tied = cache.tree.best_count();
    if (tied > 0) {
      size_t leaf = tie_break_ == TieBreak::kNodePriority ? cache.tree.BestByRank()
                                                          : cache.tree.NthBest(rng.Uniform(tied));
      return Finish(state, request, NodeId(static_cast<uint32_t>(leaf)), cache.tree.best(), tied,
                    cache.choices[leaf], rng);
    }
  } else {
    Placement scanned = Scan(state, request, nullptr, rng);
    if (scanned.placed) {
      return scanned;
    }
  }
  if (options.explain) {
    ExplainFailure(state, request, &out);
  }
  return out;
}

Placement Placer::PlaceWithin(const ClusterState& state, const TaskRequest& request,
                              std::span<const NodeId> nodes, Rng& rng) {
  for (WeightedScorer& s : profile_.scorers) {
    s.plugin->PreScore(state, request);
  }
  return Scan(state, request, &nodes, rng);
}

Placement Placer::Scan(const ClusterState& state, const TaskRequest& request,
                       const std::span<const NodeId>* nodes, Rng& rng) {
  // Reservoir sampling over the best nodes.
  int64_t best = kInfeasibleScore;
  uint32_t tied = 0;
  size_t pick = 0;
  GpuChoice pick_choice;
  const size_t count = nodes != nullptr ? nodes->size() : state.node_count();
  for (size_t k = 0; k < count; ++k) {
    const size_t i = nodes != nullptr ? (*nodes)[k].value() : k;
    GpuChoice choice;
    int64_t s = Evaluate(state.nodes()[i], request, &choice);
    if (s == kInfeasibleScore) {
      continue;
    }
    if (s > best) {
      best = s;
      tied = 0;
    }
    bool take = false;
    if (s == best) {
      ++tied;
      take = tie_break_ == TieBreak::kNodePriority ? (tied == 1 || RankOf(i) < RankOf(pick))
                                                   : rng.Uniform(tied) == 0;
    }
    if (take) {
      pick = i;
      pick_choice = choice;
    }
  }
  if (tied == 0) {
    return Placement{};
  }
  return Finish(state, request, NodeId(static_cast<uint32_t>(pick)), best, tied, pick_choice, rng);
}

Placement Placer::Finish(const ClusterState& state, const TaskRequest& request, NodeId node,
                         int64_t score, uint32_t tied, GpuChoice choice, Rng& rng) {
  Placement out;
  const NodeLedger& ledger = state.node(node);
  if (choice.empty() && !request.cpu_only()) {
    std::optional<GpuChoice> picked = SelectGpus(ledger, request, profile_.gpu_selection, rng);
    if (!picked) {
      return out;  // a filter passed a node its GPUs cannot serve: treat as no fit
    }
    choice = *picked;
  }
  StatusOr<Allocation> a = MakeAllocation(node, ledger, request, choice);
  if (!a.ok()) {
    return out;
  }
  out.placed = true;
  out.allocation = std::move(a).value();
  out.score = score;
  out.tied_nodes = tied;
  return out;
}

void Placer::ExplainFailure(const ClusterState& state, const TaskRequest& request,
                            Placement* out) const {
  std::map<std::string, int> tally;
  for (const NodeLedger& node : state.nodes()) {
    FilterResult r = Check(node, request);
    if (r.fits()) {
      continue;
    }
    ++tally[std::string(r.reason)];
    out->busy_nodes_exist |= r.code == FilterCode::kUnschedulable;
  }
  out->reasons.assign(tally.begin(), tally.end());
  std::sort(out->reasons.begin(), out->reasons.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
}

std::vector<ScoreTerm> Placer::Explain(const NodeLedger& node, const TaskRequest& request) {
  std::vector<ScoreTerm> terms;
  if (!Check(node, request).fits()) {
    return terms;
  }
  for (WeightedScorer& s : profile_.scorers) {
    terms.push_back(
        {std::string(s.plugin->name()), s.plugin->Score(node, request).score, s.weight});
  }
  return terms;
}

}  // namespace tessera
