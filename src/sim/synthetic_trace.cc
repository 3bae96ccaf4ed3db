// A synthetic job trace (job_trace.h): seeded, with tunable job sizes and durations, so
// that a policy can be judged on workloads no published trace has.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <numbers>
#include <string>
#include <vector>

#include "api/units.h"
#include "base/rng.h"
#include "base/strings.h"
#include "sim/job_trace.h"

namespace tessera {
namespace {

constexpr int64_t kMaxJobs = 1'000'000;
constexpr int kMaxGpus = 4096;
constexpr Micros kMeanInterarrival = 60'000'000;  // --load rescales submissions anyway
constexpr Micros kMinDuration = 1'000'000;

struct SyntheticParams {
  int64_t jobs = 1000;
  uint64_t seed = 1;
  std::vector<std::pair<int, int64_t>> gpus = {{1, 70}, {2, 10}, {4, 10}, {8, 10}};
  Micros median = 30LL * 60 * 1'000'000;
  double sigma = 1.5;
  Micros max = 7LL * 24 * 3600 * 1'000'000;
  int64_t tenants = 0;
};

Status Bad(std::string_view key, std::string_view value, std::string_view why) {
  return InvalidArgumentError("synthetic trace: " + std::string(key) + "=" + std::string(value) +
                              ": " + std::string(why));
}

StatusOr<int64_t> Count(std::string_view key, std::string_view value, int64_t lo, int64_t hi) {
  StatusOr<int64_t> n = ParseInt64(value);
  if (!n.ok() || *n < lo || *n > hi) {
    return Bad(key, value, "expected a whole number from " + std::to_string(lo) + " to " +
                               std::to_string(hi));
  }
  return *n;
}

// "1:70/2:10/8:20": GPUs per job and their relative weights.
Status ParseSizes(std::string_view value, std::vector<std::pair<int, int64_t>>* out) {
  out->clear();
  for (std::string_view part : Split(value, '/')) {
    std::vector<std::string_view> gw = Split(part, ':');
    StatusOr<int64_t> gpus = gw.size() == 2 ? ParseInt64(gw[0]) : InvalidArgumentError("");
    StatusOr<int64_t> weight = gw.size() == 2 ? ParseInt64(gw[1]) : InvalidArgumentError("");
    if (!gpus.ok() || !weight.ok() || *gpus < 1 || *gpus > kMaxGpus || *weight < 1 ||
        *weight > 1'000'000) {
      return Bad("gpus", value, "expected GPUS:WEIGHT pairs joined by '/', e.g. 1:70/8:30");
    }
    out->emplace_back(static_cast<int>(*gpus), *weight);
  }
  return out->empty() ? Bad("gpus", value, "no sizes") : Status::Ok();
}

StatusOr<SyntheticParams> ParseParams(std::string_view text) {
  SyntheticParams p;
  if (text.empty()) {
    return p;
  }
  for (std::string_view item : Split(text, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgumentError("synthetic trace: '" + std::string(item) +
                                  "' is not KEY=VALUE");
    }
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1);
    if (key == "jobs") {
      TESSERA_ASSIGN_OR_RETURN(p.jobs, Count(key, value, 1, kMaxJobs));
    } else if (key == "seed") {
      TESSERA_ASSIGN_OR_RETURN(int64_t seed, Count(key, value, 0, INT64_MAX));
      p.seed = static_cast<uint64_t>(seed);
    } else if (key == "tenants") {
      TESSERA_ASSIGN_OR_RETURN(p.tenants, Count(key, value, 0, 10'000));
    } else if (key == "gpus") {
      TESSERA_RETURN_IF_ERROR(ParseSizes(value, &p.gpus));
    } else if (key == "median" || key == "max") {
      StatusOr<int64_t> d = ParseDurationMicros(value);
      if (!d.ok() || *d < kMinDuration) {
        return Bad(key, value, "expected a duration of at least 1s, e.g. 30m");
      }
      (key == "median" ? p.median : p.max) = *d;
    } else if (key == "sigma") {
      double sigma = -1;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), sigma);
      if (ec != std::errc() || end != value.data() + value.size() || !(sigma >= 0) ||
          sigma > 5) {
        return Bad(key, value, "expected a number from 0 to 5");
      }
      p.sigma = sigma;
    } else {
      return InvalidArgumentError("synthetic trace: unknown key '" + std::string(key) +
                                  "' (jobs, seed, gpus, median, sigma, max, tenants)");
    }
  }
  if (p.median > p.max) {
    return InvalidArgumentError("synthetic trace: median is above max");
  }
  return p;
}

// A standard normal variate (Box-Muller).
double Normal(Rng& rng) {
  const double u = 1.0 - rng.UniformDouble();  // (0, 1]
  const double v = rng.UniformDouble();
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * v);
}

}  // namespace

StatusOr<JobTrace> MakeSyntheticTrace(std::string_view params) {
  TESSERA_ASSIGN_OR_RETURN(SyntheticParams p, ParseParams(params));
  int64_t total_weight = 0;
  for (const auto& [gpus, weight] : p.gpus) {
    total_weight += weight;
  }
  Pcg32 rng(p.seed);
  JobTrace trace;
  trace.name = "synthetic";
  trace.jobs.reserve(static_cast<size_t>(p.jobs));
  const double log_median = std::log(static_cast<double>(p.median));
  Micros at = 0;
  for (int64_t i = 0; i < p.jobs; ++i) {
    TraceJob& j = trace.jobs.emplace_back();
    j.name = "synthetic-" + std::to_string(i);
    if (i > 0) {  // Poisson arrivals: exponential gaps
      at += std::llround(-std::log(1.0 - rng.UniformDouble()) *
                         static_cast<double>(kMeanInterarrival));
    }
    j.submit = at;
    int64_t pick = static_cast<int64_t>(rng.UniformDouble() * static_cast<double>(total_weight));
    for (const auto& [gpus, weight] : p.gpus) {
      j.gpus = gpus;
      if (pick < weight) {
        break;
      }
      pick -= weight;
    }
    const double seconds = std::exp(log_median + p.sigma * Normal(rng));
    j.duration = std::clamp<Micros>(std::llround(seconds), kMinDuration, p.max);
    if (p.tenants > 0) {
      j.tenant = "t" + std::to_string(rng.Uniform(static_cast<uint32_t>(p.tenants)));
    }
  }
  return trace;
}

}  // namespace tessera
