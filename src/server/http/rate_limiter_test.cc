#include "server/http/rate_limiter.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace tessera {
namespace {

constexpr Micros kSecond = 1'000'000;

TEST(RateLimiterTest, BurstThenRefusal) {
  ManualClock clock(5 * kSecond);
  RateLimiter limiter(clock, /*rate_per_second=*/2, /*burst=*/5);
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(limiter.Allow("k")) << i;
  }
  EXPECT_FALSE(limiter.Allow("k"));
  EXPECT_FALSE(limiter.Allow("k"));
}

TEST(RateLimiterTest, RefillsOverTime) {
  ManualClock clock;
  RateLimiter limiter(clock, /*rate_per_second=*/2, /*burst=*/3);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(limiter.Allow("k"));
  }
  ASSERT_FALSE(limiter.Allow("k"));
  clock.Advance(kSecond / 4);  // half a token
  EXPECT_FALSE(limiter.Allow("k"));
  clock.Advance(kSecond / 4);  // one token
  EXPECT_TRUE(limiter.Allow("k"));
  EXPECT_FALSE(limiter.Allow("k"));
  // A long pause refills to the burst, never beyond.
  clock.Advance(100 * kSecond);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(limiter.Allow("k")) << i;
  }
  EXPECT_FALSE(limiter.Allow("k"));
  // A steady 2 per second is sustained: 10 seconds, a request every 0.5 s.
  for (int i = 0; i < 20; ++i) {
    clock.Advance(kSecond / 2);
    EXPECT_TRUE(limiter.Allow("k")) << i;
  }
  EXPECT_FALSE(limiter.Allow("k"));
}

TEST(RateLimiterTest, FractionalRatesAccumulate) {
  ManualClock clock;
  RateLimiter limiter(clock, /*rate_per_second=*/0.1, /*burst=*/1);
  ASSERT_TRUE(limiter.Allow("k"));
  for (int i = 0; i < 9; ++i) {
    clock.Advance(kSecond);
    EXPECT_FALSE(limiter.Allow("k")) << i;
  }
  clock.Advance(kSecond);  // 10 s: one token
  EXPECT_TRUE(limiter.Allow("k"));
}

TEST(RateLimiterTest, KeysAreIndependent) {
  ManualClock clock;
  RateLimiter limiter(clock, 1, 2);
  EXPECT_TRUE(limiter.Allow("a"));
  EXPECT_TRUE(limiter.Allow("a"));
  EXPECT_FALSE(limiter.Allow("a"));
  EXPECT_TRUE(limiter.Allow("b"));
  EXPECT_TRUE(limiter.Allow("b"));
  EXPECT_FALSE(limiter.Allow("b"));
  EXPECT_EQ(limiter.size(), 2u);
}

TEST(RateLimiterTest, ClockSteppingBackRefillsNothing) {
  ManualClock clock(10 * kSecond);
  RateLimiter limiter(clock, 1, 1);
  ASSERT_TRUE(limiter.Allow("k"));
  clock.Set(5 * kSecond);
  EXPECT_FALSE(limiter.Allow("k"));
  clock.Set(10 * kSecond + kSecond);  // one second after the last refill point
  EXPECT_TRUE(limiter.Allow("k"));
}

TEST(RateLimiterTest, ZeroRateMeansUnlimited) {
  ManualClock clock;
  RateLimiter limiter(clock, 0, 1);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(limiter.Allow("k"));
  }
  EXPECT_EQ(limiter.size(), 0u);
}

TEST(RateLimiterTest, DropsIdleFullBucketsFirst) {
  ManualClock clock;
  RateLimiter limiter(clock, /*rate_per_second=*/1, /*burst=*/2, /*max_keys=*/10);
  // "busy" drains its bucket; nine idle keys take one token each.
  ASSERT_TRUE(limiter.Allow("busy"));
  ASSERT_TRUE(limiter.Allow("busy"));
  for (int i = 0; i < 9; ++i) {
    ASSERT_TRUE(limiter.Allow("idle" + std::to_string(i)));
  }
  ASSERT_EQ(limiter.size(), 10u);
  // 1.5 s later the idle buckets are full again (1 + 1.5 >= 2) but "busy" is not (1.5).
  clock.Advance(kSecond * 3 / 2);
  EXPECT_TRUE(limiter.Allow("new"));
  EXPECT_EQ(limiter.size(), 2u);  // "busy" and "new"
  // "busy" kept its state: one token, then refused.
  EXPECT_TRUE(limiter.Allow("busy"));
  EXPECT_FALSE(limiter.Allow("busy"));
}

