// ScoreTree: a tournament tree over per-node scores that answers "what is the best
// score, how many nodes have it, and which is the k-th of them" in O(1) / O(log n),
// with O(log n) updates. The Placer keeps one per request class, so a placement
// costs the nodes that changed since the class was last placed, not a scan of the
// whole cluster. Thread safety: none.
#pragma once

#include <cstdint>
#include <vector>

#include "sched/framework.h"

namespace tessera {

class ScoreTree {
 public:
  ScoreTree() = default;
  explicit ScoreTree(size_t leaves) { Reset(leaves); }

  // All leaves to kInfeasibleScore. With `ranks` (one per leaf, distinct), ties can
  // also be resolved by the lowest rank (BestByRank).
  void Reset(size_t leaves, const std::vector<uint32_t>* ranks = nullptr);
  size_t size() const { return leaves_; }

  void Set(size_t leaf, int64_t score);
  int64_t Get(size_t leaf) const { return max_[base_ + leaf]; }

  int64_t best() const { return max_[1]; }
  // Leaves holding best(); 0 when every leaf is infeasible.
  uint32_t best_count() const { return max_[1] == kInfeasibleScore ? 0 : count_[1]; }
  // The k-th (0-based, in leaf order) leaf holding best(); k < best_count().
  size_t NthBest(uint32_t k) const;
  // The leaf holding best() with the lowest rank; needs ranks at Reset.
  size_t BestByRank() const;

 private:
  void Pull(size_t i);

  size_t leaves_ = 0;
  size_t base_ = 1;
  std::vector<int64_t> max_;
  std::vector<uint32_t> count_;
  std::vector<uint32_t> min_rank_;  // empty unless ranks were given
};

}  // namespace tessera
