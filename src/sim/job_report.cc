#include "base/strings.h"
#include "sim/job_report.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>
#include <utility>

namespace tessera {
namespace {

constexpr double kSecondsPerHour = 3600;

double Seconds(Micros t) { return static_cast<double>(t) / 1e6; }

// Six decimals: microsecond resolution for seconds, plenty for ratios; keeps the JSON
// free of binary noise such as 0.30000000000000004.
double Round6(double v) { return std::round(v * 1e6) / 1e6; }


// "42 s", "3.5 min", "2.1 h", "1.3 d".
std::string HumanDuration(double seconds) {
  if (seconds < 60) {
    return FixedDecimal(seconds, seconds < 10 ? 1 : 0) + " s";
  }
  if (seconds < kSecondsPerHour) {
    return FixedDecimal(seconds / 60, 1) + " min";
  }
  if (seconds < 86400) {
    return FixedDecimal(seconds / kSecondsPerHour, 1) + " h";
  }
  return FixedDecimal(seconds / 86400, 1) + " d";
}

// A step of 1, 2 or 5 x 10^k that splits [0, max] into at most `ticks` intervals.
double NiceStep(double max, int ticks) {
  if (max <= 0) {
    return 1;
  }
  double raw = max / ticks;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) {
      return m * mag;
    }
  }
  return 10 * mag;
}

// Shortest form of a tick value: "0", "2.5", "40".
std::string TickLabel(double v) {
  std::string s = FixedDecimal(v, 2);
  while (s.back() == '0') {
    s.pop_back();
  }
  if (s.back() == '.') {
    s.pop_back();
  }
  return s;
}

constexpr std::array<const char*, 10> kJobPalette = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                                     "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                                     "#bcbd22", "#17becf"};

void SvgHeader(std::ostringstream& svg, double w, double h) {
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h
      << "\" viewBox=\"0 0 " << w << ' ' << h
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
}

void SvgLine(std::ostringstream& svg, double x1, double y1, double x2, double y2,
             std::string_view attrs) {
  svg << "<line x1=\"" << FixedDecimal(x1, 1) << "\" y1=\"" << FixedDecimal(y1, 1) << "\" x2=\""
      << FixedDecimal(x2, 1) << "\" y2=\"" << FixedDecimal(y2, 1) << "\" " << attrs << "/>\n";
}

void SvgText(std::ostringstream& svg, double x, double y, std::string_view anchor,
             std::string_view escaped_text, std::string_view attrs = "") {
  svg << "<text x=\"" << FixedDecimal(x, 1) << "\" y=\"" << FixedDecimal(y, 1)
      << "\" text-anchor=\"" << anchor << '"';
  if (!attrs.empty()) {
    svg << ' ' << attrs;
  }
  svg << '>' << escaped_text << "</text>\n";
}

// rho with two decimals, "inf" for a tenant left with unfinished jobs, "-" when < 0
// (not measured).
std::string RhoText(double rho) {
  if (rho < 0) {
    return "-";
  }
  return std::isinf(rho) ? "inf" : FixedDecimal(rho, 2);
}

// Below the table, each policy's rho per tenant with a quota; '*' marks a tenant whose
// demand is within its quota (rho above 1 there is a broken promise).
void RhoLines(const std::vector<JobSummary>& rows, std::ostringstream& out) {
  bool any = false;
  for (const JobSummary& r : rows) {
    any = any || !r.rho.empty();
  }
  if (!any) {
    return;
  }
  out << "rho per tenant with a quota (avg JCT / avg JCT alone on its quota under the same "
         "policy; * demand within its quota):\n";
  for (const JobSummary& r : rows) {
    if (r.rho.empty()) {
      continue;
    }
    out << "  " << r.policy << ":";
    for (const TenantRho& t : r.rho) {
      out << ' ' << t.tenant << (t.within_quota ? "*" : "") << ' ' << RhoText(t.rho);
    }
    out << '\n';
  }
}

// JSON number, or null for infinity (JSON has none).
nlohmann::ordered_json FiniteOrNull(double v) {
  return std::isinf(v) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(Round6(v));
}

