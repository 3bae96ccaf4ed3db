#include "sched/runtime_predictor.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

namespace tessera {

RuntimeFeatures FeaturesOf(const JobRecord& job, const QueueTree& tree) {
  RuntimeFeatures f;
  f.tenant = tree.tenant(job.queue);
  f.user = job.spec.user;
  f.name = job.spec.name;
  f.gpus = job.spec.TotalGpus();
  f.limit = job.spec.runtime_limit;
  return f;
}
namespace {

constexpr double kMicrosPerSecond = 1'000'000.0;

// Appends `field` with '\' and '|' escaped, then the terminator '|'.
void AppendField(std::string_view field, std::string* key) {
  for (char c : field) {
    if (c == '|' || c == '\\') key->push_back('\\');
    key->push_back(c);
  }
  key->push_back('|');
}

void AppendInt(int64_t value, std::string* key) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), value);
  if (ec == std::errc()) key->append(digits, end);
  key->push_back('|');
}

// Options from user input: keep every one in a range where Predict stays defined
// and positive.
RuntimePredictor::Options Sanitize(RuntimePredictor::Options options) {
  const RuntimePredictor::Options defaults;
  if (!(options.quantile >= 0.0 && options.quantile <= 1.0)) {
    options.quantile = std::isnan(options.quantile)
                           ? defaults.quantile
                           : std::clamp(options.quantile, 0.0, 1.0);
  }
  if (!(options.decay >= 0.0 && options.decay <= 1.0)) {
    options.decay = std::isnan(options.decay) ? defaults.decay
                                              : std::clamp(options.decay, 0.0, 1.0);
  }
  if (options.default_runtime <= 0) options.default_runtime = defaults.default_runtime;
  if (!(options.calibration_rate >= 0.0 && options.calibration_rate <= 1.0)) {
    options.calibration_rate = std::isnan(options.calibration_rate)
                                   ? defaults.calibration_rate
                                   : std::clamp(options.calibration_rate, 0.0, 1.0);
  }
  return options;
}

// A job name without its run number: "sweep-lr3-17" and "sweep-lr3-18" are the same
// experiment resubmitted, so they share history at the stem level.
std::string_view NameStem(std::string_view name) {
  while (!name.empty()) {
    const char c = name.back();
    if ((c < '0' || c > '9') && c != '-' && c != '_' && c != '.' && c != ' ') break;
    name.remove_suffix(1);
  }
  return name;
}

// The user's limit in whole seconds: users pick round limits, and the same limit
// again signals the same kind of job.
int64_t LimitSeconds(Micros limit) {
  return limit > 0 ? limit / static_cast<Micros>(kMicrosPerSecond) : 0;
}

// Levels in order of specificity, most specific first: the order kBlended trusts
// while no level has a track record (and among levels with equal records).
constexpr std::array<int, 10> kSpecificity = {0, 4, 5, 6, 7, 1, 8, 2, 9, 3};

}  // namespace

RuntimePredictor::RuntimePredictor(Options options)
    : options_(Sanitize(options)), calibrated_quantile_(options_.quantile) {
  RankLevels();
}

int RuntimePredictor::BinOf(Micros runtime) {
  const double seconds = static_cast<double>(runtime) / kMicrosPerSecond;
  if (!(seconds > 1.0)) return 0;
  const double bin = std::round(std::log2(seconds) * kBinsPerOctave);
  return static_cast<int>(std::min(bin, static_cast<double>(kBins - 1)));
}

Micros RuntimePredictor::ValueOf(double bin) {
  bin = std::clamp(bin, 0.0, static_cast<double>(kBins - 1));
  return static_cast<Micros>(
      std::llround(std::exp2(bin / kBinsPerOctave) * kMicrosPerSecond));
}

