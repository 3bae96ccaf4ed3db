#include "sim/fgd_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "sim/testing/sim_testing.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

using ::tessera::testing::TracesDir;

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// A run with every bin NaN except those given.
FgdRunResult MakeRun(const std::string& trace, const std::string& policy, uint64_t seed,
                     double alloc_at_100, double seconds = 0.5) {
  FgdRunResult r;
  r.trace = trace;
  r.policy = policy;
  r.seed = seed;
  r.total_gpus = 6212;
  r.alloc_pct.assign(kArrivedBins, kNaN);
  r.frag_pct.assign(kArrivedBins, kNaN);
  r.frag_ratio_pct.assign(kArrivedBins, kNaN);
  r.alloc_pct[100] = alloc_at_100;
  r.seconds = seconds;
  return r;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    out.push_back(line);
  }
  return out;
}

std::vector<std::string> Cells(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) {
    out.push_back(cell);
  }
  if (!line.empty() && line.back() == ',') {
    out.push_back("");
  }
  return out;
}

size_t Count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t pos = text.find(part); pos != std::string::npos; pos = text.find(part, pos + 1)) {
    ++n;
  }
  return n;
}

// A fresh directory under ::testing::TempDir().
class TempDir {
 public:
  TempDir() {
    std::string templ = ::testing::TempDir() + "fgd_report_test_XXXXXX";
    if (mkdtemp(templ.data()) == nullptr) {
      ADD_FAILURE() << "cannot create a directory under " << ::testing::TempDir();
    }
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string Write(const std::string& name, const std::string& text) const {
    std::string path = (fs::path(path_) / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// --- QuartilesOf -----------------------------------------------------------------------

TEST(QuartilesOfTest, NumpyLinearInterpolation) {
  Quartiles q = QuartilesOf({1, 2, 3, 4});
  EXPECT_DOUBLE_EQ(q.p25, 1.75);
  EXPECT_DOUBLE_EQ(q.median, 2.5);
  EXPECT_DOUBLE_EQ(q.p75, 3.25);

  q = QuartilesOf({4, 1, 3, 2});  // order does not matter
  EXPECT_DOUBLE_EQ(q.p25, 1.75);
  EXPECT_DOUBLE_EQ(q.median, 2.5);
  EXPECT_DOUBLE_EQ(q.p75, 3.25);

  q = QuartilesOf({1, 2, 3, 4, 5});
  EXPECT_DOUBLE_EQ(q.p25, 2);
  EXPECT_DOUBLE_EQ(q.median, 3);
  EXPECT_DOUBLE_EQ(q.p75, 4);

  q = QuartilesOf({0, 10});
  EXPECT_DOUBLE_EQ(q.p25, 2.5);
  EXPECT_DOUBLE_EQ(q.median, 5);
  EXPECT_DOUBLE_EQ(q.p75, 7.5);

  // numpy.percentile([7, 1, 3, 3, 9, 2], [25, 50, 75]) == [2.25, 3.0, 6.0]
  q = QuartilesOf({7, 1, 3, 3, 9, 2});
  EXPECT_DOUBLE_EQ(q.p25, 2.25);
  EXPECT_DOUBLE_EQ(q.median, 3.0);
  EXPECT_DOUBLE_EQ(q.p75, 6.0);

  q = QuartilesOf({5});
  EXPECT_EQ(q.p25, 5);
  EXPECT_EQ(q.median, 5);
  EXPECT_EQ(q.p75, 5);

  q = QuartilesOf({});
  EXPECT_EQ(q.p25, 0);
  EXPECT_EQ(q.median, 0);
  EXPECT_EQ(q.p75, 0);
}

// --- ReadAuthorsResults ------------------------------------------------------------------

TEST(ReadAuthorsResultsTest, RealFileHasTenSeedsPerTraceAndPolicy) {
  std::string results_dir = TracesDir("fgd-kss-expected-results");
  ASSERT_FALSE(results_dir.empty());
  StatusOr<AuthorsResults> a = ReadAuthorsResults(results_dir + "/analysis_allo_discrete.csv");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->size(), 13u * 6u);  // 13 traces x 6 policies (docs/fgd-replication.md §3, §4)
  for (const auto& [key, values] : *a) {
    EXPECT_EQ(values.size(), 10u) << key.first << " " << key.second;
  }

  auto fgd = a->find({"default", "fgd"});
  ASSERT_NE(fgd, a->end());
  ASSERT_EQ(fgd->second.size(), 10u);
  // Seed 42 is the first default/06-FGD row: column "100" is 95.14.
  EXPECT_NEAR(fgd->second[0], 4.86, 1e-9);
  EXPECT_NEAR(QuartilesOf(fgd->second).median, 4.77, 0.005);

  auto random = a->find({"default", "random"});
  ASSERT_NE(random, a->end());
  // Sorted: 13.21 13.27 13.32 13.67 13.67 13.83 13.87 13.93 14.07 14.13.
  Quartiles q = QuartilesOf(random->second);
  EXPECT_NEAR(q.median, 13.75, 0.005);
  EXPECT_NEAR(q.p25, 13.4075, 1e-6);
  EXPECT_NEAR(q.p75, 13.915, 1e-6);

  // More medians of the authors' headline number (docs/fgd-replication.md §5).
  EXPECT_NEAR(QuartilesOf(a->at({"default", "bestfit"})).median, 7.09, 0.005);
  EXPECT_NEAR(QuartilesOf(a->at({"gpushare100", "fgd"})).median, 13.36, 0.005);
  EXPECT_NEAR(QuartilesOf(a->at({"multigpu50", "gpupacking"})).median, 3.93, 0.005);
  EXPECT_NEAR(QuartilesOf(a->at({"cpu250", "dotprod"})).median, 16.22, 0.005);
  EXPECT_NEAR(QuartilesOf(a->at({"cpu050", "gpuclustering"})).median, 6.52, 0.005);
}

TEST(ReadAuthorsResultsTest, SmallFileAndErrors) {
  TempDir dir;
  // Reordered columns; an empty "100" cell and a short row are skipped; unknown labels
  // are kept as they are.
  std::string ok = dir.Write("ok.csv",
                             "sc_policy,100,workload,seed\n"
                             "06-FGD,95.5,openb_pod_list_default,42\n"
                             "06-FGD,94.5,openb_pod_list_default,43\n"
                             "01-Random,,openb_pod_list_default,42\n"
                             "05-BestFit\n"
                             "my-policy,90,openb_pod_list_cpu050,42\n");
  StatusOr<AuthorsResults> a = ReadAuthorsResults(ok);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->size(), 2u);
  ASSERT_TRUE(a->contains({"default", "fgd"}));
  std::vector<double> fgd = a->at({"default", "fgd"});
  ASSERT_EQ(fgd.size(), 2u);
  EXPECT_DOUBLE_EQ(fgd[0], 4.5);
  EXPECT_DOUBLE_EQ(fgd[1], 5.5);
  ASSERT_TRUE(a->contains({"cpu050", "my-policy"}));
  EXPECT_DOUBLE_EQ(a->at({"cpu050", "my-policy"})[0], 10.0);

  StatusOr<AuthorsResults> missing = ReadAuthorsResults(dir.path() + "/nope.csv");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);

  StatusOr<AuthorsResults> empty = ReadAuthorsResults(dir.Write("empty.csv", ""));
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);