nlohmann::ordered_json TenantRhoJson(const std::vector<TenantRho>& rho) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const TenantRho& t : rho) {
    out.push_back({{"tenant", t.tenant},
                   {"quota_gpus", Round6(t.quota_gpus)},
                   {"demand_gpus", FiniteOrNull(t.demand_gpus)},
                   {"within_quota", t.within_quota},
                   {"jobs", t.jobs},
                   {"avg_jct_s", FiniteOrNull(t.avg_jct_s)},
                   {"alone_avg_jct_s", Round6(t.alone_avg_jct_s)},
                   {"rho", FiniteOrNull(t.rho)},
                   {"jobs_over_1", t.jobs_over_1}});
  }
  return out;
}

}  // namespace

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  const double n = static_cast<double>(values.size());
  p = std::clamp(p, 0.0, 100.0);
  // Nearest rank: the smallest value with at least p % of the values at or below it.
  // p * n first, so integer percentages of round counts stay exact (95 x 20 / 100 = 19).
  double rank = std::ceil(p * n / 100.0 - 1e-9);
  auto index = static_cast<size_t>(std::clamp(rank, 1.0, n)) - 1;
  return values[index];
}

double JainIndex(const std::vector<double>& shares) {
  if (shares.empty()) {
    return 0;
  }
  double sum = 0;
  double sum_sq = 0;
  for (double x : shares) {
    sum += x;
    sum_sq += x * x;
  }
  if (sum_sq <= 0) {
    return 1;  // everyone got the same: nothing
  }
  return sum * sum / (static_cast<double>(shares.size()) * sum_sq);
}

JobSummary Summarize(const JobRun& run) {
  JobSummary s;
  s.policy = run.policy;
  s.quota_violations = run.quota_violations;
  s.events = run.events;
  s.wall_seconds = run.wall_seconds;
  s.events_per_second =
      run.wall_seconds > 0 ? static_cast<double>(run.events) / run.wall_seconds : 0;

  std::vector<double> jct;
  std::vector<double> wait;
  std::vector<double> log_error;
  int64_t underestimates = 0;
  double busy_gpu_seconds = 0;
  double lost_gpu_seconds = 0;
  Micros first_submit = 0;
  Micros last_finish = 0;
  bool any_job = false;
  bool any_finish = false;
  // Tenant -> (GPU-seconds of service, GPU-seconds in the system) over finished jobs.
  std::map<std::string, std::pair<double, double>> tenant_share;

  for (const JobOutcome& job : run.jobs) {
    first_submit = any_job ? std::min(first_submit, job.submit) : job.submit;
    any_job = true;
    const double gpus = job.gpus;
    busy_gpu_seconds += gpus * Seconds(job.service);
    lost_gpu_seconds += job.lost_gpu_seconds;
    s.preemptions += job.preemptions;
    if (job.first_start >= 0) {
      wait.push_back(Seconds(job.first_start - job.submit));
    }
    if (job.finish >= 0) {
      ++s.jobs;
      const double job_jct = Seconds(job.finish - job.submit);
      jct.push_back(job_jct);
      last_finish = any_finish ? std::max(last_finish, job.finish) : job.finish;
      any_finish = true;
      auto& [service, in_system] = tenant_share[job.tenant];
      service += gpus * Seconds(job.service);
      in_system += gpus * job_jct;
    } else {
      ++s.unfinished;
      s.never_started += job.first_start < 0 ? 1 : 0;
    }
    if (job.predicted > 0 && job.actual > 0) {
      log_error.push_back(std::abs(
          std::log2(static_cast<double>(job.predicted) / static_cast<double>(job.actual))));
      underestimates += job.predicted < job.actual ? 1 : 0;
    }
  }

  if (!jct.empty()) {
    double total = 0;
    for (double v : jct) {
      total += v;
    }
    s.avg_jct_s = total / static_cast<double>(jct.size());
    s.median_jct_s = Percentile(jct, 50);
    s.p95_jct_s = Percentile(jct, 95);
    s.p99_jct_s = Percentile(jct, 99);
  }
  if (!wait.empty()) {
    double total = 0;
    for (double v : wait) {
      total += v;
    }
    s.avg_wait_s = total / static_cast<double>(wait.size());
    s.median_wait_s = Percentile(wait, 50);
    s.p99_wait_s = Percentile(wait, 99);
  }
  if (any_finish) {
    s.makespan_s = std::max(0.0, Seconds(last_finish - first_submit));
  }
  if (run.cluster_gpus > 0 && s.makespan_s > 0) {
    s.utilization = busy_gpu_seconds / (static_cast<double>(run.cluster_gpus) * s.makespan_s);
  }
  std::vector<double> shares;
  for (const auto& [tenant, share] : tenant_share) {
    if (share.second > 0) {
      shares.push_back(share.first / share.second);
    }
  }
  s.jain = JainIndex(shares);
  s.lost_gpu_hours = lost_gpu_seconds / kSecondsPerHour;
  if (!log_error.empty()) {
    s.predictor_median_abs_log2_error = Percentile(log_error, 50);
    s.predictor_underestimate_fraction =
        static_cast<double>(underestimates) / static_cast<double>(log_error.size());
  }
  return s;
}

