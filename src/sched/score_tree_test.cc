#include "sched/score_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

#include "base/rng.h"

namespace tessera {
namespace {

// A brute-force mirror of ScoreTree: the leaves in a plain vector.
struct Reference {
  std::vector<int64_t> leaves;
  std::vector<uint32_t> ranks;

  int64_t Best() const {
    int64_t best = kInfeasibleScore;
    for (int64_t s : leaves) {
      best = std::max(best, s);
    }
    return best;
  }
  std::vector<size_t> BestLeaves() const {
    std::vector<size_t> out;
    int64_t best = Best();
    if (best == kInfeasibleScore) {
      return out;
    }
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (leaves[i] == best) {
        out.push_back(i);
      }
    }
    return out;
  }
  size_t BestByRank() const {
    std::vector<size_t> best = BestLeaves();
    return *std::min_element(best.begin(), best.end(),
                             [&](size_t a, size_t b) { return ranks[a] < ranks[b]; });
  }
};

// Scores drawn from a small range so that ties are frequent, with some infeasible.
int64_t RandomScore(Rng& rng) {
  if (rng.Uniform(5) == 0) {
    return kInfeasibleScore;
  }
  return static_cast<int64_t>(rng.Uniform(7)) - 3;
}

void ExpectSameAs(const ScoreTree& tree, const Reference& ref, bool ranked) {
  ASSERT_EQ(tree.size(), ref.leaves.size());
  for (size_t i = 0; i < ref.leaves.size(); ++i) {
    ASSERT_EQ(tree.Get(i), ref.leaves[i]) << "leaf " << i;
  }
  ASSERT_EQ(tree.best(), ref.Best());
  std::vector<size_t> best = ref.BestLeaves();
  ASSERT_EQ(tree.best_count(), best.size());
  for (uint32_t k = 0; k < best.size(); ++k) {
    ASSERT_EQ(tree.NthBest(k), best[k]) << "k=" << k;
  }
  if (ranked && !best.empty()) {
    ASSERT_EQ(tree.BestByRank(), ref.BestByRank());
  }
}

TEST(ScoreTreeTest, FreshTreeIsAllInfeasible) {
  for (size_t n : {1, 2, 3, 5, 8, 100}) {
    ScoreTree tree(n);
    EXPECT_EQ(tree.size(), n);
    EXPECT_EQ(tree.best(), kInfeasibleScore);
    EXPECT_EQ(tree.best_count(), 0U);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(tree.Get(i), kInfeasibleScore);
    }
  }
}

TEST(ScoreTreeTest, SingleLeaf) {
  ScoreTree tree(1);
  tree.Set(0, 42);
  EXPECT_EQ(tree.best(), 42);
  EXPECT_EQ(tree.best_count(), 1U);
  EXPECT_EQ(tree.NthBest(0), 0U);
  tree.Set(0, -7);
  EXPECT_EQ(tree.best(), -7);
  EXPECT_EQ(tree.best_count(), 1U);
  tree.Set(0, kInfeasibleScore);
  EXPECT_EQ(tree.best_count(), 0U);

  std::vector<uint32_t> ranks{0};
  tree.Reset(1, &ranks);
  EXPECT_EQ(tree.best_count(), 0U);
  tree.Set(0, 3);
  EXPECT_EQ(tree.BestByRank(), 0U);
}