TEST(RateLimiterTest, StaysBoundedWhenEveryBucketIsBusy) {
  ManualClock clock;
  RateLimiter limiter(clock, /*rate_per_second=*/1, /*burst=*/1, /*max_keys=*/100);
  for (int i = 0; i < 1000; ++i) {
    clock.Advance(1);
    EXPECT_TRUE(limiter.Allow("key" + std::to_string(i)));
    EXPECT_LE(limiter.size(), 100u);
  }
  // The most recent key is still tracked (and empty).
  EXPECT_FALSE(limiter.Allow("key999"));
}

TEST(RateLimiterTest, ConcurrentCallersShareOneBucket) {
  SystemClock clock;
  // Refill of 1e-6 per second: nothing refills during the test.
  RateLimiter limiter(clock, 1e-6, 100);
  std::vector<std::thread> threads;
  std::vector<int> allowed(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&limiter, &allowed, t] {
      for (int i = 0; i < 100; ++i) {
        allowed[t] += limiter.Allow("shared") ? 1 : 0;
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(allowed[0] + allowed[1] + allowed[2] + allowed[3], 100);
}

TEST(RateLimiterTest, ChargeTakesTheBucketIntoDebt) {
  ManualClock clock;
  RateLimiter limiter(clock, /*rate_per_second=*/10, /*burst=*/20);
  ASSERT_TRUE(limiter.Allow("lister"));
  limiter.Charge("lister", 100);  // a big listing: far more than the burst
  EXPECT_FALSE(limiter.Allow("lister"));
  // The debt is capped at -burst: 2.1 s of refill (21 tokens) lets it in again.
  clock.Advance(2 * kSecond);
  EXPECT_FALSE(limiter.Allow("lister"));
  clock.Advance(kSecond / 10 + 1000);
  EXPECT_TRUE(limiter.Allow("lister"));
  // Another key is not affected; charging an unknown key creates nothing.
  EXPECT_TRUE(limiter.Allow("other"));
  limiter.Charge("nobody", 5);
  EXPECT_EQ(limiter.size(), 2u);
}

TEST(AuthThrottleTest, BlocksAfterTooManyFailuresAndGrows) {
  ManualClock clock(kSecond);
  AuthThrottleOptions o;  // 10 failures per 10 s, first block 10 s
  AuthThrottle throttle(clock, o);
  for (int i = 0; i < 10; ++i) {
    throttle.Failed("10.0.0.1");
  }
  EXPECT_EQ(throttle.Blocked("10.0.0.1"), 0);
  throttle.Failed("10.0.0.1");
  EXPECT_EQ(throttle.Blocked("10.0.0.1"), 10 * kSecond);
  EXPECT_EQ(throttle.Blocked("10.0.0.2"), 0);  // per address
  clock.Advance(10 * kSecond);
  EXPECT_EQ(throttle.Blocked("10.0.0.1"), 0);
  // Failing again right after the block: the next block is twice as long.
  for (int i = 0; i < 11; ++i) {
    throttle.Failed("10.0.0.1");
  }
  EXPECT_EQ(throttle.Blocked("10.0.0.1"), 20 * kSecond);
}

TEST(AuthThrottleTest, FailuresSpreadOverWindowsDoNotBlock) {
  ManualClock clock(kSecond);
  AuthThrottle throttle(clock, AuthThrottleOptions{});
  for (int i = 0; i < 100; ++i) {
    throttle.Failed("10.0.0.1");  // one a second: 10 per window at most
    clock.Advance(kSecond + 1);
  }
  EXPECT_EQ(throttle.Blocked("10.0.0.1"), 0);
}

TEST(AuthThrottleTest, DisabledAndBoundedInMemory) {
  ManualClock clock(kSecond);
  AuthThrottleOptions off;
  off.max_failures = 0;
  AuthThrottle disabled(clock, off);
  for (int i = 0; i < 100; ++i) {
    disabled.Failed("a");
  }
  EXPECT_EQ(disabled.Blocked("a"), 0);
  AuthThrottleOptions small;
  small.max_keys = 8;
  AuthThrottle bounded(clock, small);
  for (int i = 0; i < 100; ++i) {
    bounded.Failed("10.0.0." + std::to_string(i));
  }
  EXPECT_LE(bounded.size(), 8u);
}

}  // namespace
}  // namespace tessera
