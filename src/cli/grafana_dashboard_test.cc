// deploy/grafana/tessera.json: a well-formed Grafana dashboard whose queries use only
// the metric names the controller exports (the list below is the one place they are
// written down for this check) and only template variables it defines.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

using nlohmann::json;

// What the controller exports: /metrics (tessera_*) and /metrics/gpus (DCGM_FI_*).
const std::set<std::string>& ExportedMetrics() {
  static const std::set<std::string> kMetrics = {
      "tessera_jobs",
      "tessera_jobs_submitted_total",
      "tessera_jobs_finished_total",
      "tessera_scheduler_cycle_duration_seconds",
      "tessera_scheduler_cycles_total",
      "tessera_scheduler_decisions_total",
      "tessera_preemptions_total",
      "tessera_queue_quota",
      "tessera_agents",
      "tessera_gpus",
      "tessera_gpu_drained",
      "tessera_gpu_allocated_ratio",
      "tessera_tenant_gpus_in_use",
      "tessera_tenant_gpu_seconds_total",
      "tessera_tenant_gpu_seconds_used_total",
      "tessera_queue_gpu_utilisation_ratio",
      "tessera_cluster_gpu_utilisation_ratio",
      "tessera_jobs_idle",
      "tessera_jobs_hung",
      "DCGM_FI_DEV_GPU_UTIL",
      "DCGM_FI_DEV_FB_USED",
      "DCGM_FI_DEV_FB_FREE",
      "DCGM_FI_DEV_GPU_TEMP",
      "DCGM_FI_DEV_POWER_USAGE",
      "DCGM_FI_DEV_SM_CLOCK",
      "DCGM_FI_DEV_XID_ERRORS",
      "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
      "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
      "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
      "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
  };
  return kMetrics;
}
// Histograms among them: queries read their _bucket, _sum and _count series.
const std::set<std::string> kHistograms = {"tessera_scheduler_cycle_duration_seconds"};
// Grafana's own variables.
const std::set<std::string> kBuiltinVariables = {"__rate_interval", "__range", "__interval",
                                                 "__range_s", "__interval_ms"};

json LoadDashboard() {
  const std::string path = std::string(TESSERA_SOURCE_DIR) + "/deploy/grafana/tessera.json";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  json d = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(d.is_discarded()) << path << " is not JSON";
  return d;
}

// Every panel, those nested in rows too.
void CollectPanels(const json& panels, std::vector<json>* out) {
  for (const json& p : panels) {
    out->push_back(p);
    if (p.contains("panels") && p["panels"].is_array()) {
      CollectPanels(p["panels"], out);
    }
  }
}

std::vector<json> Panels(const json& dashboard) {
  std::vector<json> out;
  CollectPanels(dashboard.value("panels", json::array()), &out);
  return out;
}

// The PromQL of every target and every query variable.
std::vector<std::string> Queries(const json& dashboard) {
  std::vector<std::string> queries;
  for (const json& panel : Panels(dashboard)) {
    for (const json& target : panel.value("targets", json::array())) {
      if (target.contains("expr") && target["expr"].is_string()) {
        queries.push_back(target["expr"].get<std::string>());
      }
    }
  }
  for (const json& v : dashboard["templating"]["list"]) {
    if (v.value("type", "") != "query") {
      continue;
    }
    if (v.contains("definition") && v["definition"].is_string()) {
      queries.push_back(v["definition"].get<std::string>());
    }
    const json q = v.value("query", json());
    if (q.is_string()) {
      queries.push_back(q.get<std::string>());
    } else if (q.is_object() && q.contains("query") && q["query"].is_string()) {
      queries.push_back(q["query"].get<std::string>());
    }
  }
  return queries;
}

std::set<std::string> MetricNames(const std::string& expr) {
  static const std::regex kName(R"((^|[^A-Za-z0-9_:])((tessera_|DCGM_FI_)[A-Za-z0-9_:]*))");
  std::set<std::string> names;
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), kName);
       it != std::sregex_iterator(); ++it) {
    names.insert((*it)[2].str());
  }
  return names;
}