std::string JobSummaryTable(const std::vector<JobSummary>& rows) {
  // One unit for every time column: hours once any run lasts two hours or more.
  double longest = 0;
  size_t policy_width = 6;
  for (const JobSummary& r : rows) {
    longest = std::max({longest, r.makespan_s, r.p99_jct_s, r.p99_wait_s});
    policy_width = std::max(policy_width, r.policy.size());
  }
  const bool hours = longest >= 2 * kSecondsPerHour;
  const std::string unit = hours ? "(h)" : "(s)";
  const double scale = hours ? 1 / kSecondsPerHour : 1;
  const int decimals = hours ? 2 : 1;
  const auto pw = static_cast<int>(policy_width + 2);

  std::ostringstream out;
  out << std::left << std::setw(pw) << "policy" << std::right << std::setw(8) << "jobs"
      << std::setw(7) << "unfin" << std::setw(12) << "avgJCT" + unit << std::setw(12)
      << "p50JCT" + unit << std::setw(12) << "p99JCT" + unit << std::setw(12) << "avgWait" + unit
      << std::setw(12) << "p99Wait" + unit << std::setw(13) << "makespan" + unit << std::setw(7)
      << "util%" << std::setw(7) << "jain" << std::setw(8) << "maxRho" << std::setw(9) << "preempt"
      << std::setw(10) << "lostGPUh" << std::setw(8) << "quotaV" << '\n';
  for (const JobSummary& r : rows) {
    out << std::left << std::setw(pw) << r.policy << std::right << std::setw(8) << r.jobs
        << std::setw(7) << r.unfinished << std::setw(12)
        << FixedDecimal(r.avg_jct_s * scale, decimals) << std::setw(12)
        << FixedDecimal(r.median_jct_s * scale, decimals) << std::setw(12)
        << FixedDecimal(r.p99_jct_s * scale, decimals) << std::setw(12)
        << FixedDecimal(r.avg_wait_s * scale, decimals) << std::setw(12)
        << FixedDecimal(r.p99_wait_s * scale, decimals) << std::setw(13)
        << FixedDecimal(r.makespan_s * scale, decimals) << std::setw(7)
        << FixedDecimal(r.utilization * 100, 1) << std::setw(7) << FixedDecimal(r.jain, 3)
        << std::setw(8) << RhoText(r.rho.empty() ? -1 : MaxRho(r.rho)) << std::setw(9)
        << r.preemptions << std::setw(10) << FixedDecimal(r.lost_gpu_hours, 1) << std::setw(8)
        << r.quota_violations << '\n';
  }
  RhoLines(rows, out);
  // Jobs that never finished are in no JCT figure: say so rather than let the averages
  // flatter the policy that starved them.
  for (const JobSummary& r : rows) {
    if (r.unfinished > 0) {
      out << r.policy << ": " << r.unfinished << " job" << (r.unfinished == 1 ? "" : "s")
          << " never finished (" << r.never_started << " never started); the JCT figures "
          << "leave them out, the wait figures leave out those that never started\n";
    }
  }
  return out.str();
}

