#include "sched/idle_watch.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

constexpr Micros kS = 1'000'000;
constexpr Micros kMin = 60 * kS;
constexpr Micros kStart = 1'800'000'000LL * kS;

TEST(UtilWindowTest, TimeWeightedMeanHoldsEachSampleUntilTheNext) {
  UtilWindow w(30 * kMin);
  EXPECT_EQ(w.Mean(30 * kMin), -1);
  w.Add(kStart, 100);
  w.Add(kStart + 10 * kMin, 0);   // 100 % for 10 min
  w.Add(kStart + 30 * kMin, 50);  // 0 % for 20 min
  EXPECT_NEAR(w.Mean(30 * kMin), 100.0 / 3, 1e-9);
  EXPECT_EQ(w.observed(), 30 * kMin);
  EXPECT_NEAR(w.integral() / static_cast<double>(w.observed()), 100.0 / 3, 1e-9);
  // The last 10 minutes only (bucket-grained: the buckets are a minute wide here).
  EXPECT_NEAR(w.Mean(10 * kMin), 0.0, 1e-9);
  w.Add(kStart + 40 * kMin, 0);  // 50 % for 10 min
  EXPECT_NEAR(w.Mean(10 * kMin), 50.0, 1e-9);
  EXPECT_NEAR(w.Mean(30 * kMin), 50.0 / 3, 1e-9);  // the first 10 minutes left the window
}

TEST(UtilWindowTest, MemoryIsBoundedAndOldTimeLeaves) {
  UtilWindow w(30 * kMin);
  // A day of samples every 10 s: only the last window counts.
  for (Micros t = 0; t <= 24 * 60 * kMin; t += 10 * kS) {
    w.Add(kStart + t, t < 23 * 60 * kMin ? 100 : 0);
  }
  EXPECT_NEAR(w.Mean(30 * kMin), 0.0, 1e-9);
  EXPECT_EQ(w.observed(), 24 * 60 * kMin);
  EXPECT_NEAR(w.integral() / static_cast<double>(w.observed()), 100.0 * 23 / 24, 1e-6);
  static_assert(sizeof(UtilWindow) < 1024, "a window's memory does not grow with samples");
}

TEST(UtilWindowTest, ClampsAndIgnoresTimeGoingBack) {
  UtilWindow w(30 * kMin);
  w.Add(kStart, 250);
  w.Add(kStart + kMin, -5);
  w.Add(kStart + 30 * kS, 100);  // earlier than the last sample: ignored
  w.Add(kStart + 2 * kMin, 0);
  EXPECT_NEAR(w.Mean(30 * kMin), 50.0, 1e-9);
}

// Samples every 10 s at `util` from `from` to `to` inclusive; the changes seen.
std::vector<std::pair<Micros, IdleWatch::Change>> Feed(IdleWatch& watch, Micros from, Micros to,
                                                       double util, const IdlePolicy& policy,
                                                       int attempt = 0) {
  std::vector<std::pair<Micros, IdleWatch::Change>> changes;
  for (Micros t = from; t <= to; t += 10 * kS) {
    IdleWatch::Change c = watch.Observe(7, attempt, kStart, t, util, policy);
    if (c != IdleWatch::Change::kNone) {
      changes.emplace_back(t, c);
    }
  }
  return changes;
}

TEST(IdleWatchTest, FlaggedExactlyAfterTheWindowAndNotBefore) {
  IdleWatch watch;
  const IdlePolicy policy;  // below 5 % for 30 min
  watch.Output(7, kStart + 31 * kMin);  // it keeps writing: idle, not hung
  auto changes = Feed(watch, kStart, kStart + 30 * kMin - 10 * kS, 3, policy);
  EXPECT_TRUE(changes.empty());
  EXPECT_EQ(watch.Find(7)->idle_since, 0);
  changes = Feed(watch, kStart + 30 * kMin, kStart + 30 * kMin, 3, policy);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].second, IdleWatch::Change::kIdle);
  EXPECT_EQ(watch.Find(7)->idle_since, kStart + 30 * kMin);
  EXPECT_FALSE(watch.Find(7)->hung);
}

TEST(IdleWatchTest, BusyJobIsNeverFlaggedAndAShortBurstKeepsTheMeanUp) {
  IdleWatch watch;
  const IdlePolicy policy;
  EXPECT_TRUE(Feed(watch, kStart, kStart + 2 * 60 * kMin, 60, policy).empty());
  // 20 idle minutes after 10 busy ones: the window's mean is 20 %, not idle.
  EXPECT_TRUE(Feed(watch, kStart + 2 * 60 * kMin + 10 * kS, kStart + 2 * 60 * kMin + 20 * kMin, 0,
                   policy)
                  .empty());
}