// The exported metric a series name belongs to ("x_bucket" of histogram x), or "".
std::string ExportedMetricOf(const std::string& name) {
  if (ExportedMetrics().count(name) > 0) {
    return name;
  }
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      const std::string base = name.substr(0, name.size() - s.size());
      if (kHistograms.count(base) > 0) {
        return base;
      }
    }
  }
  return "";
}

TEST(GrafanaDashboardTest, IsADashboard) {
  const json d = LoadDashboard();
  ASSERT_TRUE(d.is_object());
  EXPECT_EQ(d.value("title", ""), "Tessera");
  EXPECT_FALSE(d.value("uid", "").empty());
  ASSERT_TRUE(d.contains("schemaVersion") && d["schemaVersion"].is_number_integer());
  EXPECT_GE(d["schemaVersion"].get<int>(), 36);
  ASSERT_TRUE(d.contains("panels") && d["panels"].is_array());
  const std::vector<json> panels = Panels(d);
  ASSERT_FALSE(panels.empty());

  std::set<int64_t> ids;
  size_t with_queries = 0;
  for (const json& p : panels) {
    const std::string title = p.value("title", "");
    EXPECT_FALSE(title.empty()) << p.dump();
    EXPECT_FALSE(p.value("type", "").empty()) << title;
    ASSERT_TRUE(p.contains("id") && p["id"].is_number_integer()) << title;
    EXPECT_TRUE(ids.insert(p["id"].get<int64_t>()).second) << "panel id repeated: " << p["id"];
    ASSERT_TRUE(p.contains("gridPos") && p["gridPos"].is_object()) << title;
    const json& g = p["gridPos"];
    for (const char* key : {"h", "w", "x", "y"}) {
      ASSERT_TRUE(g.contains(key) && g[key].is_number_integer()) << title << " gridPos." << key;
    }
    EXPECT_GT(g["h"].get<int>(), 0) << title;
    EXPECT_GT(g["w"].get<int>(), 0) << title;
    EXPECT_GE(g["x"].get<int>(), 0) << title;
    EXPECT_LE(g["x"].get<int>() + g["w"].get<int>(), 24) << title;
    if (p["type"] == "row") {
      continue;
    }
    ASSERT_TRUE(p.contains("targets") && p["targets"].is_array()) << title;
    ASSERT_FALSE(p["targets"].empty()) << title;
    ++with_queries;
    std::set<std::string> ref_ids;
    for (const json& t : p["targets"]) {
      ASSERT_TRUE(t.contains("expr") && t["expr"].is_string()) << title;
      EXPECT_FALSE(t["expr"].get<std::string>().empty()) << title;
      ASSERT_TRUE(t.contains("refId") && t["refId"].is_string()) << title;
      EXPECT_TRUE(ref_ids.insert(t["refId"].get<std::string>()).second) << title;
    }
    // Every query goes to the data source the user picked.
    ASSERT_TRUE(p.contains("datasource") && p["datasource"].is_object()) << title;
    EXPECT_EQ(p["datasource"].value("uid", ""), "${datasource}") << title;
    EXPECT_EQ(p["datasource"].value("type", ""), "prometheus") << title;
  }
  EXPECT_GE(with_queries, 20U);
}

