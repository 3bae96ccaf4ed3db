#include "sim/fgd_report.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <set>
#include <sstream>

#include "base/strings.h"

namespace tessera {
namespace {

// Shortest decimal form of a value already rounded to 2 places ("4.8", "12.05", "100.0").
std::string Short(double v) {
  if (std::isnan(v)) {
    return "";
  }
  std::string s = FixedDecimal(v, 2);
  while (s.back() == '0') {
    s.pop_back();
  }
  if (s.back() == '.') {
    s.push_back('0');
  }
  return s;
}


constexpr std::array<const char*, 10> kPalette = {"#7f7f7f", "#1f77b4", "#ff7f0e", "#2ca02c",
                                                  "#9467bd", "#d62728", "#17becf", "#8c564b",
                                                  "#e377c2", "#bcbd22"};

}  // namespace

Quartiles QuartilesOf(std::vector<double> v) {
  Quartiles q;
  if (v.empty()) {
    return q;
  }
  std::sort(v.begin(), v.end());
  auto at = [&](double p) {
    double pos = p * static_cast<double>(v.size() - 1);
    auto lo = static_cast<size_t>(std::floor(pos));
    size_t hi = std::min(lo + 1, v.size() - 1);
    double frac = pos - static_cast<double>(lo);
    return v[lo] + (v[hi] - v[lo]) * frac;
  };
  q.p25 = at(0.25);
  q.median = at(0.5);
  q.p75 = at(0.75);
  return q;
}

StatusOr<AuthorsResults> ReadAuthorsResults(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return NotFoundError("cannot open '" + path + "'");
  }
  std::string line;
  if (!std::getline(in, line)) {
    return InvalidArgumentError("'" + path + "' is empty");
  }
  const std::string header_line = line;  // `line` is reused below; keep the header alive
  std::vector<std::string_view> header = Split(header_line, ',');
  auto col = [&](std::string_view name) -> int {
    for (size_t i = 0; i < header.size(); ++i) {
      if (Trim(header[i]) == name) {
        return static_cast<int>(i);
      }
    }
    return -1;
  };
  int workload = col("workload");
  int policy = col("sc_policy");
  int at100 = col("100");
  if (workload < 0 || policy < 0 || at100 < 0) {
    return InvalidArgumentError("'" + path + "' lacks workload, sc_policy or 100 columns");
  }
  AuthorsResults out;
  int line_no = 1;
  while (std::getline(in, line)) {
    ++line_no;
    std::vector<std::string_view> cells = Split(line, ',');
    if (cells.size() <= static_cast<size_t>(at100)) {
      continue;
    }
    std::string value(Trim(cells[at100]));
    if (value.empty()) {
      continue;
    }
    char* end = nullptr;
    double alloc = std::strtod(value.c_str(), &end);
    if (end == value.c_str()) {
      return InvalidArgumentError(path + ":" + std::to_string(line_no) + ": bad value '" + value +
                                  "'");
    }
    std::string trace = TraceNameFromPath(std::string(Trim(cells[workload])));
    out[{trace, PolicyFromAuthorsLabel(std::string(Trim(cells[policy])))}].push_back(100.0 - alloc);
  }
  return out;
}

std::vector<FgdSummaryRow> Summarize(const std::vector<FgdRunResult>& runs,
                                     const AuthorsResults& authors,
                                     const std::vector<std::string>& policy_order) {
  std::vector<std::string> traces;
  for (const FgdRunResult& r : runs) {
    if (std::find(traces.begin(), traces.end(), r.trace) == traces.end()) {
      traces.push_back(r.trace);
    }
  }
  std::vector<FgdSummaryRow> rows;
  for (const std::string& trace : traces) {
    for (const std::string& policy : policy_order) {
      std::vector<double> values;
      double seconds = 0;
      for (const FgdRunResult& r : runs) {
        if (r.trace == trace && r.policy == policy) {
          values.push_back(r.UnallocatedAt100());
          seconds += r.seconds;
        }
      }
      if (values.empty()) {
        continue;
      }
      FgdSummaryRow row;
      row.trace = trace;
      row.policy = policy;
      row.seeds = static_cast<int>(values.size());
      row.mean_seconds = seconds / static_cast<double>(values.size());
      row.unallocated_at_100 = QuartilesOf(values);
      auto it = authors.find({trace, policy});
      if (it != authors.end() && !it->second.empty()) {
        row.authors_median = QuartilesOf(it->second).median;
      }
      rows.push_back(row);
    }
  }
  return rows;
}