TEST(IdleWatchTest, ClearsWhenUtilisationComesBackAndNeedsAFullWindowAgain) {
  IdleWatch watch;
  IdlePolicy policy;
  policy.window = 30 * kMin;
  watch.Output(7, kStart + 100 * kMin);
  ASSERT_EQ(Feed(watch, kStart, kStart + 30 * kMin, 0, policy).size(), 1u);
  // Busy again: cleared once the last bucket's mean (a minute here) is at 5 % or more.
  auto changes = Feed(watch, kStart + 30 * kMin + 10 * kS, kStart + 33 * kMin, 90, policy);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].second, IdleWatch::Change::kCleared);
  EXPECT_LE(changes[0].first, kStart + 31 * kMin + 10 * kS);
  EXPECT_EQ(watch.Find(7)->idle_since, 0);
  const Micros cleared = changes[0].first;
  // Idle again at once: flagged only a full window after it cleared.
  changes = Feed(watch, kStart + 33 * kMin + 10 * kS, cleared + 35 * kMin, 0, policy);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].second, IdleWatch::Change::kIdle);
  EXPECT_GE(changes[0].first, cleared + 30 * kMin);
}

TEST(IdleWatchTest, HungNeedsBothSilenceAndIdleness) {
  const IdlePolicy policy;
  {
    // Silent from the start and idle: hung at the window's end.
    IdleWatch watch;
    auto changes = Feed(watch, kStart, kStart + 30 * kMin, 0, policy);
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].second, IdleWatch::Change::kHung);
    EXPECT_TRUE(watch.Find(7)->hung);
    EXPECT_EQ(watch.Find(7)->idle_since, kStart + 30 * kMin);
  }
  {
    // Silent but busy: neither idle nor hung.
    IdleWatch watch;
    EXPECT_TRUE(Feed(watch, kStart, kStart + 60 * kMin, 80, policy).empty());
    EXPECT_FALSE(watch.Find(7)->hung);
  }
  {
    // Idle, output 10 minutes in: idle at 30 min, hung once 30 min of silence passed (40 min).
    IdleWatch watch;
    Feed(watch, kStart, kStart + 10 * kMin - 10 * kS, 0, policy);
    watch.Output(7, kStart + 10 * kMin);
    auto changes = Feed(watch, kStart + 10 * kMin, kStart + 45 * kMin, 0, policy);
    ASSERT_EQ(changes.size(), 2u);
    EXPECT_EQ(changes[0], std::make_pair(kStart + 30 * kMin, IdleWatch::Change::kIdle));
    EXPECT_EQ(changes[1], std::make_pair(kStart + 40 * kMin, IdleWatch::Change::kHung));
  }
}

TEST(IdleWatchTest, ANewAttemptStartsAfreshAndZeroTurnsDetectionOff) {
  IdleWatch watch;
  IdlePolicy policy;
  ASSERT_EQ(Feed(watch, kStart, kStart + 30 * kMin, 0, policy).size(), 1u);
  auto changes = Feed(watch, kStart + 31 * kMin, kStart + 31 * kMin, 0, policy, /*attempt=*/1);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].second, IdleWatch::Change::kCleared);
  EXPECT_EQ(watch.Find(7)->observed_since, kStart + 31 * kMin);
  policy.below_pct = 0;
  EXPECT_TRUE(Feed(watch, kStart + 32 * kMin, kStart + 3 * 60 * kMin, 0, policy, 1).empty());
  watch.Forget(7);
  EXPECT_EQ(watch.Find(7), nullptr);
}

TEST(IdleWatchTest, RetainForgetsJobsNeverSampledToo) {
  IdleWatch watch;
  watch.Output(8, kStart + 30 * kS);  // output only (say, a job without GPUs)
  Feed(watch, kStart, kStart + kMin, 0, IdlePolicy{});
  watch.Retain([](uint64_t id) { return id == 8; });
  EXPECT_EQ(watch.Find(7), nullptr);
  watch.Retain([](uint64_t) { return false; });
  // Job 8's early output is gone: a first sample now starts from its run start.
  EXPECT_EQ(watch.Observe(8, 0, kStart, kStart + 2 * kMin, 0, IdlePolicy{}),
            IdleWatch::Change::kNone);
  EXPECT_EQ(watch.Find(8)->last_output, kStart);
}