  StatusOr<AuthorsResults> no_col =
      ReadAuthorsResults(dir.Write("nocol.csv", "workload,sc_policy,99\nx,y,1\n"));
  ASSERT_FALSE(no_col.ok());
  EXPECT_EQ(no_col.status().code(), StatusCode::kInvalidArgument);

  std::string bad_path = dir.Write("bad.csv",
                                   "workload,sc_policy,100\n"
                                   "openb_pod_list_default,06-FGD,95\n"
                                   "openb_pod_list_default,06-FGD,abc\n");
  StatusOr<AuthorsResults> bad = ReadAuthorsResults(bad_path);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find(bad_path + ":3:"), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("abc"), std::string::npos) << bad.status().message();
}

// --- Summarize ----------------------------------------------------------------------------

std::vector<FgdRunResult> SyntheticRuns() {
  // default/fgd: unallocated 1, 2, 3, 4 (given out of order); default/bestfit: 6, 8;
  // cpu050/fgd: 5; default/other is not in the policy order.
  return {
      MakeRun("default", "fgd", 43, 98.0, 1.0),   MakeRun("default", "bestfit", 42, 94.0, 0.25),
      MakeRun("default", "fgd", 42, 99.0, 0.5),   MakeRun("cpu050", "fgd", 42, 95.0, 2.0),
      MakeRun("default", "fgd", 45, 96.0, 0.125), MakeRun("default", "other", 42, 50.0),
      MakeRun("default", "fgd", 44, 97.0, 0.375), MakeRun("default", "bestfit", 43, 92.0, 0.75)};
}

