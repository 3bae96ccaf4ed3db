#include "server/modules/usage_report.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <set>
#include <utility>

#include "base/time_format.h"

namespace tessera {

double GpuSeconds(int64_t milli, Micros from, Micros to) {
  return static_cast<double>(milli) / 1000.0 * static_cast<double>(to - from) / 1e6;
}

Status CheckUsageQuery(Micros since, Micros until, std::string_view by) {
  if (by != "tenant" && by != "queue" && by != "job" && by != "user") {
    return InvalidArgumentError("by must be tenant, queue, job or user, got '" + std::string(by) +
                                "'");
  }
  if (until <= since) {
    return InvalidArgumentError("until must be after since");
  }
  return Status::Ok();
}

nlohmann::json SumUsage(const std::vector<UsageRow>& rows, Micros since, Micros until,
                        std::string_view by, std::string_view tenant) {
  struct Group {
    double gpu_hours = 0;
    double measured_gpu_hours = 0;  // of intervals whose utilisation was measured
    double used_gpu_hours = 0;
    std::set<uint64_t> jobs;
  };
  // Keyed by (job id, name) so that job ids sort as numbers and names as text.
  std::map<std::pair<uint64_t, std::string>, Group> groups;
  for (const UsageRow& r : rows) {
    const Micros begin = std::max(r.start_us, since);
    const Micros end = std::min(r.end_us, until);
    if (end <= begin || (!tenant.empty() && r.tenant != tenant)) {
      continue;
    }
    const auto key = by == "job"     ? std::make_pair(r.job, std::to_string(r.job))
                     : by == "queue" ? std::make_pair(uint64_t{0}, r.queue)
                                     : std::make_pair(uint64_t{0}, r.tenant);
    Group& g = groups[key];
    const double hours = static_cast<double>(end - begin) / 3.6e9;
    g.gpu_hours += static_cast<double>(r.gpu_milli) / 1000.0 * hours;
    if (r.used_gpu_milli >= 0) {
      g.measured_gpu_hours += static_cast<double>(r.gpu_milli) / 1000.0 * hours;
      g.used_gpu_hours += static_cast<double>(r.used_gpu_milli) / 1000.0 * hours;
    }
    g.jobs.insert(r.job);
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [key, g] : groups) {
    out.push_back({{"key", key.second},
                   {"gpu_hours", g.gpu_hours},
                   {"jobs", g.jobs.size()},
                   {"used_gpu_hours", g.used_gpu_hours},
                   {"measured_gpu_hours", g.measured_gpu_hours},
                   {"efficiency", g.measured_gpu_hours > 0
                                      ? nlohmann::json(g.used_gpu_hours / g.measured_gpu_hours)
                                      : nlohmann::json(nullptr)}});
  }
  return nlohmann::json{{"since", FormatRfc3339(since)},
                        {"until", FormatRfc3339(until)},
                        {"by", std::string(by)},
                        {"rows", std::move(out)}};
}

nlohmann::json UsageByUser(const nlohmann::json& by_job,
                           const std::map<uint64_t, JobOwner>& owners) {
  struct Group {
    double gpu_hours = 0, used_gpu_hours = 0, measured_gpu_hours = 0;
    int64_t jobs = 0;
  };
  std::map<std::pair<std::string, std::string>, Group> groups;  // (tenant, user)
  for (const nlohmann::json& row : by_job.value("rows", nlohmann::json::array())) {
    const std::string key = row.value("key", "");
    uint64_t job = 0;
    std::from_chars(key.data(), key.data() + key.size(), job);
    auto owner = owners.find(job);
    Group& g = groups[owner != owners.end()
                          ? std::make_pair(owner->second.tenant, owner->second.user)
                          : std::make_pair(std::string(), std::string())];
    g.gpu_hours += row.value("gpu_hours", 0.0);
    g.used_gpu_hours += row.value("used_gpu_hours", 0.0);
    g.measured_gpu_hours += row.value("measured_gpu_hours", 0.0);
    g.jobs += row.value("jobs", int64_t{0});
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [key, g] : groups) {
    out.push_back({{"key", key.second},
                   {"tenant", key.first},
                   {"gpu_hours", g.gpu_hours},
                   {"jobs", g.jobs},
                   {"used_gpu_hours", g.used_gpu_hours},
                   {"measured_gpu_hours", g.measured_gpu_hours},
                   {"efficiency", g.measured_gpu_hours > 0
                                      ? nlohmann::json(g.used_gpu_hours / g.measured_gpu_hours)
                                      : nlohmann::json(nullptr)}});
  }
  nlohmann::json result = by_job;
  result["by"] = "user";
  result["rows"] = std::move(out);
  return result;
}

Status CheckUsageSeriesQuery(Micros since, Micros until, Micros step) {
  if (until <= since) {
    return InvalidArgumentError("until must be after since");
  }
  if (step <= 0) {
    return InvalidArgumentError("step must be positive");
  }
  const int64_t buckets = (until - since + step - 1) / step;
  if (buckets > kMaxUsageBuckets) {
    return InvalidArgumentError("the window holds " + std::to_string(buckets) + " steps; at most " +
                                std::to_string(kMaxUsageBuckets) + ": use a larger step");
  }
  return Status::Ok();
}

nlohmann::json UsageSeries(const std::vector<UsageRow>& rows, Micros since, Micros until,
                           Micros step, std::string_view tenant,
                           const std::map<std::string, double>& quota_gpus) {
  const int64_t buckets = (until - since + step - 1) / step;
  // milli-GPU x microseconds per tenant and bucket.
  std::map<std::string, std::vector<double>> held;
  for (const auto& [t, q] : quota_gpus) {
    if (tenant.empty() || t == tenant) {
      held[t].assign(static_cast<size_t>(buckets), 0.0);
    }
  }
  for (const UsageRow& r : rows) {
    if (!tenant.empty() && r.tenant != tenant) {
      continue;
    }
    const Micros begin = std::max(r.start_us, since);
    const Micros end = std::min(r.end_us, until);
    if (end <= begin) {
      continue;
    }
    std::vector<double>& series = held[r.tenant];
    series.resize(static_cast<size_t>(buckets), 0.0);
    for (int64_t b = (begin - since) / step; b < buckets; ++b) {
      const Micros lo = std::max(begin, since + b * step);
      const Micros hi = std::min(end, since + (b + 1) * step);
      if (hi <= lo) {
        break;
      }
      series[static_cast<size_t>(b)] +=
          static_cast<double>(r.gpu_milli) * static_cast<double>(hi - lo);
    }
  }
  nlohmann::json times = nlohmann::json::array();
  for (int64_t b = 0; b < buckets; ++b) {
    times.push_back(FormatRfc3339(since + b * step));
  }
  nlohmann::json series = nlohmann::json::array();
  for (const auto& [t, values] : held) {
    nlohmann::json gpus = nlohmann::json::array();
    for (int64_t b = 0; b < buckets; ++b) {
      const Micros width = std::min(step, until - (since + b * step));
      gpus.push_back(values[static_cast<size_t>(b)] / 1000.0 / static_cast<double>(width));
    }
    auto q = quota_gpus.find(t);
    series.push_back({{"key", t},
                      {"gpus", std::move(gpus)},
                      {"quota_gpus", q != quota_gpus.end() ? nlohmann::json(q->second)
                                                           : nlohmann::json(nullptr)}});
  }
  return nlohmann::json{{"since", FormatRfc3339(since)},
                        {"until", FormatRfc3339(until)},
                        {"step_s", static_cast<double>(step) / 1e6},
                        {"by", "tenant"},
                        {"times", std::move(times)},
                        {"series", std::move(series)}};
}

}  // namespace tessera
