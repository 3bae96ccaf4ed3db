// RuntimePredictor: learns job runtimes online from finished jobs.
//
// Runtimes are kept in log2-space histograms at several levels of detail, each keyed
// by some of the job's features: (tenant, user, name, GPUs), (tenant, user, name stem,
// GPUs), (tenant, user, limit), (tenant, user), (tenant, limit), (tenant, GPUs),
// (limit), (GPUs), (tenant), and all jobs. A prediction is a quantile (default 0.7:
// better a bit long than short, since backfill trusts it), capped by the user's limit
// when there is one. With no samples at all it falls back to the user's limit, and
// without a limit to Options::default_runtime. Old samples decay, so the predictor
// follows drift.
//
// Method::kBlended (the default) ranks the levels by their track record: before
// learning each finished job, every level that had min_samples for it is scored by the
// pinball loss of its own quantile (the proper score of a quantile forecast), decayed
// like the samples. A prediction walks the job's levels from the best record down, each
// taking n / (n + min_samples) of the weight still unassigned, and reads the quantile
// of that mixture: a well-populated good level answers nearly alone, a sparse one is
// shrunk towards the next. Which features carry information (a user's limit, a job
// name, the GPU count) differs between clusters, so it is learned, not fixed. The
// quantile asked of the mixture is corrected online (adaptive conformal inference), so
// that the share of runtimes at or below the prediction tracks Options::quantile.
// Method::kLevelCutoff is the earlier predictor (the most specific of four levels with
// min_samples, its raw quantile), kept to measure against.
// Pure: no clock, no I/O. Thread safety: none; even concurrent Predict calls race
// (Predict reuses a key buffer so that it allocates nothing).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "model/queue_tree.h"
#include "sched/job_record.h"

namespace tessera {

struct RuntimeFeatures {
  std::string tenant;
  std::string user;
  std::string name;  // job name or application
  int gpus = 0;
  Micros limit = 0;  // user's runtime limit; 0: none
};

// The features of a job as the scheduler knows it.
RuntimeFeatures FeaturesOf(const JobRecord& job, const QueueTree& tree);

class RuntimePredictor {
 public:
  enum class Method { kBlended, kLevelCutoff };
  struct Options {
    Method method = Method::kBlended;
    double quantile = 0.7;        // target share of runtimes at or below the prediction
    // kLevelCutoff: a level needs this many (decayed) samples to be used. kBlended: the
    // shrinkage constant (a level of n samples weighs n / (n + min_samples)).
    int min_samples = 5;
    double decay = 0.999;         // each observation multiplies older weights by this
    // kBlended: step of the online quantile correction per observation (0: none).
    double calibration_rate = 0.005;
    Micros default_runtime = 3600LL * 1'000'000;  // with no data and no limit
  };

  RuntimePredictor() : RuntimePredictor(Options{}) {}
  explicit RuntimePredictor(Options options);

  Micros Predict(const RuntimeFeatures& job) const;
  // Whether Predict answers from what was learned; false when it answers the fallback
  // (the user's limit, else default_runtime) because no level has the samples it needs,
  // so that a policy can order the job by what is known of it instead.
  bool Knows(const RuntimeFeatures& job) const;
  void Observe(const RuntimeFeatures& job, Micros runtime);

  int64_t observations() const { return observations_; }
  // The quantile kBlended asks of its mixture now (Options::quantile, corrected).
  double calibrated_quantile() const { return calibrated_quantile_; }

  // What the predictor has learned, to keep across restarts: each histogram's key,
  // decay epoch, total and non-empty bins. kBlended's calibrated quantile and level
  // scores travel as one more entry, key kCalibrationKey (no level's key looks like
  // it): bin 0 the quantile, bins 1 + 2l and 2 + 2l level l's loss and count. So the
  // stored format is unchanged, and states saved before it existed restore (the
  // quantile then starts from Options::quantile, the ranking from specificity).
  struct State {
    struct Histogram {
      std::string key;
      int64_t epoch = 0;
      double total = 0;
      std::vector<std::pair<int, double>> bins;  // (bin, weight), weight > 0
    };
    int64_t observations = 0;
    std::vector<Histogram> histograms;
  };
  State Save() const;
  // Replaces what was learned by `state`; InvalidArgument (nothing changed) for a bin
  // out of range, a negative weight or an epoch after the observation count.
  Status Restore(const State& state);
  static constexpr const char* kCalibrationKey = "#calibration";

 private:
  // Log2 histogram: 8 bins per octave from 1 s to 2^24 s.
  static constexpr int kBinsPerOctave = 8;
  static constexpr int kOctaves = 24;
  static constexpr int kBins = kBinsPerOctave * kOctaves + 1;
  struct Histogram {
    std::vector<double> weight = std::vector<double>(kBins, 0.0);
    double total = 0;
    int64_t epoch = 0;  // observations_ at the last update, for lazy decay
  };
  static int BinOf(Micros runtime);
  static Micros ValueOf(double bin);
  // Levels 0-3 are kLevelCutoff's, from most to least specific, keys "t|u|n|g|",
  // "t|g|", "t|", "" (each field escaped and terminated by '|', so keys of different
  // levels never collide). Levels 4 on are kBlended's own: their keys end in a letter
  // naming the level, so they never collide with the first four nor each other.
  static constexpr int kCutoffLevels = 4;
  static constexpr int kLevels = 10;
  // Writes the key of `level` into `*key`, reusing its storage.
  static void BuildKey(const RuntimeFeatures& job, int level, std::string* key);
  double DecayedTotal(const Histogram& h) const;
  Micros Quantile(const Histogram& h) const;
  // The `quantile` of `h` in (fractional) bins.
  static double QuantileBin(const Histogram& h, double quantile);
  Micros PredictCutoff(const RuntimeFeatures& job) const;
  Micros PredictBlended(const RuntimeFeatures& job) const;
  // Adds one sample of `bin` to `h`, decaying what it held first.
  void Add(Histogram* h, int bin);
  // kBlended's track record of each level, before `job` (runtime `bin`) is learned.
  void ScoreLevels(const RuntimeFeatures& job, int bin);
  void RankLevels();  // level_order_ from scores_
  struct LevelScore {
    double loss = 0;   // decayed sum of pinball losses, in bins
    double count = 0;  // decayed number of scores
  };

  Options options_;
  int64_t observations_ = 0;
  double calibrated_quantile_ = 0;
  std::array<LevelScore, kLevels> scores_{};
  std::array<int, kLevels> level_order_{};  // best track record first
  std::unordered_map<std::string, Histogram> histograms_;
  mutable std::string key_buffer_;  // scratch for BuildKey
};

}  // namespace tessera
