#include "sched/runtime_predictor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "base/clock.h"
#include "base/testing/time_units.h"

namespace tessera {
namespace {

using testing::kSecond;
// One histogram bin is 1/8 octave: a factor of 2^(1/8), about 9%.
constexpr double kOneBin = 0.09;

RuntimeFeatures Job(std::string tenant, std::string user = "u", std::string name = "n",
                    int gpus = 1, Micros limit = 0) {
  RuntimeFeatures f;
  f.tenant = std::move(tenant);
  f.user = std::move(user);
  f.name = std::move(name);
  f.gpus = gpus;
  f.limit = limit;
  return f;
}

// The tests from here to the Restore ones describe the level cut-off (the earlier
// predictor, Method::kLevelCutoff); the blended method has its own below.
RuntimePredictor::Options Cutoff() {
  RuntimePredictor::Options options;
  options.method = RuntimePredictor::Method::kLevelCutoff;
  return options;
}

RuntimePredictor::Options NoDecay() {
  RuntimePredictor::Options options = Cutoff();
  options.decay = 1.0;
  return options;
}

void ExpectNear(Micros actual, Micros expected, double relative) {
  EXPECT_NEAR(static_cast<double>(actual), static_cast<double>(expected),
              relative * static_cast<double>(expected))
      << "actual " << actual / static_cast<double>(kSecond) << " s, expected "
      << expected / static_cast<double>(kSecond) << " s";
}

TEST(RuntimePredictorTest, NoDataFallsBackToLimitThenDefault) {
  RuntimePredictor::Options options = Cutoff();
  options.default_runtime = 123 * kSecond;
  RuntimePredictor predictor(options);
  EXPECT_EQ(predictor.Predict(Job("a", "u", "n", 1, 50 * kSecond)), 50 * kSecond);
  EXPECT_EQ(predictor.Predict(Job("a")), 123 * kSecond);
}

TEST(RuntimePredictorTest, OneObservationIsNotEnough) {
  RuntimePredictor predictor(Cutoff());
  predictor.Observe(Job("a"), 100 * kSecond);
  EXPECT_EQ(predictor.observations(), 1);
  EXPECT_EQ(predictor.Predict(Job("a", "u", "n", 1, 500 * kSecond)), 500 * kSecond);
  EXPECT_EQ(predictor.Predict(Job("a")), RuntimePredictor::Options{}.default_runtime);
}

TEST(RuntimePredictorTest, LearnsTenantRuntimeWithinOneBin) {
  RuntimePredictor predictor(Cutoff());
  for (int i = 0; i < 20; ++i) predictor.Observe(Job("a"), 100 * kSecond);
  ExpectNear(predictor.Predict(Job("a")), 100 * kSecond, kOneBin);
  // A new user and job name of the same tenant fall back to the tenant's levels.
  ExpectNear(predictor.Predict(Job("a", "other", "other", 1)), 100 * kSecond, kOneBin);
  ExpectNear(predictor.Predict(Job("a", "other", "other", 8)), 100 * kSecond, kOneBin);
}

TEST(RuntimePredictorTest, QuantilePicksTheSideOfABimodalDistribution) {
  for (double quantile : {0.3, 0.7}) {
    RuntimePredictor::Options options = NoDecay();
    options.quantile = quantile;
    RuntimePredictor predictor(options);
    for (int i = 0; i < 50; ++i) {
      predictor.Observe(Job("a"), 10 * kSecond);
      predictor.Observe(Job("a"), 1000 * kSecond);
    }
    const Micros expected = quantile < 0.5 ? 10 * kSecond : 1000 * kSecond;
    ExpectNear(predictor.Predict(Job("a")), expected, kOneBin);
  }
}

TEST(RuntimePredictorTest, QuantileWithDefaultDecay) {
  RuntimePredictor predictor(Cutoff());  // decay 0.999: the two modes weigh nearly alike
  for (int i = 0; i < 50; ++i) {
    predictor.Observe(Job("a"), 10 * kSecond);
    predictor.Observe(Job("a"), 1000 * kSecond);
  }
  ExpectNear(predictor.Predict(Job("a")), 1000 * kSecond, kOneBin);
}

TEST(RuntimePredictorTest, SpecificLevelWinsWhenItHasEnoughSamples) {
  RuntimePredictor predictor(NoDecay());
  // The tenant's other jobs run 1000 s; user u's job "train" on 4 GPUs runs 60 s.
  for (int i = 0; i < 50; ++i) predictor.Observe(Job("a", "v", "eval", 1), 1000 * kSecond);
  for (int i = 0; i < 5; ++i) predictor.Observe(Job("a", "u", "train", 4), 60 * kSecond);
  ExpectNear(predictor.Predict(Job("a", "u", "train", 4)), 60 * kSecond, kOneBin);
  // Same tenant and GPUs, another job: the (tenant, GPUs) level has the 5 samples too.
  ExpectNear(predictor.Predict(Job("a", "w", "other", 4)), 60 * kSecond, kOneBin);
  // Same tenant, other GPU count: the tenant level, dominated by the 1000 s jobs.
  ExpectNear(predictor.Predict(Job("a", "w", "other", 2)), 1000 * kSecond, kOneBin);
}

TEST(RuntimePredictorTest, GeneralLevelUsedWhenSpecificHasTooFewSamples) {
  RuntimePredictor predictor(NoDecay());
  for (int i = 0; i < 50; ++i) predictor.Observe(Job("a", "v", "eval", 1), 1000 * kSecond);
  for (int i = 0; i < 4; ++i) predictor.Observe(Job("a", "u", "train", 4), 60 * kSecond);
  // 4 < min_samples at the two specific levels: the tenant level answers.
  ExpectNear(predictor.Predict(Job("a", "u", "train", 4)), 1000 * kSecond, kOneBin);
  predictor.Observe(Job("a", "u", "train", 4), 60 * kSecond);
  ExpectNear(predictor.Predict(Job("a", "u", "train", 4)), 60 * kSecond, kOneBin);
}

TEST(RuntimePredictorTest, AllJobsLevelServesAnUnknownTenant) {
  RuntimePredictor predictor(Cutoff());
  for (int i = 0; i < 20; ++i) predictor.Observe(Job("a"), 300 * kSecond);
  ExpectNear(predictor.Predict(Job("new-tenant")), 300 * kSecond, kOneBin);
}

TEST(RuntimePredictorTest, EmptyTenantDoesNotShareTheAllJobsHistogram) {
  RuntimePredictor::Options options = NoDecay();
  options.quantile = 0.4;
  RuntimePredictor predictor(options);
  for (int i = 0; i < 5; ++i) predictor.Observe(Job(""), 100 * kSecond);
  for (int i = 0; i < 10; ++i) predictor.Observe(Job("b"), 1000 * kSecond);
  // All jobs: 5 x 100 s and 10 x 1000 s; the 40% quantile is on the 1000 s side. Had
  // tenant "" shared the all-jobs histogram, it would hold 10 x 100 s and the answer
  // would be 100 s.
  ExpectNear(predictor.Predict(Job("c")), 1000 * kSecond, kOneBin);
  // Tenant "": only its own 100 s samples.
  ExpectNear(predictor.Predict(Job("", "x", "y", 3)), 100 * kSecond, kOneBin);
}

TEST(RuntimePredictorTest, SeparatorInFieldsDoesNotMixLevels) {
  RuntimePredictor predictor(NoDecay());
  // Tenant "a|2" at the tenant level must not be read as tenant "a" with 2 GPUs.
  for (int i = 0; i < 10; ++i) predictor.Observe(Job("a|2", "u", "n", 1), 10 * kSecond);
  for (int i = 0; i < 10; ++i) predictor.Observe(Job("a", "u", "n", 1), 1000 * kSecond);
  ExpectNear(predictor.Predict(Job("a", "z", "z", 2)), 1000 * kSecond, kOneBin);
  ExpectNear(predictor.Predict(Job("a|2", "z", "z", 2)), 10 * kSecond, kOneBin);
}

TEST(RuntimePredictorTest, LimitCapsThePrediction) {
  RuntimePredictor predictor(Cutoff());
  for (int i = 0; i < 20; ++i) predictor.Observe(Job("a"), 1000 * kSecond);
  EXPECT_EQ(predictor.Predict(Job("a", "u", "n", 1, 300 * kSecond)), 300 * kSecond);
  // A limit above the prediction leaves it alone.
  ExpectNear(predictor.Predict(Job("a", "u", "n", 1, 5000 * kSecond)), 1000 * kSecond,
             kOneBin);
}

TEST(RuntimePredictorTest, DecayFollowsDrift) {
  RuntimePredictor::Options options = Cutoff();
  options.decay = 0.99;
  RuntimePredictor predictor(options);
  for (int i = 0; i < 200; ++i) predictor.Observe(Job("a"), 10 * kSecond);
  ExpectNear(predictor.Predict(Job("a")), 10 * kSecond, kOneBin);
  for (int i = 0; i < 2000; ++i) predictor.Observe(Job("a"), 1000 * kSecond);
  ExpectNear(predictor.Predict(Job("a")), 1000 * kSecond, kOneBin);
  EXPECT_EQ(predictor.observations(), 2200);
}

TEST(RuntimePredictorTest, DecayAppliesToLevelsNotUpdatedLately) {
  RuntimePredictor::Options options = Cutoff();
  options.decay = 0.9;
  RuntimePredictor predictor(options);
  for (int i = 0; i < 10; ++i) predictor.Observe(Job("a"), 100 * kSecond);
  ExpectNear(predictor.Predict(Job("a")), 100 * kSecond, kOneBin);
  // Tenant b's jobs age tenant a's samples without touching a's histograms:
  // 10 samples x 0.9^30 < min_samples, so a falls through to the all-jobs level.
  for (int i = 0; i < 30; ++i) predictor.Observe(Job("b"), 1000 * kSecond);
  ExpectNear(predictor.Predict(Job("a")), 1000 * kSecond, kOneBin);
}

TEST(RuntimePredictorTest, ExtremeRuntimesClampToTheEndBins) {
  RuntimePredictor::Options options = NoDecay();
  options.quantile = 0.0;
  RuntimePredictor tiny(options);
  for (int i = 0; i < 10; ++i) tiny.Observe(Job("a"), 0);
  for (int i = 0; i < 10; ++i) tiny.Observe(Job("b"), -5);
  EXPECT_EQ(tiny.Predict(Job("a")), kSecond);  // bin 0 is 1 s
  EXPECT_EQ(tiny.Predict(Job("b")), kSecond);

  options.quantile = 1.0;
  RuntimePredictor huge(options);
  const Micros kMax = (int64_t{1} << 24) * kSecond;
  for (int i = 0; i < 10; ++i) huge.Observe(Job("a"), 100 * kMax);
  EXPECT_EQ(huge.Predict(Job("a")), kMax);
}

TEST(RuntimePredictorTest, PredictionIsAlwaysPositive) {
  for (double quantile : {0.0, 0.5, 1.0}) {
    RuntimePredictor::Options options = Cutoff();
    options.quantile = quantile;
    options.min_samples = 0;
    RuntimePredictor predictor(options);
    EXPECT_GT(predictor.Predict(Job("a")), 0);
    predictor.Observe(Job("a"), 1);
    predictor.Observe(Job("a"), 0);
    EXPECT_GT(predictor.Predict(Job("a")), 0);
    EXPECT_GT(predictor.Predict(Job("b", "x", "y", 0)), 0);
  }
}

TEST(RuntimePredictorTest, OutOfRangeOptionsAreSanitized) {
  RuntimePredictor::Options options = Cutoff();
  options.quantile = 7.0;
  options.decay = 3.0;
  options.default_runtime = -1;
  RuntimePredictor predictor(options);
  EXPECT_GT(predictor.Predict(Job("a")), 0);
  for (int i = 0; i < 20; ++i) predictor.Observe(Job("a"), 100 * kSecond);
  // quantile clamps to 1 (top of the bin), decay to 1: still about 100 s.
  ExpectNear(predictor.Predict(Job("a")), 100 * kSecond, kOneBin);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST(RuntimePredictorTest, ARestoredPredictorPredictsAndLearnsAsTheOriginal) {
  RuntimePredictor original;
  for (int i = 0; i < 40; ++i) {
    original.Observe(Job("t", "alice", "train", 8), (600 + 10 * i) * kSecond);
    original.Observe(Job("t", "bob", "eval", 1), 60 * kSecond);
    original.Observe(Job("u"), (3000 + i) * kSecond);
  }
  RuntimePredictor restored;
  ASSERT_TRUE(restored.Restore(original.Save()).ok());
  EXPECT_EQ(restored.observations(), original.observations());
  for (const RuntimeFeatures& f :
       {Job("t", "alice", "train", 8), Job("t", "bob", "eval", 1), Job("t", "carol", "x", 8),
        Job("u"), Job("new")}) {
    EXPECT_EQ(restored.Predict(f), original.Predict(f)) << f.tenant << "/" << f.name;
  }
  // Decay continues from the same epoch: both learn a shift alike.
  for (int i = 0; i < 30; ++i) {
    original.Observe(Job("t", "alice", "train", 8), 7200 * kSecond);
    restored.Observe(Job("t", "alice", "train", 8), 7200 * kSecond);
  }
  EXPECT_EQ(restored.Predict(Job("t", "alice", "train", 8)),
            original.Predict(Job("t", "alice", "train", 8)));
  EXPECT_EQ(restored.Save().histograms.size(), original.Save().histograms.size());
}

TEST(RuntimePredictorTest, RestoreRejectsABadStateAndKeepsWhatItHad) {
  RuntimePredictor p;
  for (int i = 0; i < 10; ++i) {
    p.Observe(Job("t"), 100 * kSecond);
  }
  const Micros before = p.Predict(Job("t"));
  RuntimePredictor::State bad = p.Save();
  bad.histograms[0].bins.emplace_back(100000, 1.0);
  EXPECT_EQ(p.Restore(bad).code(), StatusCode::kInvalidArgument);
  bad = p.Save();
  bad.histograms[0].epoch = bad.observations + 1;
  EXPECT_EQ(p.Restore(bad).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.Predict(Job("t")), before);
}

}  // namespace
}  // namespace tessera

// Method::kBlended.
namespace tessera {
namespace {

using testing::kHour;

TEST(BlendedPredictorTest, NoDataFallsBackToLimitThenDefault) {
  RuntimePredictor predictor;
  EXPECT_EQ(predictor.Predict(Job("a", "u", "n", 1, 50 * kSecond)), 50 * kSecond);
  EXPECT_EQ(predictor.Predict(Job("a")), RuntimePredictor::Options{}.default_runtime);
}

TEST(BlendedPredictorTest, WaitsForMinSamplesJobsThenUsesSparseLevels) {
  RuntimePredictor predictor;
  for (int i = 0; i < 4; ++i) predictor.Observe(Job("a"), 100 * kSecond);
  EXPECT_EQ(predictor.Predict(Job("a", "u", "n", 1, 500 * kSecond)), 500 * kSecond);
  EXPECT_EQ(predictor.Predict(Job("a")), RuntimePredictor::Options{}.default_runtime);
  predictor.Observe(Job("b"), 100 * kSecond);
  ExpectNear(predictor.Predict(Job("a")), 100 * kSecond, kOneBin);
  // Unlike the cut-off, tenant b's one sample already counts, shrunk towards the rest.
  predictor.Observe(Job("b", "v", "m", 1), 10'000 * kSecond);
  const Micros b = predictor.Predict(Job("b", "v", "m", 1));
  EXPECT_GT(b, 150 * kSecond);
  EXPECT_LT(b, 10'000 * kSecond);
}

// Knows is true exactly when Predict answers from what was learned, not its fallback:
// for both methods, before and after the samples each needs.
TEST(BlendedPredictorTest, KnowsOnlyWhenThePredictionIsLearned) {
  for (bool cutoff : {false, true}) {
    SCOPED_TRACE(cutoff ? "cut-off" : "blended");
    RuntimePredictor::Options options = cutoff ? Cutoff() : RuntimePredictor::Options{};
    options.default_runtime = 123'456 * kSecond;  // far from every runtime learned
    RuntimePredictor predictor(options);
    const RuntimeFeatures job = Job("a");
    int knew_at = -1;
    for (int i = 0; i < 8; ++i) {
      const bool learned = predictor.Predict(job) != options.default_runtime;
      EXPECT_EQ(predictor.Knows(job), learned) << i << " jobs finished";
      if (learned && knew_at < 0) knew_at = i;
      predictor.Observe(Job("a", "u", "n" + std::to_string(i)), 100 * kSecond);
    }
    // Blended: from min_samples jobs on; the cut-off needs min_samples at one level,
    // which the decay keeps just short of until the sixth.
    EXPECT_EQ(knew_at, cutoff ? 6 : 5);
  }
  // A limit is a fallback, not knowledge.
  RuntimePredictor empty;
  EXPECT_FALSE(empty.Knows(Job("a", "u", "n", 1, 600 * kSecond)));
}

// One tenant and user whose runtimes the limit tells apart (10 s under a 2 h limit,
// 1000 s under a 20 h one) and, separately, the job name (stem "quick" or "slow"):
// the levels holding those features earn the best records and answer.
TEST(BlendedPredictorTest, LearnsWhichFeatureCarriesTheRuntime) {
  RuntimePredictor::Options options;
  options.calibration_rate = 0;
  RuntimePredictor by_limit(options);
  RuntimePredictor by_name(options);
  for (int i = 0; i < 100; ++i) {
    by_limit.Observe(Job("a", "u", "job-" + std::to_string(i), 1, 2 * kHour), 10 * kSecond);
    by_limit.Observe(Job("a", "u", "job-" + std::to_string(i), 1, 20 * kHour),
                     1000 * kSecond);
    by_name.Observe(Job("a", "u", "quick-" + std::to_string(i), 1, 20 * kHour),
                    10 * kSecond);
    by_name.Observe(Job("a", "u", "slow-" + std::to_string(i), 1, 20 * kHour),
                    1000 * kSecond);
  }
  ExpectNear(by_limit.Predict(Job("a", "u", "job-new", 1, 2 * kHour)), 10 * kSecond, kOneBin);
  ExpectNear(by_limit.Predict(Job("a", "u", "job-new", 1, 20 * kHour)), 1000 * kSecond,
             kOneBin);
  ExpectNear(by_name.Predict(Job("a", "u", "quick-1000", 1, 20 * kHour)), 10 * kSecond, kOneBin);
  ExpectNear(by_name.Predict(Job("a", "u", "slow-1000", 1, 20 * kHour)), 1000 * kSecond,
             kOneBin);

  // The cut-off reads the (tenant, user, name, GPUs) level only for names it has
  // seen; for a new one it falls to (tenant, GPUs), where both modes mix: the 0.7
  // quantile lands on the 1000 s side for all.
  RuntimePredictor cutoff(Cutoff());
  for (int i = 0; i < 100; ++i) {
    cutoff.Observe(Job("a", "u", "quick-" + std::to_string(i), 1), 10 * kSecond);
    cutoff.Observe(Job("a", "u", "slow-" + std::to_string(i), 1), 1000 * kSecond);
  }
  ExpectNear(cutoff.Predict(Job("a", "u", "quick-1000", 1)), 1000 * kSecond, kOneBin);
}

TEST(BlendedPredictorTest, ColdStartByGpuCount) {
  // Tenant a: 8-GPU jobs run 10,000 s, 1-GPU jobs 100 s. A new tenant's 8-GPU job
  // borrows the (GPUs) level; the cut-off only had all jobs, mostly 1-GPU, to go by.
  RuntimePredictor::Options options;
  options.calibration_rate = 0;
  RuntimePredictor predictor(options);
  RuntimePredictor cutoff(Cutoff());
  for (int i = 0; i < 200; ++i) {
    const bool big = i % 4 == 0;
    const Micros runtime = (big ? 10'000 : 100) * kSecond;
    predictor.Observe(Job("a", "u", "n", big ? 8 : 1), runtime);
    cutoff.Observe(Job("a", "u", "n", big ? 8 : 1), runtime);
  }
  ExpectNear(predictor.Predict(Job("b", "v", "m", 8)), 10'000 * kSecond, 2 * kOneBin);
  ExpectNear(predictor.Predict(Job("b", "v", "m", 1)), 100 * kSecond, 2 * kOneBin);
  ExpectNear(cutoff.Predict(Job("b", "v", "m", 8)), 100 * kSecond, kOneBin);
}

// Log-uniform runtimes over 4 octaves whose centre drifts up an octave per 1,000
// jobs: with no decay every histogram lags, so its 0.7 quantile is too short for far
// more than 30% of jobs. The online correction brings the share back near 30%.
TEST(BlendedPredictorTest, CalibrationHoldsTheQuantileUnderDrift) {
  auto too_short_share = [](RuntimePredictor::Options options) {
    options.decay = 1.0;
    RuntimePredictor predictor(options);
    uint64_t state = 12345;
    int misses = 0, scored = 0;
    for (int i = 0; i < 6000; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      const double u = static_cast<double>(state >> 11) / 9007199254740992.0;
      const auto runtime = static_cast<Micros>(100.0 * std::exp2(4 * u + i / 1000.0) * kSecond);
      if (i >= 3000) {
        ++scored;
        misses += runtime > predictor.Predict(Job("a"));
      }
      predictor.Observe(Job("a"), runtime);
    }
    return static_cast<double>(misses) / scored;
  };
  RuntimePredictor::Options blended;
  RuntimePredictor::Options uncorrected;
  uncorrected.calibration_rate = 0;
  EXPECT_GT(too_short_share(Cutoff()), 0.5);
  EXPECT_GT(too_short_share(uncorrected), 0.5);
  EXPECT_NEAR(too_short_share(blended), 0.3, 0.05);
}

TEST(BlendedPredictorTest, RestoresAStateSavedBeforeItExisted) {
  // A state of the cut-off predictor: the four old levels, no calibration entry.
  RuntimePredictor old(Cutoff());
  for (int i = 0; i < 30; ++i) old.Observe(Job("t", "alice", "train", 8), 600 * kSecond);
  const RuntimePredictor::State state = old.Save();
  ASSERT_EQ(state.histograms.size(), 4u);
  RuntimePredictor restored;
  ASSERT_TRUE(restored.Restore(state).ok());
  EXPECT_EQ(restored.observations(), 30);
  EXPECT_DOUBLE_EQ(restored.calibrated_quantile(), RuntimePredictor::Options{}.quantile);
  ExpectNear(restored.Predict(Job("t", "alice", "train", 8)), 600 * kSecond, kOneBin);
  ExpectNear(restored.Predict(Job("t", "bob", "x", 8)), 600 * kSecond, kOneBin);
}

TEST(BlendedPredictorTest, SaveRestoreKeepsCalibrationAndRanking) {
  RuntimePredictor original;
  for (int i = 0; i < 300; ++i) {
    const Micros limit = (i % 3 + 1) * kHour;
    original.Observe(Job("t", "u", "job", 1, limit), limit / 7 + (i % 5) * kSecond);
    original.Observe(Job("s", "v", "x-" + std::to_string(i % 7), 2), (60 + i) * kSecond);
  }
  EXPECT_NE(original.calibrated_quantile(), RuntimePredictor::Options{}.quantile);
  RuntimePredictor restored;
  ASSERT_TRUE(restored.Restore(original.Save()).ok());
  EXPECT_DOUBLE_EQ(restored.calibrated_quantile(), original.calibrated_quantile());
  for (int i = 0; i < 50; ++i) {
    for (RuntimePredictor* p : {&original, &restored}) {
      p->Observe(Job("t", "u", "job", 1, 2 * kHour), 900 * kSecond);
    }
  }
  for (const RuntimeFeatures& f : {Job("t", "u", "job", 1, 2 * kHour),
                                   Job("t", "w", "job", 1, 3 * kHour), Job("s", "v", "x-3", 2),
                                   Job("new", "n", "n", 4)}) {
    EXPECT_EQ(restored.Predict(f), original.Predict(f)) << f.tenant << "/" << f.name;
  }
  EXPECT_DOUBLE_EQ(restored.calibrated_quantile(), original.calibrated_quantile());
}

TEST(BlendedPredictorTest, RestoreRejectsABadCalibrationEntry) {
  RuntimePredictor p;
  for (int i = 0; i < 10; ++i) p.Observe(Job("t"), 100 * kSecond);
  const Micros before = p.Predict(Job("t"));
  RuntimePredictor::State bad = p.Save();
  for (auto& h : bad.histograms) {
    if (h.key == RuntimePredictor::kCalibrationKey) h.bins[0].second = 1.5;
  }
  EXPECT_EQ(p.Restore(bad).code(), StatusCode::kInvalidArgument);
  bad = p.Save();
  for (auto& h : bad.histograms) {
    if (h.key == RuntimePredictor::kCalibrationKey) h.bins.emplace_back(99, 1.0);
  }
  EXPECT_EQ(p.Restore(bad).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.Predict(Job("t")), before);
}

}  // namespace
}  // namespace tessera