std::string DiscreteCsv(const std::vector<FgdRunResult>& runs, DiscreteMetric metric,
                        double tune_ratio) {
  std::ostringstream out;
  out << "workload,sc_policy,tune,seed,total_gpus";
  for (int k = 0; k < kArrivedBins; ++k) {
    out << ',' << k;
  }
  out << '\n';
  for (const FgdRunResult& r : runs) {
    const std::vector<double>& values = metric == DiscreteMetric::kAlloc  ? r.alloc_pct
                                        : metric == DiscreteMetric::kFrag ? r.frag_pct
                                                                          : r.frag_ratio_pct;
    out << "openb_pod_list_" << r.trace << ',' << AuthorsPolicyLabel(r.policy) << ','
        << Short(RoundHalfEven(tune_ratio, 2)) << ',' << r.seed << ',' << r.total_gpus;
    for (double v : values) {
      out << ',' << Short(v);
    }
    out << '\n';
  }
  return out.str();
}

std::string SummaryTable(const std::vector<FgdSummaryRow>& rows) {
  std::ostringstream out;
  out << "Unallocated GPU % at 100% arrived (median over seeds; lower is better)\n\n";
  // Wide enough for the longest name (pinned variants such as "multigpu50-pin75one").
  int width = 13;
  for (const FgdSummaryRow& r : rows) {
    width = std::max(width, static_cast<int>(r.trace.size()) + 1);
  }
  out << std::left << std::setw(width) << "trace" << std::setw(15) << "policy" << std::right
      << std::setw(6) << "seeds" << std::setw(9) << "median" << std::setw(8) << "p25"
      << std::setw(8) << "p75" << std::setw(10) << "authors" << std::setw(8) << "diff"
      << std::setw(10) << "s/run" << '\n';
  std::string last_trace;
  for (const FgdSummaryRow& r : rows) {
    if (!last_trace.empty() && r.trace != last_trace) {
      out << '\n';
    }
    last_trace = r.trace;
    out << std::left << std::setw(width) << r.trace << std::setw(15) << r.policy << std::right
        << std::setw(6) << r.seeds << std::setw(9) << FixedDecimal(r.unallocated_at_100.median, 2)
        << std::setw(8) << FixedDecimal(r.unallocated_at_100.p25, 2) << std::setw(8)
        << FixedDecimal(r.unallocated_at_100.p75, 2);
    if (r.authors_median) {
      double diff = r.unallocated_at_100.median - *r.authors_median;
      out << std::setw(10) << FixedDecimal(*r.authors_median, 2) << std::setw(8)
          << ((diff >= 0 ? "+" : "") + FixedDecimal(diff, 2));
    } else {
      out << std::setw(10) << "-" << std::setw(8) << "-";
    }
    out << std::setw(10) << FixedDecimal(r.mean_seconds, 3) << '\n';
  }
  return out.str();
}