// The verdict both drivers act on: the queue's action once per flag, as a stop request.
TEST(IdleWatchTest, SampleAsksForTheQueuesActionOncePerFlag) {
  IdleWatch watch;
  const IdlePolicy requeue{10, 10 * kMin, IdleAction::kRequeue};
  IdleWatch::Verdict v;
  int stops = 0;
  for (Micros t = kStart; t <= kStart + 30 * kMin; t += 10 * kS) {
    v = watch.Sample(7, 1, kStart, t, 2, requeue, 30 * kS);
    if (v.stop) {
      ++stops;
      EXPECT_EQ(t, kStart + 10 * kMin) << "at the end of the first full window";
      EXPECT_EQ(v.stop->after, AttemptEnd::kRequeue);
      EXPECT_EQ(v.stop->cause, RequeueCause::kIdle);
      EXPECT_EQ(v.stop->grace, 30 * kS);
      EXPECT_EQ(v.stop->reason, "requeued: hung: GPU utilisation below 10% and no output for 10m");
      EXPECT_TRUE(v.reason.empty());
    }
  }
  EXPECT_EQ(stops, 1);
  // Busy again: cleared, then a new flag acts again.
  bool cleared = false;
  for (Micros t = kStart + 30 * kMin + 10 * kS; t <= kStart + 31 * kMin && !cleared; t += 10 * kS) {
    v = watch.Sample(7, 1, kStart, t, 90, requeue, 30 * kS);
    cleared = v.change == IdleWatch::Change::kCleared;
    EXPECT_FALSE(v.stop.has_value());
  }
  EXPECT_TRUE(cleared);
  for (Micros t = kStart + 32 * kMin; t <= kStart + 50 * kMin && !v.stop; t += 10 * kS) {
    v = watch.Sample(7, 1, kStart, t, 2, requeue, 30 * kS);
  }
  EXPECT_TRUE(v.stop.has_value());
}

TEST(IdleWatchTest, ACancelCarriesTheFlagAsTheJobsReasonAndNotifyAsksNothing) {
  IdleWatch watch;
  watch.Output(8, kStart + 9 * kMin);  // output within the window: idle, not hung
  IdleWatch::Verdict v;
  for (Micros t = kStart; t <= kStart + 10 * kMin; t += 10 * kS) {
    v = watch.Sample(8, 1, kStart, t, 0, IdlePolicy{5, 10 * kMin, IdleAction::kCancel}, kS);
  }
  ASSERT_TRUE(v.stop.has_value());
  EXPECT_EQ(v.stop->after, AttemptEnd::kCancel);
  EXPECT_EQ(v.reason, "idle: GPU utilisation below 5% for 10m");
  // Its output stops: the flag turns to hung, which asks for nothing more.
  bool hung = false;
  for (Micros t = kStart + 10 * kMin + 10 * kS; t <= kStart + 30 * kMin; t += 10 * kS) {
    v = watch.Sample(8, 1, kStart, t, 0, IdlePolicy{5, 10 * kMin, IdleAction::kCancel}, kS);
    hung = hung || v.change == IdleWatch::Change::kHung;
    EXPECT_FALSE(v.stop.has_value()) << "one action per flag";
  }
  EXPECT_TRUE(hung);
  IdleWatch quiet;
  for (Micros t = kStart; t <= kStart + 60 * kMin; t += 10 * kS) {
    v = quiet.Sample(9, 1, kStart, t, 0, IdlePolicy{5, 10 * kMin, IdleAction::kNotify}, kS);
    EXPECT_FALSE(v.stop.has_value());
  }
  EXPECT_GT(quiet.Find(9)->idle_since, 0) << "flagged all the same";
}

TEST(IdleWatchTest, SamplesFallOnTheClocksGridAndSharesAreJudgedAgainstTheirShare) {
  EXPECT_EQ(IdleSampleAfter(0), kIdleSampleInterval);
  EXPECT_EQ(IdleSampleAfter(kIdleSampleInterval - 1), kIdleSampleInterval);
  EXPECT_EQ(IdleSampleAfter(kIdleSampleInterval), 2 * kIdleSampleInterval);
  EXPECT_DOUBLE_EQ(GrantUtilisation(1000, 40), 40);
  EXPECT_DOUBLE_EQ(GrantUtilisation(250, 25), 100);  // a quarter share fully used
  EXPECT_DOUBLE_EQ(GrantUtilisation(250, 80), 100);  // capped at the share
  EXPECT_DOUBLE_EQ(GrantUtilisation(500, 10), 20);
}

}  // namespace
}  // namespace tessera
