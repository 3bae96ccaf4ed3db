#include "limiter/memory_ledger.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

namespace tessera_limiter {
namespace {

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

TEST(MemoryLedgerTest, RefusesWhatWouldPassTheCapAndFreesGiveBack) {
  MemoryLedger ledger(20 * kGiB);
  for (std::uint64_t i = 0; i < 20; ++i) {
    ASSERT_TRUE(ledger.Reserve(kGiB)) << i;
    ledger.Commit(MemoryKey::kPointer, 0x1000 + i, kGiB);
  }
  EXPECT_FALSE(ledger.Reserve(1));
  EXPECT_EQ(ledger.held(), 20 * kGiB);
  EXPECT_EQ(ledger.Release(MemoryKey::kPointer, 0x1005), kGiB);
  EXPECT_EQ(ledger.Release(MemoryKey::kPointer, 0x1005), std::nullopt);
  EXPECT_EQ(ledger.held(), 19 * kGiB);
  EXPECT_TRUE(ledger.Reserve(kGiB));
  EXPECT_FALSE(ledger.Reserve(kGiB));
}

TEST(MemoryLedgerTest, PointersAndHandlesAreSeparateKeys) {
  MemoryLedger ledger(10 * kGiB);
  ASSERT_TRUE(ledger.Reserve(2 * kGiB));
  ledger.Commit(MemoryKey::kPointer, 7, kGiB);
  ledger.Commit(MemoryKey::kHandle, 7, kGiB);
  EXPECT_EQ(ledger.Release(MemoryKey::kHandle, 7), kGiB);
  EXPECT_EQ(ledger.held(), kGiB);
  EXPECT_EQ(ledger.Release(MemoryKey::kPointer, 7), kGiB);
  EXPECT_EQ(ledger.held(), 0u);
}

TEST(MemoryLedgerTest, ReservationsGivenBackOnDriverFailure) {
  MemoryLedger ledger(kGiB);
  ASSERT_TRUE(ledger.Reserve(kGiB));
  ledger.Unreserve(kGiB);
  EXPECT_EQ(ledger.held(), 0u);
  EXPECT_TRUE(ledger.Reserve(kGiB));
}

TEST(MemoryLedgerTest, ConcurrentReservationsNeverOverbook) {
  MemoryLedger ledger(100 * kGiB);
  std::vector<std::thread> threads;
  std::vector<int> granted(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        if (ledger.Reserve(kGiB)) ++granted[static_cast<size_t>(t)];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  int total = 0;
  for (int g : granted) total += g;
  EXPECT_EQ(total, 100);
  EXPECT_EQ(ledger.held(), 100 * kGiB);
}

}  // namespace
}  // namespace tessera_limiter
