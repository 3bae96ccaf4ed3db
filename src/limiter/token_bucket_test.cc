#include "limiter/token_bucket.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace tessera_limiter {
namespace {

constexpr std::int64_t kMs = 1'000'000;

TEST(TokenBucketTest, BurstIsFreeThenDebtWaitsAtTheShare) {
  TokenBucket bucket(25, 100 * kMs, 0);
  EXPECT_EQ(bucket.DelayNs(0), 0);
  bucket.Charge(100 * kMs);  // the whole burst
  EXPECT_EQ(bucket.DelayNs(0), 0);
  bucket.Charge(10 * kMs);  // 10 ms in debt: 40 ms of wall time at 25 %
  EXPECT_EQ(bucket.DelayNs(0), 40 * kMs);
  EXPECT_EQ(bucket.DelayNs(20 * kMs), 20 * kMs);
  EXPECT_EQ(bucket.DelayNs(40 * kMs), 0);
}

TEST(TokenBucketTest, CreditNeverExceedsTheBurst) {
  TokenBucket bucket(50, 100 * kMs, 0);
  // An hour idle earns no more than the burst.
  EXPECT_EQ(bucket.DelayNs(3600'000 * kMs), 0);
  EXPECT_EQ(bucket.balance_ns(), 100 * kMs);
  bucket.Charge(150 * kMs);
  EXPECT_EQ(bucket.DelayNs(3600'000 * kMs), 100 * kMs);
}

TEST(TokenBucketTest, SteadyLoopConvergesOnTheShare) {
  // A loop of 1 ms kernels that waits whenever told to: kernel time over wall time
  // must approach 10 % once the burst is spent.
  TokenBucket bucket(10, 100 * kMs, 0);
  std::int64_t now = 0;
  std::int64_t kernel = 0;
  for (int i = 0; i < 5000; ++i) {
    now += bucket.DelayNs(now);
    bucket.Charge(kMs);
    now += kMs;
    kernel += kMs;
  }
  const double share = static_cast<double>(kernel - 100 * kMs) / static_cast<double>(now);
  EXPECT_NEAR(share, 0.10, 0.005);
}

TEST(TokenBucketTest, FullShareNeverWaitsOnTimedWork) {
  TokenBucket bucket(100, 100 * kMs, 0);
  std::int64_t now = 0;
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(bucket.DelayNs(now), 0);
    bucket.Charge(kMs);
    now += kMs;
  }
}

}  // namespace
}  // namespace tessera_limiter
