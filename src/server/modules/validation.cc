#include "server/modules/validation.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "api/units.h"

namespace tessera {
namespace {

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 64) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-';
  });
}

StatusOr<Micros> DurationField(const nlohmann::json& j, const char* field, Micros fallback,
                               Micros min) {
  if (!j.contains(field) || j[field].is_null()) {
    return fallback;
  }
  if (!j[field].is_string()) {
    return InvalidArgumentError(std::string(field) + ": expected a duration such as \"24h\", got " +
                                j[field].dump());
  }
  StatusOr<int64_t> d = ParseDurationMicros(j[field].get<std::string>());
  if (!d.ok()) {
    return InvalidArgumentError(std::string(field) + ": " + d.status().message());
  }
  if (d.value() < min) {
    return InvalidArgumentError(std::string(field) + ": at least " + FormatDuration(min) +
                                ", got " + j[field].get<std::string>());
  }
  return d.value();
}

Status CheckNodes(const std::string& nodes) {
  if (nodes.empty()) {
    return InvalidArgumentError("nodes: expected all, n1,n2 or label=value");
  }
  if (nodes == "all") {
    return Status::Ok();
  }
  const size_t eq = nodes.find('=');
  if (eq != std::string::npos) {
    if (eq == 0 || eq + 1 == nodes.size() || nodes.find(',') != std::string::npos) {
      return InvalidArgumentError("nodes: a label selector is one label=value, got '" + nodes +
                                  "'");
    }
    return Status::Ok();
  }
  std::stringstream in(nodes);
  std::string name;
  while (std::getline(in, name, ',')) {
    if (name.empty()) {
      return InvalidArgumentError("nodes: an empty node name in '" + nodes + "'");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ValidationCheck> ValidationCheckFromJson(const nlohmann::json& j) {
  if (!j.is_object()) {
    return InvalidArgumentError("a validation check must be a JSON object");
  }
  ValidationCheck c;
  if (!j.contains("name") || !j["name"].is_string() || !ValidName(j["name"].get<std::string>())) {
    return InvalidArgumentError("name: 1 to 64 letters, digits, '.', '_' or '-' (got " +
                                (j.contains("name") ? j["name"].dump() : std::string("nothing")) +
                                ")");
  }
  c.name = j["name"].get<std::string>();
  if (!j.contains("command") || !j["command"].is_string() ||
      j["command"].get<std::string>().empty()) {
    return InvalidArgumentError("command: a non-empty string is required");
  }
  c.command = j["command"].get<std::string>();
  if (c.command.size() > size_t{64} * 1024) {
    return InvalidArgumentError("command: at most 64 KiB");
  }
  TESSERA_ASSIGN_OR_RETURN(c.every, DurationField(j, "every", c.every, 60'000'000));
  TESSERA_ASSIGN_OR_RETURN(c.timeout, DurationField(j, "timeout", c.timeout, 1'000'000));
  TESSERA_ASSIGN_OR_RETURN(c.max_wait, DurationField(j, "max_wait", c.max_wait, 0));
  if (j.contains("nodes") && !j["nodes"].is_null()) {
    if (!j["nodes"].is_string()) {
      return InvalidArgumentError("nodes: expected all, n1,n2 or label=value, got " +
                                  j["nodes"].dump());
    }
    c.nodes = j["nodes"].get<std::string>();
  }
  TESSERA_RETURN_IF_ERROR(CheckNodes(c.nodes));
  if (j.contains("threshold") && !j["threshold"].is_null()) {
    const nlohmann::json& t = j["threshold"];
    double v = -1;
    if (t.is_number()) {
      v = t.get<double>();
    } else if (t.is_string()) {
      std::string text = t.get<std::string>();
      if (!text.empty() && text.back() == '%') {
        text.pop_back();
      }
      char* end = nullptr;
      v = std::strtod(text.c_str(), &end);
      if (text.empty() || end != text.c_str() + text.size()) {
        v = -1;
      }
    }
    if (!(v > 0 && v < 100)) {
      return InvalidArgumentError(
          "threshold: a percentage between 0 and 100 such as \"10%\", got " + t.dump());
    }
    c.threshold_percent = v;
  }
  if (j.contains("metric_direction") && !j["metric_direction"].is_null()) {
    const nlohmann::json& d = j["metric_direction"];
    if (d == "higher") {
      c.higher_is_better = true;
    } else if (d == "lower") {
      c.higher_is_better = false;
    } else {
      return InvalidArgumentError("metric_direction: higher or lower, got " + d.dump());
    }
  }
  if (j.contains("parallel") && !j["parallel"].is_null()) {
    if (!j["parallel"].is_number_integer() || j["parallel"].get<int64_t>() < 0 ||
        j["parallel"].get<int64_t>() > 100'000) {
      return InvalidArgumentError("parallel: a count of nodes (0: a tenth of them), got " +
                                  j["parallel"].dump());
    }
    c.parallel = j["parallel"].get<int>();
  }
  if (j.contains("queue") && !j["queue"].is_null()) {
    if (!j["queue"].is_string()) {
      return InvalidArgumentError("queue: expected a queue name, got " + j["queue"].dump());
    }
    c.queue = j["queue"].get<std::string>();
  }
  if (j.contains("created_us") && j["created_us"].is_number_integer()) {
    c.created = j["created_us"].get<int64_t>();
  }
  return c;
}

nlohmann::json ValidationCheckToJson(const ValidationCheck& c) {
  return {{"name", c.name},
          {"command", c.command},
          {"every", FormatDuration(c.every)},
          {"nodes", c.nodes},
          {"threshold", FormatValidationNumber(c.threshold_percent) + "%"},
          {"metric_direction", c.higher_is_better ? "higher" : "lower"},
          {"timeout", FormatDuration(c.timeout)},
          {"max_wait", FormatDuration(c.max_wait)},
          {"parallel", c.parallel},
          {"queue", c.queue},
          {"created_us", c.created}};
}

bool ValidationSelects(const std::string& nodes, const std::string& node,
                       const std::vector<std::pair<std::string, std::string>>& labels) {
  if (nodes == "all") {
    return true;
  }
  const size_t eq = nodes.find('=');
  if (eq != std::string::npos) {
    const std::string key = nodes.substr(0, eq);
    const std::string value = nodes.substr(eq + 1);
    return std::any_of(labels.begin(), labels.end(),
                       [&](const auto& l) { return l.first == key && l.second == value; });
  }
  std::stringstream in(nodes);
  std::string name;
  while (std::getline(in, name, ',')) {
    if (name == node) {
      return true;
    }
  }
  return false;
}

Micros ValidationDueAt(const ValidationCheck& check, Micros last_start) {
  return (last_start > 0 ? last_start : check.created) + check.every;
}

// A check program prints its values one JSON object per line; other lines are its own
// output, passed over.
constexpr char kValueLineStart = '{';

std::vector<ValidationValue> ParseValidationOutput(const std::string& output) {
  std::vector<ValidationValue> out;
  std::stringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    const size_t begin = line.find_first_not_of(" \t\r");
    if (begin == std::string::npos || line[begin] != kValueLineStart) {
      continue;
    }
    const nlohmann::json j = nlohmann::json::parse(line.substr(begin), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("gpu") || !j["gpu"].is_number_integer() ||
        !j.contains("metric") || !j["metric"].is_string() || !j.contains("value") ||
        !j["value"].is_number()) {
      continue;
    }
    const int64_t gpu = j["gpu"].get<int64_t>();
    const std::string metric = j["metric"].get<std::string>();
    const double value = j["value"].get<double>();
    if (gpu < 0 || gpu > 1024 || metric.empty() || metric.size() > 128 || !std::isfinite(value)) {
      continue;
    }
    out.push_back(ValidationValue{static_cast<int>(gpu), metric, value});
  }
  return out;
}

std::optional<double> ValidationBaseline(const std::vector<double>& history) {
  if (history.empty()) {
    return std::nullopt;
  }
  if (history.size() < static_cast<size_t>(kBaselineRuns)) {
    return history.front();
  }
  std::vector<double> last(history.end() - kBaselineRuns, history.end());
  std::sort(last.begin(), last.end());
  return last[last.size() / 2];  // kBaselineRuns is odd: the middle one
}

ValidationVerdict JudgeValidationValue(const ValidationValue& value,
                                       const std::vector<double>& history, double threshold_percent,
                                       bool higher_is_better) {
  ValidationVerdict v;
  v.value = value;
  v.baseline = ValidationBaseline(history);
  if (!v.baseline) {
    return v;
  }
  const double base = *v.baseline;
  if (base == 0) {
    // No scale to take a percentage of: only a move in the bad direction counts.
    v.change_percent = 0;
    v.regressed = higher_is_better ? value.value < 0 : value.value > 0;
    return v;
  }
  v.change_percent = (value.value - base) / std::fabs(base) * 100.0;
  const double worse = higher_is_better ? -v.change_percent : v.change_percent;
  v.regressed = worse > threshold_percent;
  return v;
}

std::string FormatValidationNumber(double v) {
  std::array<char, 64> buf{};
  std::snprintf(buf.data(), buf.size(), "%.4f", v);
  std::string s = buf.data();
  while (!s.empty() && s.back() == '0') {
    s.pop_back();
  }
  if (!s.empty() && s.back() == '.') {
    s.pop_back();
  }
  return s == "-0" ? "0" : s;
}

std::string RegressionReason(const std::string& check, const ValidationVerdict& v,
                             double threshold_percent) {
  const double pct = std::round(std::fabs(v.change_percent) * 10.0) / 10.0;
  return "validation " + check + ": " + v.value.metric + " " +
         FormatValidationNumber(v.value.value) + " is " + FormatValidationNumber(pct) + " % " +
         (v.change_percent < 0 ? "below" : "above") + " baseline " +
         FormatValidationNumber(v.baseline.value_or(0)) + " (threshold " +
         FormatValidationNumber(threshold_percent) + " %)";
}

// Both look the node up under each check (there are few), not walk every slot: the
// controller asks at every node event and for every node of each pass.
bool ValidationBook::Holds(const std::string& node) const { return !HoldReason(node).empty(); }

std::string ValidationBook::HoldReason(const std::string& node) const {
  for (const auto& [check, unused] : checks) {
    auto it = slots.find({check, node});
    if (it == slots.end()) {
      continue;
    }
    if (it->second.job != 0) {
      return "running validation " + check + " (job " + std::to_string(it->second.job) + ")";
    }
    if (it->second.waiting_since > 0) {
      return "held for validation " + check + ": takes no new work until its jobs end";
    }
  }
  return "";
}

int ValidationBook::HeldFor(const std::string& check) const {
  int n = 0;
  for (auto it = slots.lower_bound({check, ""}); it != slots.end() && it->first.first == check;
       ++it) {
    n += it->second.waiting_since > 0 || it->second.job != 0 ? 1 : 0;
  }
  return n;
}

std::vector<double> ValidationBook::History(const std::string& check, const std::string& node,
                                            int gpu, const std::string& metric) const {
  std::vector<double> out;
  auto it = runs.find({check, node});
  if (it == runs.end()) {
    return out;
  }
  for (const ValidationRun& run : it->second) {
    if (run.outcome != "passed" && run.outcome != "regressed") {
      continue;
    }
    for (const ValidationVerdict& v : run.results) {
      if (v.value.gpu == gpu && v.value.metric == metric && !v.regressed) {
        out.push_back(v.value.value);
      }
    }
  }
  return out;
}

void ValidationBook::Record(ValidationRun run) {
  std::vector<ValidationRun>& kept = runs[{run.check, run.node}];
  kept.push_back(std::move(run));
  if (kept.size() > kRunsKept) {
    kept.erase(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(kept.size() - kRunsKept));
  }
}

nlohmann::json ValidationRunToJson(const ValidationRun& run) {
  nlohmann::json results = nlohmann::json::array();
  for (const ValidationVerdict& v : run.results) {
    nlohmann::json r = {{"gpu", v.value.gpu},
                        {"metric", v.value.metric},
                        {"value", v.value.value},
                        {"baseline", v.baseline ? nlohmann::json(*v.baseline) : nlohmann::json()},
                        {"change_percent", v.change_percent},
                        {"regressed", v.regressed}};
    results.push_back(std::move(r));
  }
  return {{"check", run.check},   {"node", run.node},       {"job", run.job},
          {"time_us", run.time},  {"outcome", run.outcome}, {"exit_code", run.exit_code},
          {"reason", run.reason}, {"results", results}};
}

StatusOr<ValidationRun> ValidationRunFromJson(const nlohmann::json& j) {
  if (!j.is_object() || !j.value("check", nlohmann::json()).is_string() ||
      !j.value("node", nlohmann::json()).is_string() ||
      !j.value("time_us", nlohmann::json()).is_number_integer() ||
      !j.value("outcome", nlohmann::json()).is_string()) {
    return InternalError("stored validation run is malformed: " + j.dump());
  }
  ValidationRun run;
  run.check = j["check"].get<std::string>();
  run.node = j["node"].get<std::string>();
  run.job = j.value("job", uint64_t{0});
  run.time = j["time_us"].get<int64_t>();
  run.outcome = j["outcome"].get<std::string>();
  run.exit_code = j.value("exit_code", 0);
  run.reason = j.value("reason", "");
  if (j.contains("results") && j["results"].is_array()) {
    for (const nlohmann::json& r : j["results"]) {
      if (!r.is_object() || !r.value("gpu", nlohmann::json()).is_number_integer() ||
          !r.value("metric", nlohmann::json()).is_string() ||
          !r.value("value", nlohmann::json()).is_number()) {
        continue;
      }
      ValidationVerdict v;
      v.value = ValidationValue{r["gpu"].get<int>(), r["metric"].get<std::string>(),
                                r["value"].get<double>()};
      if (r.contains("baseline") && r["baseline"].is_number()) {
        v.baseline = r["baseline"].get<double>();
      }
      v.change_percent = r.value("change_percent", 0.0);
      v.regressed = r.value("regressed", false);
      run.results.push_back(std::move(v));
    }
  }
  return run;
}

}  // namespace tessera