TEST(GrafanaDashboardTest, HasTheTemplateVariables) {
  const json d = LoadDashboard();
  ASSERT_TRUE(d.contains("templating") && d["templating"].contains("list"));
  std::map<std::string, json> vars;
  for (const json& v : d["templating"]["list"]) {
    vars[v.value("name", "")] = v;
  }
  ASSERT_EQ(vars.count("datasource"), 1U);
  EXPECT_EQ(vars["datasource"].value("type", ""), "datasource");
  EXPECT_EQ(vars["datasource"].value("query", ""), "prometheus");
  for (const char* name : {"Hostname", "tenant"}) {
    ASSERT_EQ(vars.count(name), 1U) << name;
    EXPECT_EQ(vars[name].value("type", ""), "query") << name;
    const std::string definition = vars[name].value("definition", "");
    EXPECT_EQ(definition.rfind("label_values(", 0), 0U) << definition;
    EXPECT_NE(definition.find(", " + std::string(name) + ")"), std::string::npos) << definition;
    EXPECT_EQ(vars[name]["query"].value("query", ""), definition) << name;
    EXPECT_EQ(vars[name]["datasource"].value("uid", ""), "${datasource}") << name;
  }
}

TEST(GrafanaDashboardTest, QueriesUseOnlyExportedMetrics) {
  const json d = LoadDashboard();
  const std::vector<std::string> queries = Queries(d);
  ASSERT_GE(queries.size(), 20U);
  std::set<std::string> used;
  for (const std::string& q : queries) {
    const std::set<std::string> names = MetricNames(q);
    EXPECT_FALSE(names.empty()) << "no metric in: " << q;
    for (const std::string& name : names) {
      const std::string metric = ExportedMetricOf(name);
      EXPECT_FALSE(metric.empty()) << "'" << name << "' is not exported by the controller: " << q;
      used.insert(metric);
    }
  }
  // The dashboard shows every metric there is.
  for (const std::string& metric : ExportedMetrics()) {
    EXPECT_EQ(used.count(metric), 1U) << metric << " is on no panel";
  }
  // The checker itself: a histogram's buckets count, an unknown name does not.
  EXPECT_EQ(MetricNames("sum(rate(tessera_x_total[5m])) + DCGM_FI_DEV_GPU_UTIL"),
            (std::set<std::string>{"tessera_x_total", "DCGM_FI_DEV_GPU_UTIL"}));
  EXPECT_EQ(ExportedMetricOf("tessera_scheduler_cycle_duration_seconds_bucket"),
            "tessera_scheduler_cycle_duration_seconds");
  EXPECT_EQ(ExportedMetricOf("tessera_jobs_bucket"), "");
  EXPECT_EQ(ExportedMetricOf("tessera_x_total"), "");
}

TEST(GrafanaDashboardTest, QueriesAreBalancedAndUseDefinedVariables) {
  const json d = LoadDashboard();
  std::set<std::string> defined = kBuiltinVariables;
  for (const json& v : d["templating"]["list"]) {
    defined.insert(v.value("name", ""));
  }
  static const std::regex kVariable(R"(\$\{?([A-Za-z_][A-Za-z0-9_]*))");
  for (const std::string& q : Queries(d)) {
    int parens = 0;
    int braces = 0;
    int brackets = 0;
    bool quoted = false;
    for (size_t i = 0; i < q.size(); ++i) {
      const char c = q[i];
      if (c == '"' && (i == 0 || q[i - 1] != '\\')) {
        quoted = !quoted;
      }
      if (quoted) {
        continue;
      }
      parens += c == '(' ? 1 : c == ')' ? -1 : 0;
      braces += c == '{' ? 1 : c == '}' ? -1 : 0;
      brackets += c == '[' ? 1 : c == ']' ? -1 : 0;
      EXPECT_TRUE(parens >= 0 && braces >= 0 && brackets >= 0) << q;
    }
    EXPECT_FALSE(quoted) << q;
    EXPECT_EQ(parens, 0) << q;
    EXPECT_EQ(braces, 0) << q;
    EXPECT_EQ(brackets, 0) << q;
    for (auto it = std::sregex_iterator(q.begin(), q.end(), kVariable);
         it != std::sregex_iterator(); ++it) {
      EXPECT_EQ(defined.count((*it)[1].str()), 1U) << "undefined $" << (*it)[1] << " in " << q;
    }
  }
}

}  // namespace
