#include "sched/runtime_predictor.h"

#include <algorithm>
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

void AppendInt(int value, std::string* key) {
  char digits[16];
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
  return options;
}

}  // namespace

RuntimePredictor::RuntimePredictor(Options options) : options_(Sanitize(options)) {}

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
    default:  // all jobs
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
  // Lazy decay scales every weight alike, so the raw weights give the quantile.
  const double target = options_.quantile * h.total;
  double cumulative = 0;
  int last = 0;
  for (int b = 0; b < kBins; ++b) {
    const double w = h.weight[b];
    if (w <= 0) continue;
    last = b;
    if (cumulative + w >= target) {
      const double fraction = std::clamp((target - cumulative) / w, 0.0, 1.0);
      return ValueOf(b - 0.5 + fraction);
    }
    cumulative += w;
  }
  return ValueOf(last + 0.5);  // only reached through rounding in the sums
}

Micros RuntimePredictor::Predict(const RuntimeFeatures& job) const {
  const double needed = std::max(options_.min_samples, 0);
  for (int level = 0; level < kLevels; ++level) {
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

void RuntimePredictor::Observe(const RuntimeFeatures& job, Micros runtime) {
  ++observations_;
  const int bin = BinOf(runtime);
  for (int level = 0; level < kLevels; ++level) {
    BuildKey(job, level, &key_buffer_);
    Histogram& h = histograms_.try_emplace(key_buffer_).first->second;
    if (h.epoch != observations_ && options_.decay != 1.0) {
      const double scale =
          std::pow(options_.decay, static_cast<double>(observations_ - h.epoch));
      for (double& w : h.weight) w *= scale;
      h.total *= scale;
    }
    h.weight[bin] += 1.0;
    h.total += 1.0;
    h.epoch = observations_;
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
  // Keys in order, so that equal states save equally.
  std::sort(state.histograms.begin(), state.histograms.end(),
            [](const State::Histogram& a, const State::Histogram& b) { return a.key < b.key; });
  return state;
}

Status RuntimePredictor::Restore(const State& state) {
  std::unordered_map<std::string, Histogram> histograms;
  for (const State::Histogram& in : state.histograms) {
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
  return Status::Ok();
}

}  // namespace tessera