std::string JobSummaryJson(const std::vector<JobSummary>& rows) {
  // ordered_json: the fields stay in the order below instead of alphabetical.
  nlohmann::ordered_json summary = nlohmann::ordered_json::array();
  for (const JobSummary& r : rows) {
    summary.push_back({
        {"policy", r.policy},
        {"jobs", r.jobs},
        {"unfinished", r.unfinished},
        {"never_started", r.never_started},
        {"avg_jct_s", Round6(r.avg_jct_s)},
        {"median_jct_s", Round6(r.median_jct_s)},
        {"p95_jct_s", Round6(r.p95_jct_s)},
        {"p99_jct_s", Round6(r.p99_jct_s)},
        {"avg_wait_s", Round6(r.avg_wait_s)},
        {"median_wait_s", Round6(r.median_wait_s)},
        {"p99_wait_s", Round6(r.p99_wait_s)},
        {"makespan_s", Round6(r.makespan_s)},
        {"utilization", Round6(r.utilization)},
        {"jain", Round6(r.jain)},
        {"preemptions", r.preemptions},
        {"lost_gpu_hours", Round6(r.lost_gpu_hours)},
        {"quota_violations", r.quota_violations},
        {"predictor_median_abs_log2_error", Round6(r.predictor_median_abs_log2_error)},
        {"predictor_underestimate_fraction", Round6(r.predictor_underestimate_fraction)},
        {"events", r.events},
        {"events_per_second", Round6(r.events_per_second)},
        {"wall_seconds", Round6(r.wall_seconds)},
    });
    // Only where the runs alone on the quotas were made: no field rather than a
    // misleading 0.
    if (!r.rho.empty()) {
      summary.back()["rho_max"] = FiniteOrNull(MaxRho(r.rho));
      summary.back()["tenant_rho"] = TenantRhoJson(r.rho);
    }
  }
  return nlohmann::ordered_json{{"summary", std::move(summary)}}.dump(2) + "\n";
}

namespace {
namespace cdf_plot {

// Layout of JctCdfSvg: the plot area, with the legend in the right margin.
constexpr double kW = 720;
constexpr double kH = 420;
constexpr double kLeft = 56;
constexpr double kRight = 190;
constexpr double kTop = 40;
constexpr double kBottom = 52;
constexpr double kPlotW = kW - kLeft - kRight;
constexpr double kPlotH = kH - kTop - kBottom;
constexpr size_t kMaxPoints = 500;
constexpr double kMinSeconds = 1;  // shorter JCTs are drawn at 1 s
constexpr size_t kLegendChars = 22;
constexpr std::array<std::pair<double, const char*>, 10> kTicks = {{
    {1, "1 s"},
    {10, "10 s"},
    {60, "1 min"},
    {600, "10 min"},
    {3600, "1 h"},
    {21600, "6 h"},
    {86400, "1 d"},
    {864000, "10 d"},
    {8640000, "100 d"},
    {86400000, "1000 d"},
}};

struct Series {
  std::string label;
  std::vector<double> jct;  // sorted, seconds
};

// One series per run: its finished jobs' JCTs, labelled by policy (and trace when the
// runs replay different traces).
std::vector<Series> CollectSeries(const std::vector<JobRun>& runs) {
  bool one_trace = true;
  for (const JobRun& run : runs) {
    one_trace = one_trace && run.trace == runs.front().trace;
  }
  std::vector<Series> series;
  for (const JobRun& run : runs) {
    Series s{one_trace ? run.policy : run.policy + " / " + run.trace, {}};
    for (const JobOutcome& job : run.jobs) {
      if (job.finish >= 0) {
        s.jct.push_back(std::max(kMinSeconds, Seconds(job.finish - job.submit)));
      }
    }
    std::sort(s.jct.begin(), s.jct.end());
    series.push_back(std::move(s));
  }
  return series;
}

// Where seconds and fractions land in the plot; x is log-scale.
struct Scale {
  bool any = false;  // whether any run finished a job
  double lo_exp = 0;
  double hi_exp = std::log10(86400.0);  // an empty plot spans 1 s to 1 d