void RuntimePredictor::BuildKey(const RuntimeFeatures& job, int level,
                                std::string* key) {
  key->clear();
  switch (level) {
    case 0:  // tenant, user, name, GPUs
      AppendField(job.tenant, key);
      AppendField(job.user, key);
      AppendField(job.name, key);
      AppendInt(job.gpus, key);
      break;
    case 1:  // tenant, GPUs
      AppendField(job.tenant, key);
      AppendInt(job.gpus, key);
      break;
    case 2:  // tenant
      AppendField(job.tenant, key);
      break;
    case 3:  // all jobs
      break;
    case 4:  // tenant, user, name stem, GPUs
      AppendField(job.tenant, key);
      AppendField(job.user, key);
      AppendField(NameStem(job.name), key);
      AppendInt(job.gpus, key);
      key->push_back('s');
      break;
    case 5:  // tenant, user, limit
      AppendField(job.tenant, key);
      AppendField(job.user, key);
      AppendInt(LimitSeconds(job.limit), key);
      key->push_back('m');
      break;
    case 6:  // tenant, user
      AppendField(job.tenant, key);
      AppendField(job.user, key);
      key->push_back('u');
      break;
    case 7:  // tenant, limit
      AppendField(job.tenant, key);
      AppendInt(LimitSeconds(job.limit), key);
      key->push_back('l');
      break;
    case 8:  // limit
      AppendInt(LimitSeconds(job.limit), key);
      key->push_back('L');
      break;
    default:  // GPUs
      AppendInt(job.gpus, key);
      key->push_back('g');
      break;
  }
}

double RuntimePredictor::DecayedTotal(const Histogram& h) const {
  if (options_.decay == 1.0) return h.total;
  return h.total *
         std::pow(options_.decay, static_cast<double>(observations_ - h.epoch));
}

// Bin b holds runtimes whose log2 (in 1/kBinsPerOctave octaves) rounds to b, so it
// spans [b - 0.5, b + 0.5); the quantile interpolates linearly inside that span.
Micros RuntimePredictor::Quantile(const Histogram& h) const {
  return ValueOf(QuantileBin(h, options_.quantile));
}

double RuntimePredictor::QuantileBin(const Histogram& h, double quantile) {
  // Lazy decay scales every weight alike, so the raw weights give the quantile.
  const double target = quantile * h.total;
  double cumulative = 0;
  int last = 0;
  for (int b = 0; b < kBins; ++b) {
    const double w = h.weight[b];
    if (w <= 0) continue;
    last = b;
    if (cumulative + w >= target) {
      const double fraction = std::clamp((target - cumulative) / w, 0.0, 1.0);
      return std::max(b - 0.5 + fraction, 0.0);
    }
    cumulative += w;
  }
  return last + 0.5;  // only reached through rounding in the sums
}

Micros RuntimePredictor::Predict(const RuntimeFeatures& job) const {
  return options_.method == Method::kLevelCutoff ? PredictCutoff(job) : PredictBlended(job);
}

bool RuntimePredictor::Knows(const RuntimeFeatures& job) const {
  // The same tests as PredictCutoff and PredictBlended make before their fallback.
  const bool cutoff = options_.method == Method::kLevelCutoff;
  if (!cutoff && observations_ < std::max(options_.min_samples, 1)) {
    return false;
  }
  const double needed = cutoff ? std::max(options_.min_samples, 0) : 0.0;
  for (int i = 0; i < (cutoff ? kCutoffLevels : kLevels); ++i) {
    BuildKey(job, i, &key_buffer_);
    auto it = histograms_.find(key_buffer_);
    if (it == histograms_.end() || it->second.total <= 0) continue;
    const double n = DecayedTotal(it->second);
    if (cutoff ? n >= needed : n > 0) return true;
  }
  return false;
}

Micros RuntimePredictor::PredictCutoff(const RuntimeFeatures& job) const {
  const double needed = std::max(options_.min_samples, 0);
  for (int level = 0; level < kCutoffLevels; ++level) {
    BuildKey(job, level, &key_buffer_);
    auto it = histograms_.find(key_buffer_);
    if (it == histograms_.end()) continue;
    const Histogram& h = it->second;
    if (h.total <= 0 || DecayedTotal(h) < needed) continue;
    const Micros prediction = Quantile(h);
    return job.limit > 0 ? std::min(prediction, job.limit) : prediction;
  }
  return job.limit > 0 ? job.limit : options_.default_runtime;
}

