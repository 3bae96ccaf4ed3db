// Validation runs: admin-defined checks (a burn-in, a diagnostic, a benchmark) that the
// controller runs on each node it selects, every `every`, with the node reserved for
// the check alone; their per-GPU results are compared with each GPU's own baseline.
//
// This header is the pure part, with no controller state: definitions and their JSON,
// node selection, when a node is due, the results a check prints, and the baseline and
// regression maths. The module's part (holding nodes, starting the check job, judging
// its output, draining) is modules/validation_runs.h.
//
// Results: a check prints JSON lines on stdout, {"gpu":0,"metric":"matmul_tflops",
// "value":312.4}; other lines are ignored. A GPU's baseline for a metric is the median of
// its last kBaselineRuns passing results (the first result when there are fewer, that
// is, the baseline is never the value being judged); a result regresses when it is worse
// than the baseline by more than the threshold, in the metric's direction.
//
// Thread safety: values and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"

namespace tessera {

inline constexpr int kBaselineRuns = 5;
// The tenant the check jobs run as (its own Unix identity from the pool).
inline constexpr const char* kValidationTenant = "_validation";

struct ValidationCheck {
  std::string name;     // [A-Za-z0-9._-]{1,64}
  std::string command;  // run with /bin/sh -c
  Micros every = 24LL * 3600 * 1'000'000;
  // "all", "n1,n2" (node names) or "label=value".
  std::string nodes = "all";
  double threshold_percent = 10.0;         // how much worse than the baseline is a regression
  bool higher_is_better = true;            // --metric-direction higher|lower
  Micros timeout = 10LL * 60 * 1'000'000;  // a run longer than this fails (drains)
  // How long a due node may wait for its running jobs to end before the run is skipped
  // until its next slot (a busy node is never preempted for a check).
  Micros max_wait = 2LL * 3600 * 1'000'000;
  // Nodes held for this check at once (waiting or running); 0: a tenth of the nodes it
  // selects, at least one.
  int parallel = 0;
  std::string queue;  // the queue charged; "": the tree's first queue
  Micros created = 0;
};

// Parses an API body ({"name", "command", "every": "24h", "nodes", "threshold": "10%",
// "metric_direction": "higher", "timeout": "10m", "max_wait": "2h", "parallel",
// "queue"}); errors name the field.
StatusOr<ValidationCheck> ValidationCheckFromJson(const nlohmann::json& j);
// The stored and shown form (durations as text, as the parser reads them back).
nlohmann::json ValidationCheckToJson(const ValidationCheck& check);

// Whether the node (name and labels) is one the check runs on. `nodes` was validated.
bool ValidationSelects(const std::string& nodes, const std::string& node,
                       const std::vector<std::pair<std::string, std::string>>& labels);

// When the check is next due on a node last started at `last_start` (0: never): a
// node never run is due `every` after the check was created.
Micros ValidationDueAt(const ValidationCheck& check, Micros last_start);

struct ValidationValue {
  int gpu = -1;
  std::string metric;
  double value = 0;
};
// The result lines of a check's output ({"gpu":N,"metric":"...","value":X}); other
// lines, and lines with a missing or mistyped field, are ignored.
std::vector<ValidationValue> ParseValidationOutput(const std::string& output);

// A value judged against its GPU's history for that metric.
struct ValidationVerdict {
  ValidationValue value;
  std::optional<double> baseline;  // none: the first result sets it
  double change_percent = 0;       // value against baseline, signed (+ is higher)
  bool regressed = false;
};
// `history`: the earlier passing values of this GPU and metric, oldest first.
ValidationVerdict JudgeValidationValue(const ValidationValue& value,
                                       const std::vector<double>& history, double threshold_percent,
                                       bool higher_is_better);
// The median of the last kBaselineRuns of `history` (none when empty).
std::optional<double> ValidationBaseline(const std::vector<double>& history);
// "validation gpu-burn: matmul_tflops 250.1 is 20 % below baseline 312.4 (threshold 10 %)".
std::string RegressionReason(const std::string& check, const ValidationVerdict& verdict,
                             double threshold_percent);

// One run of a check on one node, as stored and shown.
struct ValidationRun {
  std::string check, node;
  uint64_t job = 0;
  Micros time = 0;      // when it ended
  std::string outcome;  // "passed", "regressed", "failed", "skipped", "interrupted"
  int exit_code = 0;
  std::string reason;  // why it failed, was skipped or interrupted; the drain reason
  std::vector<ValidationVerdict> results;
};
nlohmann::json ValidationRunToJson(const ValidationRun& run);
StatusOr<ValidationRun> ValidationRunFromJson(const nlohmann::json& j);

// Where a check stands on one node.
struct ValidationSlot {
  Micros last_start = 0;     // the last run's start (0: never); the next is due `every` later
  Micros waiting_since = 0;  // > 0: the node is held, waiting for its jobs to end
  uint64_t job = 0;          // != 0: the check job that runs (or ran) there
  bool manual = false;       // `validate run` asked for a run now
  bool timed_out = false;    // the controller stopped the job at its timeout
};

// What ValidationRuns knows (modules/validation_runs.h; it holds it under the core lock).
struct ValidationBook {
  static constexpr size_t kRunsKept = 50;  // per check and node, in memory
  std::map<std::string, ValidationCheck> checks;
  std::map<std::pair<std::string, std::string>, ValidationSlot> slots;             // (check, node)
  std::map<std::pair<std::string, std::string>, std::vector<ValidationRun>> runs;  // oldest first
  uint64_t regressions = 0;  // results that regressed, since the controller started
  Micros next_step = 0;      // the next periodic pass (a poke runs one sooner)
  bool poked = false;

  // Whether the node is held for a check (waiting for its jobs or running one).
  bool Holds(const std::string& node) const;
  // Why the node takes no new work ("" when it is not held), for the nodes' view.
  std::string HoldReason(const std::string& node) const;
  // Nodes held for `check` now.
  int HeldFor(const std::string& check) const;
  // The passing values of a GPU's metric on the node, oldest first.
  std::vector<double> History(const std::string& check, const std::string& node, int gpu,
                              const std::string& metric) const;
  // Keeps a run in memory (the oldest beyond kRunsKept dropped).
  void Record(ValidationRun run);
};

// A number as results show it: at most 4 significant decimals, no trailing zeros.
std::string FormatValidationNumber(double v);

}  // namespace tessera