  double X(double seconds) const {
    return kLeft + (std::log10(seconds) - lo_exp) / (hi_exp - lo_exp) * kPlotW;
  }
  static double Y(double fraction) { return kTop + kPlotH - fraction * kPlotH; }
};

// The x axis runs from the last tick at or below the shortest JCT to the first tick at
// or above the longest, so that both ends are labelled.
Scale FitScale(const std::vector<Series>& series) {
  Scale scale;
  double lo = 0;
  double hi = 0;
  for (const Series& s : series) {
    if (!s.jct.empty()) {
      lo = scale.any ? std::min(lo, s.jct.front()) : s.jct.front();
      hi = scale.any ? std::max(hi, s.jct.back()) : s.jct.back();
      scale.any = true;
    }
  }
  if (!scale.any) {
    return scale;
  }
  for (const auto& tick : kTicks) {
    if (tick.first <= lo) {
      scale.lo_exp = std::log10(tick.first);
    }
  }
  scale.hi_exp = std::ceil(std::log10(hi));
  for (auto it = kTicks.rbegin(); it != kTicks.rend(); ++it) {
    if (it->first >= hi && std::log10(it->first) > scale.lo_exp) {
      scale.hi_exp = std::log10(it->first);
    }
  }
  if (scale.hi_exp <= scale.lo_exp) {
    scale.hi_exp = scale.lo_exp + 1;
  }
  return scale;
}

// Grid, tick labels, frame and axis titles.
void DrawAxes(std::ostringstream& svg, const Scale& scale) {
  double last_label_x = -1e9;
  for (const auto& [seconds, label] : kTicks) {
    double exp = std::log10(seconds);
    if (exp < scale.lo_exp - 1e-9 || exp > scale.hi_exp + 1e-9) {
      continue;
    }
    double x = scale.X(seconds);
    SvgLine(svg, x, Scale::Y(0), x, Scale::Y(1), "stroke=\"#e4e4e4\"");
    if (x - last_label_x >= 30) {  // skip a label that would overlap its neighbour
      SvgText(svg, x, Scale::Y(0) + 16, "middle", label);
      last_label_x = x;
    }
  }
  for (int tick = 0; tick <= 4; ++tick) {
    double y = tick * 0.25;
    SvgLine(svg, kLeft, Scale::Y(y), kLeft + kPlotW, Scale::Y(y), "stroke=\"#e4e4e4\"");
    SvgText(svg, kLeft - 6, Scale::Y(y) + 4, "end", TickLabel(y));
  }
  svg << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << kPlotW << "\" height=\""
      << kPlotH << "\" fill=\"none\" stroke=\"#333\"/>\n";
  SvgText(svg, kLeft + kPlotW / 2, kH - 12, "middle", "Job completion time (log scale)");
  svg << "<text transform=\"translate(16," << kTop + kPlotH / 2
      << ") rotate(-90)\" text-anchor=\"middle\">Fraction of finished jobs</text>\n";
  if (!scale.any) {
    SvgText(svg, kLeft + kPlotW / 2, kTop + kPlotH / 2, "middle", "no finished jobs",
            "fill=\"#777\"");
  }
}

// The series' CDF as a polyline of at most kMaxPoints points.
void DrawCurve(std::ostringstream& svg, const Scale& scale, const Series& s, const char* color) {
  const size_t n = s.jct.size();
  if (n == 0) {
    return;
  }
  // Evenly spaced ranks, first and last included; y is the rank's cumulative fraction.
  const size_t m = std::min(n, kMaxPoints);
  svg << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.8\" points=\"";
  svg << FixedDecimal(scale.X(s.jct[0]), 1) << ',' << FixedDecimal(Scale::Y(0), 1);  // from 0
  for (size_t k = 0; k < m; ++k) {
    size_t i = m == 1 ? 0 : (k * (n - 1) + (m - 1) / 2) / (m - 1);
    double y = static_cast<double>(i + 1) / static_cast<double>(n);
    svg << ' ' << FixedDecimal(scale.X(s.jct[i]), 1) << ',' << FixedDecimal(Scale::Y(y), 1);
  }
  svg << "\"/>\n";
}

// The legend's entry for series `si`: the name (shortened if long) and, below it, the
// median.
void DrawLegendEntry(std::ostringstream& svg, const Series& s, size_t si, const char* color) {
  const size_t n = s.jct.size();
  double ly = kTop + 10 + static_cast<double>(si) * 34;
  SvgLine(svg, kW - kRight + 12, ly, kW - kRight + 36, ly,
          std::string("stroke=\"") + color + "\" stroke-width=\"3\"");
  std::string label =
      s.label.size() > kLegendChars ? s.label.substr(0, kLegendChars - 3) + "..." : s.label;
  SvgText(svg, kW - kRight + 42, ly + 4, "start", XmlEscape(label));
  SvgText(svg, kW - kRight + 42, ly + 18, "start",
          n > 0 ? "p50 " + HumanDuration(Percentile(s.jct, 50)) + ", " + std::to_string(n) + " jobs"
                : std::string("no finished jobs"),
          "font-size=\"10\" fill=\"#555\"");
}

}  // namespace cdf_plot
}  // namespace