std::string SummaryCsv(const std::vector<FgdSummaryRow>& rows) {
  std::ostringstream out;
  out << "trace,policy,seeds,unallocated_median,unallocated_p25,unallocated_p75,"
         "authors_median,diff,mean_seconds\n";
  for (const FgdSummaryRow& r : rows) {
    out << r.trace << ',' << r.policy << ',' << r.seeds << ','
        << FixedDecimal(r.unallocated_at_100.median, 4) << ','
        << FixedDecimal(r.unallocated_at_100.p25, 4) << ','
        << FixedDecimal(r.unallocated_at_100.p75, 4) << ',';
    if (r.authors_median) {
      out << FixedDecimal(*r.authors_median, 4) << ','
          << FixedDecimal(r.unallocated_at_100.median - *r.authors_median, 4);
    } else {
      out << ',';
    }
    out << ',' << FixedDecimal(r.mean_seconds, 4) << '\n';
  }
  return out.str();
}

nlohmann::json SummaryJson(const std::vector<FgdSummaryRow>& rows) {
  nlohmann::json summary = nlohmann::json::array();
  auto round4 = [](double v) { return RoundHalfEven(v, 4); };
  for (const FgdSummaryRow& r : rows) {
    nlohmann::json row{
        {"trace", r.trace},
        {"policy", r.policy},
        {"seeds", r.seeds},
        {"unallocated_pct_at_100",
         {{"median", round4(r.unallocated_at_100.median)},
          {"p25", round4(r.unallocated_at_100.p25)},
          {"p75", round4(r.unallocated_at_100.p75)}}},
        {"mean_seconds_per_run", round4(r.mean_seconds)},
    };
    row["authors_median"] =
        r.authors_median ? nlohmann::json(round4(*r.authors_median)) : nlohmann::json(nullptr);
    summary.push_back(std::move(row));
  }
  return nlohmann::json{{"summary", summary}};
}

