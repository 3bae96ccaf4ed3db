#include "base/rng.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <vector>

namespace tessera {
namespace {

TEST(RngTest, SameSeedSameStream) {
  Pcg32 a(42);
  Pcg32 b(42);
  Pcg32 c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    uint32_t x = a.NextU32();
    EXPECT_EQ(x, b.NextU32());
    differs |= x != c.NextU32();
  }
  EXPECT_TRUE(differs);
}

TEST(RngTest, UniformStaysInBoundsAndCoversIt) {
  Pcg32 rng(7);
  std::array<int, 10> counts{};
  for (int i = 0; i < 100000; ++i) {
    uint32_t v = rng.Uniform(10);
    ASSERT_LT(v, 10U);
    ++counts[v];
  }
  for (int c : counts) {
    EXPECT_GT(c, 9000);
    EXPECT_LT(c, 11000);
  }
}

TEST(RngTest, UniformDoubleInUnitInterval) {
  Pcg32 rng(1);
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    double d = rng.UniformDouble();
    ASSERT_GE(d, 0.0);
    ASSERT_LT(d, 1.0);
    sum += d;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
}

TEST(RngTest, ShuffleIsAPermutationAndDeterministic) {
  std::vector<int> a(50);
  std::iota(a.begin(), a.end(), 0);
  std::vector<int> b = a;
  Pcg32 r1(5);
  Pcg32 r2(5);
  r1.Shuffle(std::span<int>(a));
  r2.Shuffle(std::span<int>(b));
  EXPECT_EQ(a, b);
  std::vector<int> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(sorted[i], i);
  }
  EXPECT_FALSE(std::is_sorted(a.begin(), a.end()));
}

}  // namespace
}  // namespace tessera