Micros RuntimePredictor::PredictBlended(const RuntimeFeatures& job) const {
  // Walk the levels from the best track record down; each takes n / (n + shrink) of
  // the weight still unassigned, so a well-populated level answers nearly alone and a
  // sparse one is shrunk towards the next ones.
  const double shrink = std::max(options_.min_samples, 1);
  // Until min_samples jobs have finished at all, answer as with no data: a first
  // sample or two would swing every prediction, and the drivers, which may apply a
  // finish and a submission of the same instant in either order, would disagree.
  if (observations_ < std::max(options_.min_samples, 1)) {
    return job.limit > 0 ? job.limit : options_.default_runtime;
  }
  std::array<const Histogram*, kLevels> parts{};
  std::array<double, kLevels> scale{};  // per unit of raw weight
  int count = 0;
  double remaining = 1.0;
  for (int level : level_order_) {
    BuildKey(job, level, &key_buffer_);
    auto it = histograms_.find(key_buffer_);
    if (it == histograms_.end() || it->second.total <= 0) continue;
    const double n = DecayedTotal(it->second);
    if (!(n > 0)) continue;
    const double share = remaining * n / (n + shrink);
    parts[count] = &it->second;
    scale[count] = share / it->second.total;
    remaining -= share;
    ++count;
  }
  if (count == 0) return job.limit > 0 ? job.limit : options_.default_runtime;

  const double target = calibrated_quantile_ * (1.0 - remaining);
  double cumulative = 0;
  int last = 0;
  Micros prediction = 0;
  for (int b = 0; b < kBins; ++b) {
    double w = 0;
    for (int i = 0; i < count; ++i) w += scale[i] * parts[i]->weight[b];
    if (w <= 0) continue;
    last = b;
    if (cumulative + w >= target) {
      const double fraction = std::clamp((target - cumulative) / w, 0.0, 1.0);
      prediction = ValueOf(b - 0.5 + fraction);
      break;
    }
    cumulative += w;
  }
  if (prediction == 0) prediction = ValueOf(last + 0.5);  // rounding in the sums
  return job.limit > 0 ? std::min(prediction, job.limit) : prediction;
}

void RuntimePredictor::Add(Histogram* h, int bin) {
  if (h->epoch != observations_ && options_.decay != 1.0) {
    const double scale =
        std::pow(options_.decay, static_cast<double>(observations_ - h->epoch));
    for (double& w : h->weight) w *= scale;
    h->total *= scale;
  }
  h->weight[bin] += 1.0;
  h->total += 1.0;
  h->epoch = observations_;
}

void RuntimePredictor::ScoreLevels(const RuntimeFeatures& job, int bin) {
  // Each level with min_samples for this job is scored by the pinball loss of its own
  // quantile (in bins): the proper score for a quantile forecast, so a level ranks by
  // how well it would have answered alone where it had the data to.
  const double q = options_.quantile;
  const double needed = std::max(options_.min_samples, 1);
  for (int level = 0; level < kLevels; ++level) {
    LevelScore& score = scores_[level];
    score.loss *= options_.decay;
    score.count *= options_.decay;
    BuildKey(job, level, &key_buffer_);
    auto it = histograms_.find(key_buffer_);
    if (it == histograms_.end() || it->second.total <= 0 ||
        DecayedTotal(it->second) < needed) {
      continue;
    }
    const double predicted = QuantileBin(it->second, q);
    const double error = bin - predicted;
    score.loss += error >= 0 ? q * error : (q - 1.0) * error;
    score.count += 1.0;
  }
  RankLevels();
}

void RuntimePredictor::RankLevels() {
  // A level with few scores leans on the all-jobs level's record, which every job
  // updates once there are min_samples jobs at all.
  constexpr double kPriorScores = 20;
  const LevelScore& all = scores_[3];
  const double prior = all.count > 0 ? all.loss / all.count : 0;
  std::array<double, kLevels> mean{};
  for (int level = 0; level < kLevels; ++level) {
    mean[level] = (scores_[level].loss + kPriorScores * prior) /
                  (scores_[level].count + kPriorScores);
  }
  level_order_ = kSpecificity;
  std::stable_sort(level_order_.begin(), level_order_.end(),
                   [&](int a, int b) { return mean[a] < mean[b]; });
}