std::string JctCdfSvg(const std::vector<JobRun>& runs) {
  const std::vector<cdf_plot::Series> series = cdf_plot::CollectSeries(runs);
  const cdf_plot::Scale scale = cdf_plot::FitScale(series);
  std::ostringstream svg;
  SvgHeader(svg, cdf_plot::kW, cdf_plot::kH);
  SvgText(svg, cdf_plot::kW / 2, 22, "middle", "CDF of job completion time", "font-size=\"15\"");
  cdf_plot::DrawAxes(svg, scale);
  for (size_t si = 0; si < series.size(); ++si) {
    const char* color = kJobPalette[si % kJobPalette.size()];
    cdf_plot::DrawCurve(svg, scale, series[si], color);
    cdf_plot::DrawLegendEntry(svg, series[si], si, color);
  }
  svg << "</svg>\n";
  return svg.str();
}

namespace {
namespace usage_plot {

// Layout of TenantUsageSvg: a title, then panels in rows of kColumns.
constexpr double kW = 720;
constexpr int kColumns = 2;
constexpr double kPanelW = kW / kColumns;
constexpr double kPanelH = 180;
constexpr double kTitleH = 34;
constexpr double kPadLeft = 46;
constexpr double kPadRight = 14;
constexpr double kPadTop = 26;
constexpr double kPadBottom = 34;
constexpr size_t kBuckets = 200;  // two points per bucket: about 400 per panel

struct Panel {
  std::string title;
  std::vector<size_t> tenants;
  double quota_gpus = 0;  // 0: no quota line
};

// Each tenant with a quota, then the rest together.
std::vector<Panel> MakePanels(const JobRun& run) {
  std::vector<Panel> panels;
  Panel others{"tenants without quota", {}, 0};
  for (size_t t = 0; t < run.tenants.size(); ++t) {
    int64_t quota = t < run.tenant_quota_milli.size() ? run.tenant_quota_milli[t] : 0;
    if (quota > 0) {
      panels.push_back({run.tenants[t], {t}, static_cast<double>(quota) / 1000});
    } else {
      others.tenants.push_back(t);
    }
  }
  if (!others.tenants.empty()) {
    if (others.tenants.size() == 1) {
      others.title = run.tenants[others.tenants[0]] + " (no quota)";
    } else {
      others.title += " (" + std::to_string(others.tenants.size()) + ")";
    }
    panels.push_back(std::move(others));
  }
  return panels;
}

// The time axis: the usage samples and the jobs' lifetimes, in hours from the start.
struct TimeAxis {
  Micros t0 = 0;
  double span_h = 0;