TEST(SummarizeTest, QuartilesPerTraceAndPolicyInGivenOrder) {
  AuthorsResults authors;
  authors[{"default", "fgd"}] = {6.0, 4.0, 5.0};
  authors[{"default", "random"}] = {13.0};
  std::vector<FgdSummaryRow> rows =
      Summarize(SyntheticRuns(), authors, {"random", "bestfit", "fgd"});
  ASSERT_EQ(rows.size(), 3u);

  // Traces in order of first appearance, then policies in the given order; a policy
  // without runs (random) gives no row even if the authors have it.
  EXPECT_EQ(rows[0].trace, "default");
  EXPECT_EQ(rows[0].policy, "bestfit");
  EXPECT_EQ(rows[0].seeds, 2);
  EXPECT_DOUBLE_EQ(rows[0].unallocated_at_100.median, 7.0);
  EXPECT_DOUBLE_EQ(rows[0].unallocated_at_100.p25, 6.5);
  EXPECT_DOUBLE_EQ(rows[0].unallocated_at_100.p75, 7.5);
  EXPECT_FALSE(rows[0].authors_median.has_value());
  EXPECT_DOUBLE_EQ(rows[0].mean_seconds, 0.5);

  EXPECT_EQ(rows[1].trace, "default");
  EXPECT_EQ(rows[1].policy, "fgd");
  EXPECT_EQ(rows[1].seeds, 4);
  EXPECT_DOUBLE_EQ(rows[1].unallocated_at_100.p25, 1.75);
  EXPECT_DOUBLE_EQ(rows[1].unallocated_at_100.median, 2.5);
  EXPECT_DOUBLE_EQ(rows[1].unallocated_at_100.p75, 3.25);
  ASSERT_TRUE(rows[1].authors_median.has_value());
  EXPECT_DOUBLE_EQ(*rows[1].authors_median, 5.0);
  EXPECT_DOUBLE_EQ(rows[1].mean_seconds, 0.5);  // (1 + 0.5 + 0.125 + 0.375) / 4

  EXPECT_EQ(rows[2].trace, "cpu050");
  EXPECT_EQ(rows[2].policy, "fgd");
  EXPECT_EQ(rows[2].seeds, 1);
  EXPECT_DOUBLE_EQ(rows[2].unallocated_at_100.median, 5.0);
  EXPECT_FALSE(rows[2].authors_median.has_value());

  EXPECT_TRUE(Summarize({}, authors, {"fgd"}).empty());
}