void RuntimePredictor::Observe(const RuntimeFeatures& job, Micros runtime) {
  const bool blended = options_.method == Method::kBlended;
  const int bin = BinOf(runtime);
  if (blended) {
    if (options_.calibration_rate > 0) {
      // Adaptive conformal inference: step the asked quantile up after a miss (runtime
      // above the prediction) and down after a hit, so that misses settle at
      // 1 - quantile of the jobs whatever the mixture's own bias. Bounded to [0, 1].
      const bool miss = runtime > PredictBlended(job);
      const double step =
          options_.calibration_rate * ((miss ? 1.0 : 0.0) - (1.0 - options_.quantile));
      calibrated_quantile_ = std::clamp(calibrated_quantile_ + step, 0.0, 1.0);
    }
    ScoreLevels(job, bin);
  }
  ++observations_;
  const int levels = blended ? kLevels : kCutoffLevels;
  for (int level = 0; level < levels; ++level) {
    BuildKey(job, level, &key_buffer_);
    Add(&histograms_.try_emplace(key_buffer_).first->second, bin);
  }
}

RuntimePredictor::State RuntimePredictor::Save() const {
  State state;
  state.observations = observations_;
  for (const auto& [key, h] : histograms_) {
    State::Histogram out;
    out.key = key;
    out.epoch = h.epoch;
    out.total = h.total;
    for (int b = 0; b < kBins; ++b) {
      if (h.weight[b] > 0) {
        out.bins.emplace_back(b, h.weight[b]);
      }
    }
    state.histograms.push_back(std::move(out));
  }
  if (options_.method == Method::kBlended) {
    State::Histogram calibration;
    calibration.key = kCalibrationKey;
    calibration.total = calibrated_quantile_;
    calibration.bins.emplace_back(0, calibrated_quantile_);
    for (int level = 0; level < kLevels; ++level) {
      calibration.bins.emplace_back(1 + 2 * level, scores_[level].loss);
      calibration.bins.emplace_back(2 + 2 * level, scores_[level].count);
    }
    state.histograms.push_back(std::move(calibration));
  }
  // Keys in order, so that equal states save equally.
  std::sort(state.histograms.begin(), state.histograms.end(),
            [](const State::Histogram& a, const State::Histogram& b) { return a.key < b.key; });
  return state;
}

Status RuntimePredictor::Restore(const State& state) {
  std::unordered_map<std::string, Histogram> histograms;
  double calibrated = options_.quantile;
  std::array<LevelScore, kLevels> scores{};
  for (const State::Histogram& in : state.histograms) {
    if (in.key == kCalibrationKey) {
      calibrated = -1;
      for (const auto& [slot, value] : in.bins) {
        if (slot < 0 || slot > 2 * kLevels || !(value >= 0)) {
          return InvalidArgumentError("runtime predictor: bad calibration entry");
        }
        if (slot == 0) {
          calibrated = value;
        } else {
          LevelScore& score = scores[(slot - 1) / 2];
          ((slot - 1) % 2 == 0 ? score.loss : score.count) = value;
        }
      }
      if (!(calibrated >= 0.0 && calibrated <= 1.0)) {
        return InvalidArgumentError("runtime predictor: bad calibrated quantile");
      }
      continue;
    }
    if (in.epoch < 0 || in.epoch > state.observations || !(in.total >= 0)) {
      return InvalidArgumentError("runtime predictor: histogram '" + in.key +
                                  "' has a bad epoch or total");
    }
    Histogram h;
    h.epoch = in.epoch;
    h.total = in.total;
    for (const auto& [bin, weight] : in.bins) {
      if (bin < 0 || bin >= kBins || !(weight >= 0)) {
        return InvalidArgumentError("runtime predictor: histogram '" + in.key +
                                    "' has a bad bin " + std::to_string(bin));
      }
      h.weight[static_cast<size_t>(bin)] = weight;
    }
    histograms[in.key] = std::move(h);
  }
  observations_ = state.observations;
  histograms_ = std::move(histograms);
  calibrated_quantile_ = calibrated;
  scores_ = scores;
  RankLevels();
  return Status::Ok();
}

}  // namespace tessera