  double HoursOf(Micros t) const { return Seconds(t - t0) / kSecondsPerHour; }
};

TimeAxis FitTimeAxis(const JobRun& run) {
  Micros t0 = 0;
  Micros t1 = 0;
  bool any_time = false;
  auto extend = [&](Micros t) {
    t0 = any_time ? std::min(t0, t) : t;
    t1 = any_time ? std::max(t1, t) : t;
    any_time = true;
  };
  if (!run.usage.empty()) {
    extend(run.usage.front().time);
    extend(run.usage.back().time);
  }
  for (const JobOutcome& job : run.jobs) {
    extend(job.submit);
    if (job.finish >= 0) {
      extend(job.finish);
    }
  }
  if (t1 <= t0) {
    t1 = t0 + static_cast<Micros>(kSecondsPerHour * 1e6);
  }
  return {t0, Seconds(t1 - t0) / kSecondsPerHour};
}

// The panel's usage in GPUs as a step function: (hours, GPUs) at each change. *peak:
// the most GPUs at once.
std::vector<std::pair<double, double>> UsageSteps(const JobRun& run, const Panel& panel,
                                                  const TimeAxis& axis, double* peak) {
  std::vector<std::pair<double, double>> steps;
  steps.reserve(run.usage.size());
  *peak = 0;
  for (const UsageSample& sample : run.usage) {
    int64_t milli = 0;
    for (size_t t : panel.tenants) {
      milli += t < sample.gpu_milli.size() ? sample.gpu_milli[t] : 0;
    }
    double gpus = static_cast<double>(milli) / 1000;
    if (!steps.empty() && steps.back().second == gpus) {
      continue;
    }
    steps.emplace_back(axis.HoursOf(sample.time), gpus);
    *peak = std::max(*peak, gpus);
  }
  return steps;
}

// Polyline points: exact steps when few; otherwise the maximum per time bucket, so that
// short peaks stay visible.
std::vector<std::pair<double, double>> StepPoints(
    const std::vector<std::pair<double, double>>& steps, double span_h) {
  std::vector<std::pair<double, double>> points;
  if (steps.size() * 2 + 1 <= kBuckets * 2) {
    double prev = 0;
    for (const auto& [h, gpus] : steps) {
      points.emplace_back(h, prev);
      points.emplace_back(h, gpus);
      prev = gpus;
    }
    points.emplace_back(span_h, prev);
    return points;
  }
  std::vector<double> bucket_max(kBuckets, 0);
  const double bucket_h = span_h / kBuckets;
  auto bucket_of = [&](double h) {
    auto b = static_cast<int64_t>(std::floor(h / bucket_h));
    return static_cast<size_t>(std::clamp<int64_t>(b, 0, kBuckets - 1));
  };
  // A step holds from its time to the next step's: it counts in every bucket it spans.
  for (size_t i = 0; i < steps.size(); ++i) {
    size_t from = bucket_of(steps[i].first);
    size_t to = i + 1 < steps.size() ? bucket_of(steps[i + 1].first) : kBuckets - 1;
    for (size_t b = from; b <= to; ++b) {
      bucket_max[b] = std::max(bucket_max[b], steps[i].second);
    }
  }
  for (size_t b = 0; b < kBuckets; ++b) {
    if (b > 0 && bucket_max[b] == bucket_max[b - 1]) {
      points.back().first = static_cast<double>(b + 1) * bucket_h;
      continue;
    }
    points.emplace_back(static_cast<double>(b) * bucket_h, bucket_max[b]);
    points.emplace_back(static_cast<double>(b + 1) * bucket_h, bucket_max[b]);
  }
  return points;
}

// Panel `pi` of the grid: its title, axes, usage line and quota line.
void DrawPanel(std::ostringstream& svg, size_t pi, const Panel& panel, double span_h, double peak,
               const std::vector<std::pair<double, double>>& points) {
  const double ox = static_cast<double>(pi % kColumns) * kPanelW;
  const double oy = kTitleH + static_cast<double>(pi / kColumns) * kPanelH;
  const double left = ox + kPadLeft;
  const double top = oy + kPadTop;
  const double pw = kPanelW - kPadLeft - kPadRight;
  const double ph = kPanelH - kPadTop - kPadBottom;
  const double y_step = NiceStep(std::max({peak, panel.quota_gpus, 1.0}) * 1.08, 4);
  const double y_max = std::ceil(std::max({peak, panel.quota_gpus, 1.0}) * 1.08 / y_step) * y_step;
  const double x_step = NiceStep(span_h, 5);
  auto x_of = [&](double h) { return left + h / span_h * pw; };
  auto y_of = [&](double g) { return top + ph - g / y_max * ph; };

  std::string title = XmlEscape(panel.title);
  if (panel.quota_gpus > 0) {
    title += " (quota " + TickLabel(panel.quota_gpus) + ", peak " + TickLabel(peak) + " GPUs)";
  } else {
    title += " (peak " + TickLabel(peak) + " GPUs)";
  }
  SvgText(svg, left + pw / 2, oy + 16, "middle", title, "font-size=\"11\"");
  for (double y = 0; y <= y_max + 1e-9; y += y_step) {
    SvgLine(svg, left, y_of(y), left + pw, y_of(y), "stroke=\"#eee\"");
    SvgText(svg, left - 4, y_of(y) + 4, "end", TickLabel(y), "font-size=\"10\"");
  }
  for (double x = 0; x <= span_h + 1e-9; x += x_step) {
    SvgText(svg, x_of(x), top + ph + 13, "middle", TickLabel(x), "font-size=\"10\"");
  }
  svg << "<rect x=\"" << FixedDecimal(left, 1) << "\" y=\"" << FixedDecimal(top, 1) << "\" width=\""
      << FixedDecimal(pw, 1) << "\" height=\"" << FixedDecimal(ph, 1)
      << "\" fill=\"none\" stroke=\"#333\"/>\n";
  SvgText(svg, left + pw / 2, top + ph + 27, "middle", "hours", "font-size=\"10\" fill=\"#555\"");
  svg << "<polyline fill=\"none\" stroke=\"" << kJobPalette[0]
      << "\" stroke-width=\"1.2\" points=\"";
  for (size_t i = 0; i < points.size(); ++i) {
    svg << (i > 0 ? " " : "") << FixedDecimal(x_of(points[i].first), 1) << ','
        << FixedDecimal(y_of(points[i].second), 1);
  }
  svg << "\"/>\n";
  if (panel.quota_gpus > 0) {
    SvgLine(svg, left, y_of(panel.quota_gpus), left + pw, y_of(panel.quota_gpus),
            "stroke=\"#d62728\" stroke-dasharray=\"5 4\"");
  }
}

}  // namespace usage_plot
}  // namespace

