#include "cli/attempt_views.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/strings.h"
#include "base/time_format.h"
#include "cli/json_read.h"
#include "cli/table.h"

namespace tessera {

using json = nlohmann::json;
using namespace json_read;  // NOLINT: the CLI's JSON readers

namespace {

Micros SecondsToMicros(double s) { return static_cast<Micros>(std::llround(s * 1e6)); }

bool HasAttemptFields(const json& job) { return Field(job, "attempt_history") != nullptr; }

// The current attempt's run time so far, when one runs.
std::optional<Micros> CurrentRun(const json& job, Micros now) {
  std::optional<Micros> start = Time(job, "attempt_start_time");
  if (!start.has_value()) {
    return std::nullopt;
  }
  return std::max<Micros>(0, now - *start);
}

// "node-1,node-2" and "2 H100-80GB, 1 3g.40gb" for the tasks of one attempt.
std::pair<std::string, std::string> Where(const json& tasks) {
  std::vector<std::string> nodes;
  std::map<std::string, int> gpus;  // model or MIG profile -> count
  std::vector<std::string> order;
  for (const json& t : tasks) {
    const std::string node = Str(t, "node");
    if (!node.empty() && std::find(nodes.begin(), nodes.end(), node) == nodes.end()) {
      nodes.push_back(node);
    }
    for (const json& g : Array(t, "gpus")) {
      std::string kind = Str(g, "mig_profile");
      if (kind.empty()) {
        kind = Str(g, "model");
        const int64_t milli = Int(g, "milli");
        if (milli > 0 && milli < 1000) {
          kind += " share";
        }
      }
      if (kind.empty()) {
        kind = "GPU";
      }
      if (gpus[kind]++ == 0) {
        order.push_back(kind);
      }
    }
  }
  std::vector<std::string> parts;
  for (const std::string& k : order) {
    parts.push_back(std::to_string(gpus[k]) + " " + k);
  }
  return {nodes.empty() ? "-" : Join(nodes, ","), parts.empty() ? "-" : Join(parts, ", ")};
}

std::string Ended(const json& a) {
  const std::string ended = Str(a, "ended");
  if (const std::string detail = Str(a, "detail"); !detail.empty()) {
    return ended + ": " + detail;  // gpu-fault: XID 79 (...) on node n1 GPU 0
  }
  const int64_t code = Int(a, "exit_code");
  const int64_t signal = Int(a, "signal");
  if (ended == "failed" || ended == "task lost") {
    if (signal != 0) {
      return ended + " (signal " + std::to_string(signal) + ")";
    }
    if (code != 0) {
      return ended + " (exit " + std::to_string(code) + ")";
    }
  }
  return ended.empty() ? "-" : ended;
}

}  // namespace

std::string AttemptRunTime(const json& job, Micros now) {
  if (!HasAttemptFields(job)) {  // an older controller: from the first start
    std::optional<Micros> start = Time(job, "start_time");
    if (!start.has_value()) {
      return "-";
    }
    return FormatAge(Time(job, "end_time").value_or(now) - *start);
  }
  if (std::optional<Micros> run = CurrentRun(job, now)) {
    return FormatAge(*run);
  }
  const json& history = Array(job, "attempt_history");
  if (Time(job, "end_time").has_value() && !history.empty()) {
    return FormatAge(SecondsToMicros(OptNumber(history.back(), "run_seconds").value_or(0)));
  }
  return "-";
}

std::string TotalRunTime(const json& job, Micros now) {
  if (!HasAttemptFields(job)) {
    return AttemptRunTime(job, now);
  }
  const std::optional<Micros> run = CurrentRun(job, now);
  if (!run.has_value() && Array(job, "attempt_history").empty()) {
    return "-";
  }
  return FormatAge(SecondsToMicros(OptNumber(job, "ended_attempts_run_seconds").value_or(0)) +
                   run.value_or(0));
}

std::string RunTimeWithTotal(const json& job, Micros now) {
  const std::string current = AttemptRunTime(job, now);
  const int64_t attempts = Int(job, "attempts");
  if (!HasAttemptFields(job) || attempts < 2) {
    return current;
  }
  return current + " (" + TotalRunTime(job, now) + " over " + std::to_string(attempts) +
         " attempts)";
}

std::string AttemptsTable(const json& job, Micros now) {
  const json& history = Array(job, "attempt_history");
  const std::optional<Micros> run = CurrentRun(job, now);
  if (history.empty() && !run.has_value()) {
    return "";
  }
  Table table({"  #", "START", "END", "RUN", "NODES", "GPUS", "ENDED"});
  table.SetRightAligned(3);
  for (const json& a : history) {
    const auto [nodes, gpus] = Where(Array(a, "tasks"));
    const std::string start = Str(a, "start_time");
    const std::string end = Str(a, "end_time");
    table.AddRow({"  " + std::to_string(Int(a, "attempt")), start.empty() ? "-" : start,
                  end.empty() ? "-" : end,
                  FormatAge(SecondsToMicros(OptNumber(a, "run_seconds").value_or(0))), nodes, gpus,
                  Ended(a)});
  }
  if (run.has_value()) {
    const auto [nodes, gpus] = Where(Array(job, "tasks"));
    table.AddRow({"  " + std::to_string(Int(job, "attempts")), Str(job, "attempt_start_time"), "-",
                  FormatAge(*run), nodes, gpus, Str(job, "state")});
  }
  std::string text = "Attempt history:\n" + table.Render();
  const json* restart = Field(job, "restart");
  if (restart != nullptr && restart->is_object()) {
    std::vector<std::string> on;
    for (const json& c : Array(*restart, "on")) {
      if (c.is_string()) {
        on.push_back(c.get<std::string>());
      }
    }
    text += "Restarts: " + std::to_string(Int(*restart, "used")) + " of " +
            std::to_string(Int(*restart, "max")) + " used (on " + Join(on, ", ") + ")";
    if (const std::string at = Str(*restart, "restart_at"); !at.empty()) {
      text += "; next attempt at " + at;
    }
    text += "\n";
  }
  return text;
}

}  // namespace tessera
