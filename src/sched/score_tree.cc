#include "sched/score_tree.h"

#include <algorithm>
#include <cassert>

namespace tessera {

void ScoreTree::Reset(size_t leaves, const std::vector<uint32_t>* ranks) {
  leaves_ = leaves;
  base_ = 1;
  while (base_ < leaves) {
    base_ <<= 1;
  }
  max_.assign(2 * base_, kInfeasibleScore);
  count_.assign(2 * base_, 0);
  for (size_t i = 0; i < leaves; ++i) {
    count_[base_ + i] = 1;
  }
  min_rank_.clear();
  if (ranks != nullptr) {
    assert(ranks->size() == leaves);
    min_rank_.assign(2 * base_, UINT32_MAX);
    for (size_t i = 0; i < leaves; ++i) {
      min_rank_[base_ + i] = (*ranks)[i];
    }
  }
  for (size_t i = base_; i-- > 1;) {
    Pull(i);
  }
}

void ScoreTree::Pull(size_t i) {
  int64_t l = max_[2 * i];
  int64_t r = max_[2 * i + 1];
  const bool ranked = !min_rank_.empty();
  if (l > r) {
    max_[i] = l;
    count_[i] = count_[2 * i];
    if (ranked) {
      min_rank_[i] = min_rank_[2 * i];
    }
  } else if (r > l) {
    max_[i] = r;
    count_[i] = count_[2 * i + 1];
    if (ranked) {
      min_rank_[i] = min_rank_[2 * i + 1];
    }
  } else {
    max_[i] = l;
    count_[i] = count_[2 * i] + count_[2 * i + 1];
    if (ranked) {
      min_rank_[i] = std::min(min_rank_[2 * i], min_rank_[2 * i + 1]);
    }
  }
}

void ScoreTree::Set(size_t leaf, int64_t score) {
  assert(leaf < leaves_);
  size_t i = base_ + leaf;
  if (max_[i] == score) {
    return;
  }
  max_[i] = score;
  for (i >>= 1; i >= 1; i >>= 1) {
    Pull(i);
  }
}

size_t ScoreTree::NthBest(uint32_t k) const {
  assert(k < best_count());
  int64_t want = max_[1];
  size_t i = 1;
  while (i < base_) {
    size_t l = 2 * i;
    if (max_[l] == want) {
      if (k < count_[l]) {
        i = l;
        continue;
      }
      k -= count_[l];
    }
    i = l + 1;
  }
  return i - base_;
}

}  // namespace tessera

namespace tessera {

size_t ScoreTree::BestByRank() const {
  assert(!min_rank_.empty() && best_count() > 0);
  size_t i = 1;
  while (i < base_) {
    size_t l = 2 * i;
    i = (max_[l] == max_[i] && min_rank_[l] == min_rank_[i]) ? l : l + 1;
  }
  return i - base_;
}

}  // namespace tessera