std::string TenantUsageSvg(const JobRun& run) {
  using usage_plot::kColumns;
  using usage_plot::kPanelH;
  using usage_plot::kTitleH;
  using usage_plot::kW;
  const std::vector<usage_plot::Panel> panels = usage_plot::MakePanels(run);
  const usage_plot::TimeAxis axis = usage_plot::FitTimeAxis(run);
  const auto rows = static_cast<int>((panels.size() + kColumns - 1) / kColumns);
  const double height = kTitleH + std::max(1, rows) * kPanelH + 8;
  std::ostringstream svg;
  SvgHeader(svg, kW, height);
  std::string heading = "GPU usage per tenant against quota";
  if (!run.policy.empty()) {
    heading += ": " + run.policy;
  }
  SvgText(svg, kW / 2, 22, "middle", XmlEscape(heading), "font-size=\"15\"");
  if (panels.empty()) {
    SvgText(svg, kW / 2, kTitleH + kPanelH / 2, "middle", "no tenants", "fill=\"#777\"");
  }
  for (size_t pi = 0; pi < panels.size(); ++pi) {
    double peak = 0;
    std::vector<std::pair<double, double>> steps =
        usage_plot::UsageSteps(run, panels[pi], axis, &peak);
    usage_plot::DrawPanel(svg, pi, panels[pi], axis.span_h, peak,
                          usage_plot::StepPoints(steps, axis.span_h));
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace tessera
