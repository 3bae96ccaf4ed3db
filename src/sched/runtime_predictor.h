// RuntimePredictor: learns job runtimes online from finished jobs.
//
// Runtimes are kept in log2-space histograms at several levels of detail: (tenant,
// user, name, GPUs), (tenant, GPUs), (tenant), and all jobs. A prediction comes from
// the most specific level with enough samples, as a quantile (default 0.7: better a
// bit long than short, since backfill trusts it), and is capped by the user's limit
// when there is one. With no samples at all it falls back to the user's limit, and
// without a limit to Options::default_runtime. Old samples decay, so the
// predictor follows drift.
// Pure: no clock, no I/O. Thread safety: none; even concurrent Predict calls race
// (Predict reuses a key buffer so that it allocates nothing).
#pragma once

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
  struct Options {
    double quantile = 0.7;        // of the runtime distribution at the chosen level
    int min_samples = 5;          // a level needs this many (decayed) samples to be used
    double decay = 0.999;         // each observation multiplies older weights by this
    Micros default_runtime = 3600LL * 1'000'000;  // with no data and no limit
  };

  RuntimePredictor() : RuntimePredictor(Options{}) {}
  explicit RuntimePredictor(Options options);

  Micros Predict(const RuntimeFeatures& job) const;
  void Observe(const RuntimeFeatures& job, Micros runtime);

  int64_t observations() const { return observations_; }

  // What the predictor has learned, to keep across restarts: each histogram's key,
  // decay epoch, total and non-empty bins.
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
  // Levels from most to least specific; keys are "t|u|n|g|", "t|g|", "t|", "" (each
  // field escaped and terminated by '|', so keys of different levels never collide).
  static constexpr int kLevels = 4;
  // Writes the key of `level` (0: most specific) into `*key`, reusing its storage.
  static void BuildKey(const RuntimeFeatures& job, int level, std::string* key);
  double DecayedTotal(const Histogram& h) const;
  Micros Quantile(const Histogram& h) const;

  Options options_;
  int64_t observations_ = 0;
  std::unordered_map<std::string, Histogram> histograms_;
  mutable std::string key_buffer_;  // scratch for BuildKey
};

}  // namespace tessera