TEST(ScoreTreeTest, CountsTiesAndIndexesThemInLeafOrder) {
  ScoreTree tree(6);  // not a power of two: two padding leaves
  const int64_t scores[] = {5, 9, 2, 9, kInfeasibleScore, 9};
  for (size_t i = 0; i < 6; ++i) {
    tree.Set(i, scores[i]);
  }
  EXPECT_EQ(tree.best(), 9);
  EXPECT_EQ(tree.best_count(), 3U);
  EXPECT_EQ(tree.NthBest(0), 1U);
  EXPECT_EQ(tree.NthBest(1), 3U);
  EXPECT_EQ(tree.NthBest(2), 5U);
  // Lowering a best leaf removes it from the tie; raising another makes it the sole best.
  tree.Set(3, 1);
  EXPECT_EQ(tree.best_count(), 2U);
  EXPECT_EQ(tree.NthBest(1), 5U);
  tree.Set(2, 10);
  EXPECT_EQ(tree.best(), 10);
  EXPECT_EQ(tree.best_count(), 1U);
  EXPECT_EQ(tree.NthBest(0), 2U);
  // Everything infeasible again: no best at all.
  for (size_t i = 0; i < 6; ++i) {
    tree.Set(i, kInfeasibleScore);
  }
  EXPECT_EQ(tree.best(), kInfeasibleScore);
  EXPECT_EQ(tree.best_count(), 0U);
}

TEST(ScoreTreeTest, NegativeScoresAreFeasible) {
  ScoreTree tree(3);
  tree.Set(1, -1000000);
  EXPECT_EQ(tree.best(), -1000000);
  EXPECT_EQ(tree.best_count(), 1U);
  EXPECT_EQ(tree.NthBest(0), 1U);
}

TEST(ScoreTreeTest, BestByRankPicksLowestRankAmongBest) {
  std::vector<uint32_t> ranks{4, 2, 0, 3, 1};
  ScoreTree tree;
  tree.Reset(5, &ranks);
  for (size_t i = 0; i < 5; ++i) {
    tree.Set(i, 7);
  }
  EXPECT_EQ(tree.BestByRank(), 2U);  // rank 0
  tree.Set(2, 6);
  EXPECT_EQ(tree.BestByRank(), 4U);  // rank 1
  tree.Set(0, 8);
  EXPECT_EQ(tree.BestByRank(), 0U);  // the only best, though its rank is the worst
  tree.Set(0, kInfeasibleScore);
  tree.Set(4, kInfeasibleScore);
  EXPECT_EQ(tree.BestByRank(), 1U);  // rank 2 among leaves 1 and 3
}

TEST(ScoreTreeTest, ResetForgetsScoresAndRanks) {
  std::vector<uint32_t> ranks{1, 0};
  ScoreTree tree;
  tree.Reset(2, &ranks);
  tree.Set(0, 5);
  tree.Set(1, 5);
  EXPECT_EQ(tree.BestByRank(), 1U);
  std::vector<uint32_t> other{0, 1, 2};
  tree.Reset(3, &other);
  EXPECT_EQ(tree.size(), 3U);
  EXPECT_EQ(tree.best_count(), 0U);
  tree.Set(0, 5);
  tree.Set(1, 5);
  EXPECT_EQ(tree.BestByRank(), 0U);
}

// Random Set sequences against the brute-force reference, for sizes around powers of two.
TEST(ScoreTreePropertyTest, MatchesBruteForce) {
  for (size_t n : {1, 2, 3, 4, 5, 7, 8, 9, 13, 31, 32, 33, 100}) {
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      Pcg32 rng(seed * 1000 + n);
      const bool ranked = seed % 2 == 0;
      Reference ref;
      ref.leaves.assign(n, kInfeasibleScore);
      ref.ranks.resize(n);
      std::iota(ref.ranks.begin(), ref.ranks.end(), 0U);
      rng.Shuffle(std::span<uint32_t>(ref.ranks));
      ScoreTree tree;
      tree.Reset(n, ranked ? &ref.ranks : nullptr);
      ExpectSameAs(tree, ref, ranked);
      for (int step = 0; step < 300; ++step) {
        size_t leaf = rng.Uniform(static_cast<uint32_t>(n));
        int64_t score = RandomScore(rng);
        tree.Set(leaf, score);
        ref.leaves[leaf] = score;
        SCOPED_TRACE(::testing::Message() << "n=" << n << " seed=" << seed << " step=" << step);
        ExpectSameAs(tree, ref, ranked);
        if (::testing::Test::HasFatalFailure()) {
          return;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tessera