std::string UnallocatedSvg(const std::string& trace, const std::vector<FgdRunResult>& runs,
                           const std::vector<std::string>& policy_order) {
  constexpr double kW = 760;
  constexpr double kH = 440;
  constexpr double kLeft = 64;
  constexpr double kRight = 190;
  constexpr double kTop = 40;
  constexpr double kBottom = 56;
  constexpr double kXMax = 130;

  // Per policy and bin: unallocated % per seed.
  struct Series {
    std::string policy;
    std::vector<Quartiles> q;
    std::vector<bool> has;
  };
  std::vector<Series> series;
  double y_max = 5;
  for (const std::string& policy : policy_order) {
    Series s{policy, std::vector<Quartiles>(kArrivedBins), std::vector<bool>(kArrivedBins)};
    bool any = false;
    for (int k = 0; k < kArrivedBins; ++k) {
      std::vector<double> v;
      for (const FgdRunResult& r : runs) {
        if (r.trace == trace && r.policy == policy && !std::isnan(r.alloc_pct[k])) {
          v.push_back(std::max(0.0, std::min<double>(k, 100) - r.alloc_pct[k]));
        }
      }
      if (!v.empty()) {
        s.q[k] = QuartilesOf(v);
        s.has[k] = true;
        any = true;
        y_max = std::max(y_max, s.q[k].p75);
      }
    }
    if (any) {
      series.push_back(std::move(s));
    }
  }
  y_max = std::ceil(y_max / 5) * 5;
  const double pw = kW - kLeft - kRight;
  const double ph = kH - kTop - kBottom;
  auto x_of = [&](double x) { return kLeft + x / kXMax * pw; };
  auto y_of = [&](double y) { return kTop + ph - y / y_max * ph; };

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kW << "\" height=\"" << kH
      << "\" viewBox=\"0 0 " << kW << ' ' << kH
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg << "<text x=\"" << kW / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
      << "Unallocated GPU vs arrived workload: " << XmlEscape(trace) << "</text>\n";
  for (int x = 0; x <= 130; x += 10) {
    svg << "<line x1=\"" << x_of(x) << "\" y1=\"" << y_of(0) << "\" x2=\"" << x_of(x) << "\" y2=\""
        << y_of(y_max) << "\" stroke=\"#eee\"/>\n";
    svg << "<text x=\"" << x_of(x) << "\" y=\"" << y_of(0) + 16 << "\" text-anchor=\"middle\">" << x
        << "</text>\n";
  }
  const double y_step = y_max <= 10 ? 1 : (y_max <= 30 ? 5 : 10);
  const auto y_ticks = static_cast<int>(std::lround(y_max / y_step));
  for (int tick = 0; tick <= y_ticks; ++tick) {
    const double y = tick * y_step;
    svg << "<line x1=\"" << x_of(0) << "\" y1=\"" << y_of(y) << "\" x2=\"" << x_of(kXMax)
        << "\" y2=\"" << y_of(y) << "\" stroke=\"#eee\"/>\n";
    svg << "<text x=\"" << x_of(0) - 6 << "\" y=\"" << y_of(y) + 4 << "\" text-anchor=\"end\">"
        << FixedDecimal(y, 0) << "</text>\n";
  }
  svg << "<line x1=\"" << x_of(100) << "\" y1=\"" << y_of(0) << "\" x2=\"" << x_of(100)
      << "\" y2=\"" << y_of(y_max) << "\" stroke=\"#999\" stroke-dasharray=\"4 3\"/>\n";
  svg << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << pw << "\" height=\"" << ph
      << "\" fill=\"none\" stroke=\"#333\"/>\n";
  svg << "<text x=\"" << kLeft + pw / 2 << "\" y=\"" << kH - 14
      << "\" text-anchor=\"middle\">Arrived workload (% of cluster GPU capacity)</text>\n";
  svg << "<text transform=\"translate(18," << kTop + ph / 2
      << ") rotate(-90)\" text-anchor=\"middle\">Unallocated GPU (% of capacity)</text>\n";

  for (size_t si = 0; si < series.size(); ++si) {
    const Series& s = series[si];
    const char* color = kPalette[si % kPalette.size()];
    std::ostringstream band;
    std::ostringstream upper;
    std::ostringstream lower;
    std::vector<std::string> lower_pts;
    std::ostringstream line;
    bool first = true;
    for (int k = 0; k < kArrivedBins; ++k) {
      if (!s.has[k]) {
        continue;
      }
      upper << (first ? "M" : "L") << FixedDecimal(x_of(k), 1) << ','
            << FixedDecimal(y_of(s.q[k].p75), 1);
      line << (first ? "M" : "L") << FixedDecimal(x_of(k), 1) << ','
           << FixedDecimal(y_of(s.q[k].median), 1);
      lower_pts.push_back(FixedDecimal(x_of(k), 1) + "," + FixedDecimal(y_of(s.q[k].p25), 1));
      first = false;
    }
    std::string path = upper.str();
    std::reverse(lower_pts.begin(), lower_pts.end());
    for (const std::string& pt : lower_pts) {
      path += "L" + pt;
    }
    svg << "<path d=\"" << path << "Z\" fill=\"" << color
        << "\" fill-opacity=\"0.18\" stroke=\"none\"/>\n";
    svg << "<path d=\"" << line.str() << "\" fill=\"none\" stroke=\"" << color
        << "\" stroke-width=\"1.8\"/>\n";
    double ly = kTop + 14 + static_cast<double>(si) * 20;
    svg << "<line x1=\"" << kW - kRight + 12 << "\" y1=\"" << ly << "\" x2=\"" << kW - kRight + 36
        << "\" y2=\"" << ly << "\" stroke=\"" << color << "\" stroke-width=\"3\"/>\n";
    std::string label = XmlEscape(s.policy);
    if (s.has[100]) {
      label += " (" + FixedDecimal(s.q[100].median, 2) + ")";
    }
    svg << "<text x=\"" << kW - kRight + 42 << "\" y=\"" << ly + 4 << "\">" << label << "</text>\n";
  }
  svg << "<text x=\"" << kW - kRight + 12 << "\" y=\""
      << kTop + 14 + 20.0 * static_cast<double>(series.size()) + 8
      << "\" font-size=\"10\" fill=\"#555\">line: median; band: 25-75%</text>\n";
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace tessera