TEST(SummarizeTest, CsvTableAndJson) {
  AuthorsResults authors;
  authors[{"default", "fgd"}] = {6.0, 4.0, 5.0};
  std::vector<FgdSummaryRow> rows = Summarize(SyntheticRuns(), authors, {"bestfit", "fgd"});
  ASSERT_EQ(rows.size(), 3u);

  std::vector<std::string> csv = Lines(SummaryCsv(rows));
  ASSERT_EQ(csv.size(), 4u);
  EXPECT_EQ(csv[0],
            "trace,policy,seeds,unallocated_median,unallocated_p25,unallocated_p75,"
            "authors_median,diff,mean_seconds");
  EXPECT_EQ(csv[1], "default,bestfit,2,7.0000,6.5000,7.5000,,,0.5000");
  EXPECT_EQ(csv[2], "default,fgd,4,2.5000,1.7500,3.2500,5.0000,-2.5000,0.5000");
  EXPECT_EQ(csv[3], "cpu050,fgd,1,5.0000,5.0000,5.0000,,,2.0000");

  std::string table = SummaryTable(rows);
  EXPECT_NE(table.find("Unallocated GPU %"), std::string::npos);
  std::vector<std::string> lines = Lines(table);
  bool found_fgd = false;
  for (const std::string& l : lines) {
    if (l.rfind("default", 0) == 0 && l.find("fgd") != std::string::npos) {
      found_fgd = true;
      EXPECT_NE(l.find("2.50"), std::string::npos) << l;
      EXPECT_NE(l.find("5.00"), std::string::npos) << l;
      EXPECT_NE(l.find("-2.50"), std::string::npos) << l;
    }
  }
  EXPECT_TRUE(found_fgd) << table;
  // A blank line between traces.
  EXPECT_NE(table.find("\n\ncpu050"), std::string::npos) << table;

  nlohmann::json j = SummaryJson(rows);
  ASSERT_TRUE(j.contains("summary"));
  ASSERT_TRUE(j["summary"].is_array());
  ASSERT_EQ(j["summary"].size(), 3u);
  const nlohmann::json& fgd = j["summary"][1];
  EXPECT_EQ(fgd["trace"], "default");
  EXPECT_EQ(fgd["policy"], "fgd");
  EXPECT_EQ(fgd["seeds"], 4);
  EXPECT_DOUBLE_EQ(fgd["unallocated_pct_at_100"]["median"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(fgd["unallocated_pct_at_100"]["p25"].get<double>(), 1.75);
  EXPECT_DOUBLE_EQ(fgd["unallocated_pct_at_100"]["p75"].get<double>(), 3.25);
  EXPECT_DOUBLE_EQ(fgd["authors_median"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(fgd["mean_seconds_per_run"].get<double>(), 0.5);
  EXPECT_TRUE(j["summary"][0]["authors_median"].is_null());
  EXPECT_EQ(j["summary"][2]["trace"], "cpu050");
  // Round-trips through text.
  EXPECT_EQ(nlohmann::json::parse(j.dump()), j);
}

// --- DiscreteCsv ---------------------------------------------------------------------------

// A pinned variant's long name widens the trace column instead of running into the
// policy: every row's policy starts in the same column.
TEST(SummarizeTest, TableColumnFitsLongTraceNames) {
  FgdSummaryRow a;
  a.trace = "default";
  a.policy = "fgd";
  a.seeds = 1;
  FgdSummaryRow b = a;
  b.trace = "multigpu50-pin75one";
  b.policy = "tessera";
  std::vector<std::string> lines = Lines(SummaryTable({a, b}));
  std::vector<size_t> policy_columns;
  for (const std::string& l : lines) {
    for (const char* p : {" fgd ", " tessera "}) {
      if (size_t at = l.find(p); at != std::string::npos) {
        policy_columns.push_back(at);
      }
    }
  }
  ASSERT_EQ(policy_columns.size(), 2U) << SummaryTable({a, b});
  EXPECT_EQ(policy_columns[0], policy_columns[1]);
  EXPECT_EQ(policy_columns[0], b.trace.size());
}

TEST(DiscreteCsvTest, AuthorsShape) {
  FgdRunResult a = MakeRun("default", "fgd", 42, 95.5);
  a.alloc_pct[0] = 0.25;
  a.alloc_pct[1] = 2.0;
  a.alloc_pct[2] = 12.05;
  a.alloc_pct[130] = 100.0;
  a.frag_pct[100] = 3.1;
  a.frag_ratio_pct[100] = 70.0;
  FgdRunResult b = MakeRun("gpushare40", "tessera", 51, 90.0);
  FgdRunResult c = MakeRun("cpu050", "my-policy", 7, 80.0);

  std::string text = DiscreteCsv({a, b, c}, DiscreteMetric::kAlloc, 1.3);
  std::vector<std::string> lines = Lines(text);
  ASSERT_EQ(lines.size(), 4u);
  std::string header = "workload,sc_policy,tune,seed,total_gpus";
  for (int k = 0; k <= 130; ++k) {
    header += "," + std::to_string(k);
  }
  EXPECT_EQ(lines[0], header);

  std::vector<std::string> row = Cells(lines[1]);
  ASSERT_EQ(row.size(), 5u + kArrivedBins);
  EXPECT_EQ(row[0], "openb_pod_list_default");
  EXPECT_EQ(row[1], "06-FGD");
  EXPECT_EQ(row[2], "1.3");
  EXPECT_EQ(row[3], "42");
  EXPECT_EQ(row[4], "6212");
  EXPECT_EQ(row[5 + 0], "0.25");
  EXPECT_EQ(row[5 + 1], "2.0");
  EXPECT_EQ(row[5 + 2], "12.05");
  EXPECT_EQ(row[5 + 3], "");  // NaN: missing, as in the authors' files
  EXPECT_EQ(row[5 + 100], "95.5");
  EXPECT_EQ(row[5 + 130], "100.0");

  row = Cells(lines[2]);
  ASSERT_EQ(row.size(), 5u + kArrivedBins);
  EXPECT_EQ(row[0], "openb_pod_list_gpushare40");
  EXPECT_EQ(row[1], "07-Tessera");
  EXPECT_EQ(row[3], "51");
  EXPECT_EQ(row[5 + 100], "90.0");
  EXPECT_EQ(Cells(lines[3])[1], "my-policy");

  // The other metrics take the other vectors.
  std::vector<std::string> frag = Lines(DiscreteCsv({a}, DiscreteMetric::kFrag, 1.0));
  ASSERT_EQ(frag.size(), 2u);
  EXPECT_EQ(Cells(frag[1])[2], "1.0");
  EXPECT_EQ(Cells(frag[1])[5 + 100], "3.1");
  EXPECT_EQ(Cells(frag[1])[5 + 0], "");
  std::vector<std::string> ratio = Lines(DiscreteCsv({a}, DiscreteMetric::kFragRatio, 1.25));
  EXPECT_EQ(Cells(ratio[1])[2], "1.25");
  EXPECT_EQ(Cells(ratio[1])[5 + 100], "70.0");

  // Only the header without runs.
  EXPECT_EQ(DiscreteCsv({}, DiscreteMetric::kAlloc, 1.3), header + "\n");
}

TEST(DiscreteCsvTest, HeaderMatchesTheAuthorsFileAndReadsBack) {
  std::string results_dir = TracesDir("fgd-kss-expected-results");
  ASSERT_FALSE(results_dir.empty());
  std::ifstream in(results_dir + "/analysis_allo_discrete.csv");
  std::string authors_header;
  ASSERT_TRUE(std::getline(in, authors_header));
  std::vector<FgdRunResult> runs{MakeRun("default", "fgd", 42, 95.23),
                                 MakeRun("default", "fgd", 43, 95.0),
                                 MakeRun("multigpu50", "random", 42, 81.5)};
  std::string text = DiscreteCsv(runs, DiscreteMetric::kAlloc, 1.3);
  EXPECT_EQ(Lines(text)[0], authors_header);

  // What we write, the authors' reader reads.
  TempDir dir;
  StatusOr<AuthorsResults> back = ReadAuthorsResults(dir.Write("ours.csv", text));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 2u);
  ASSERT_EQ(back->at({"default", "fgd"}).size(), 2u);
  EXPECT_NEAR(back->at({"default", "fgd"})[0], 4.77, 1e-9);
  EXPECT_NEAR(back->at({"default", "fgd"})[1], 5.0, 1e-9);
  EXPECT_NEAR(back->at({"multigpu50", "random"})[0], 18.5, 1e-9);
}

// --- UnallocatedSvg -------------------------------------------------------------------------

TEST(UnallocatedSvgTest, WellFormedLookingPlot) {
  std::vector<FgdRunResult> runs;
  for (uint64_t seed : {42, 43, 44}) {
    for (const std::string policy : {"fgd", "bestfit", "random"}) {
      FgdRunResult r = MakeRun("default", policy, seed, 0);
      for (int k = 0; k <= 130; k += 2) {
        double lost = policy == "fgd" ? 1.0 : (policy == "bestfit" ? 2.0 : 4.0);
        r.alloc_pct[k] =
            std::min<double>(k, 100) - lost * k / 100.0 - static_cast<double>(seed - 42);
      }
      runs.push_back(r);
    }
  }
  runs.push_back(MakeRun("cpu050", "dotprod", 42, 90.0));  // another trace: not plotted

  std::string svg = UnallocatedSvg("default", runs, {"random", "bestfit", "fgd", "dotprod"});
  ASSERT_GT(svg.size(), 100u);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u) << svg.substr(0, 80);
  std::string tail = svg.substr(svg.find_last_not_of("\n") + 1 - 6, 6);
  EXPECT_EQ(tail, "</svg>");
  EXPECT_EQ(Count(svg, "<svg"), 1u);
  EXPECT_EQ(Count(svg, "</svg>"), 1u);
  EXPECT_EQ(Count(svg, "<text"), Count(svg, "</text>"));
  for (const std::string p : {"random", "bestfit", "fgd"}) {
    EXPECT_NE(svg.find(">" + p + " ("), std::string::npos) << p;
  }
  // dotprod has no run on this trace: no legend entry, no series.
  EXPECT_EQ(svg.find("dotprod"), std::string::npos);
  EXPECT_EQ(Count(svg, "<path"), 2u * 3u);  // a band and a median line per policy
  EXPECT_NE(svg.find("default"), std::string::npos);
  // Median over seeds at 100 % in the legend: fgd loses 1 + (0, 1, 2) -> 2.00.
  EXPECT_NE(svg.find(">fgd (2.00)<"), std::string::npos);
  EXPECT_NE(svg.find(">bestfit (3.00)<"), std::string::npos);
  EXPECT_NE(svg.find(">random (5.00)<"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(UnallocatedSvgTest, NoRunsStillGivesADocument) {
  std::string svg = UnallocatedSvg("default", {}, {"fgd"});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(Count(svg, "<path"), 0u);
}

}  // namespace
}  // namespace tessera
