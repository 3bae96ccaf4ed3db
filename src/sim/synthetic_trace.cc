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
  // Relative share of the jobs per tenant (t0 first); empty: uniform.
  std::vector<int64_t> tenant_weights;
  bool batch = false;  // arrival=batch: every job submitted at 0
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

// "10/1": each tenant's relative share of the jobs, t0 first.
Status ParseTenantWeights(std::string_view value, std::vector<int64_t>* out) {
  out->clear();
  for (std::string_view part : Split(value, '/')) {
    StatusOr<int64_t> weight = ParseInt64(part);
    // At most 10,000 each, so that the total of up to 10,000 tenants fits a draw.
    if (!weight.ok() || *weight < 1 || *weight > 10'000) {
      return Bad("tenant_weights", value,
                 "expected whole numbers from 1 to 10000 joined by '/', one per tenant "
                 "(t0 first), e.g. 10/1");
    }
    out->push_back(*weight);
  }
  if (out->size() < 2 || out->size() > 10'000) {
    return Bad("tenant_weights", value, "expected 2 to 10000 weights");
  }
  return Status::Ok();
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
    } else if (key == "tenant_weights") {
      TESSERA_RETURN_IF_ERROR(ParseTenantWeights(value, &p.tenant_weights));
    } else if (key == "gpus") {
      TESSERA_RETURN_IF_ERROR(ParseSizes(value, &p.gpus));
    } else if (key == "median" || key == "max") {
      StatusOr<int64_t> d = ParseDurationMicros(value);
      if (!d.ok() || *d < kMinDuration) {
        return Bad(key, value, "expected a duration of at least 1s, e.g. 30m");
      }
      (key == "median" ? p.median : p.max) = *d;
    } else if (key == "arrival") {
      if (value != "poisson" && value != "batch") {
        return Bad(key, value, "expected poisson or batch");
      }
      p.batch = value == "batch";
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
                                  "' (jobs, seed, gpus, median, sigma, max, tenants, "
                                  "tenant_weights, arrival)");
    }
  }
  if (!p.tenant_weights.empty()) {
    const auto n = static_cast<int64_t>(p.tenant_weights.size());
    // tenants= may be left out; given, it must agree (a typo must not drop a tenant).
    if (p.tenants != 0 && p.tenants != n) {
      return InvalidArgumentError("synthetic trace: tenants=" + std::to_string(p.tenants) +
                                  " but tenant_weights has " + std::to_string(n) + " weights");
    }
    p.tenants = n;
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
  int64_t tenant_total = 0;
  for (int64_t w : p.tenant_weights) {
    tenant_total += w;
  }
  const double log_median = std::log(static_cast<double>(p.median));
  Micros at = 0;
  for (int64_t i = 0; i < p.jobs; ++i) {
    TraceJob& j = trace.jobs.emplace_back();
    j.name = "synthetic-" + std::to_string(i);
    if (i > 0) {  // Poisson arrivals: exponential gaps
      // Drawn for a batch too, so that it holds the same jobs as the seed's Poisson trace.
      const Micros gap = std::llround(-std::log(1.0 - rng.UniformDouble()) *
                                      static_cast<double>(kMeanInterarrival));
      at += p.batch ? 0 : gap;
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
    if (!p.tenant_weights.empty()) {
      int64_t pick_tenant = static_cast<int64_t>(rng.Uniform(static_cast<uint32_t>(tenant_total)));
      size_t t = 0;
      while (pick_tenant >= p.tenant_weights[t]) {
        pick_tenant -= p.tenant_weights[t++];
      }
      j.tenant = "t" + std::to_string(t);
    } else if (p.tenants > 0) {
      j.tenant = "t" + std::to_string(rng.Uniform(static_cast<uint32_t>(p.tenants)));
    }
  }
  return trace;
}

}  // namespace tessera
