// Reports of the FGD experiment: per-run CSVs in the authors' shape
// (workload,sc_policy,tune,seed,total_gpus,0..130), a summary per trace and policy
// (median and quartiles over seeds of the unallocated GPU % at 100 % arrived, next
// to the authors' median where known), the same as JSON, and SVG plots in the
// manner of the paper's Figure 9a. Thread safety: pure functions.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "sim/fgd_experiment.h"

namespace tessera {

struct Quartiles {
  double p25 = 0;
  double median = 0;
  double p75 = 0;
};

// Linear-interpolated quartiles (numpy's default); values need not be sorted.
Quartiles QuartilesOf(std::vector<double> values);

struct FgdSummaryRow {
  std::string trace;
  std::string policy;
  int seeds = 0;
  Quartiles unallocated_at_100;
  std::optional<double> authors_median;  // from their per-seed results
  double mean_seconds = 0;
};

// (trace, policy) -> the authors' per-seed unallocated % at 100 % arrived.
using AuthorsResults = std::map<std::pair<std::string, std::string>, std::vector<double>>;

// Reads the authors' analysis_allo_discrete.csv; keys use our trace and policy names.
StatusOr<AuthorsResults> ReadAuthorsResults(const std::string& path);

std::vector<FgdSummaryRow> Summarize(const std::vector<FgdRunResult>& runs,
                                     const AuthorsResults& authors,
                                     const std::vector<std::string>& policy_order);

enum class DiscreteMetric { kAlloc, kFrag, kFragRatio };
std::string DiscreteCsv(const std::vector<FgdRunResult>& runs, DiscreteMetric metric,
                        double tune_ratio);

std::string SummaryTable(const std::vector<FgdSummaryRow>& rows);
std::string SummaryCsv(const std::vector<FgdSummaryRow>& rows);
nlohmann::json SummaryJson(const std::vector<FgdSummaryRow>& rows);

// Unallocated GPU % (min(arrived, 100) - allocated) against arrived %, per policy:
// the median over seeds as a line and the 25-75 % band, for one trace.
std::string UnallocatedSvg(const std::string& trace, const std::vector<FgdRunResult>& runs,
                           const std::vector<std::string>& policy_order);

}  // namespace tessera
