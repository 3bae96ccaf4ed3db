// Prometheus against a running controller: `tessera up` with fake GPUs runs a job;
// Debian's Prometheus scrapes /metrics and /metrics/gpus on loopback with the metrics
// token, and a Tessera metric and a DCGM-named metric come back through its HTTP API
// with the tenant and job labels. promtool checks both expositions, and every metric
// the Grafana dashboard in deploy/ queries is one the controller exports. An XID
// injected into a fake GPU drains it (tessera nodes says why) and no new job lands
// on it. Every wait is bounded; without Prometheus the test fails (scripts/setup.sh
// installs it).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "e2e/process.h"

namespace tessera::e2e {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// Runs `argv` with `input` on stdin; returns (exit code, stdout + stderr).
std::pair<int, std::string> RunWithInput(const std::vector<std::string>& argv, const std::string& input,
                                         const std::string& dir) {
  const std::string in = dir + "/stdin.txt";
  std::ofstream(in) << input;
  std::string command;
  for (const std::string& a : argv) {
    command += "'" + a + "' ";
  }
  Process p({"/bin/sh", "-c", command + "< '" + in + "'"}, dir + "/run.log");
  std::optional<int> rc = p.Wait(60s);
  return {rc.value_or(-1), p.Output()};
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tessera-metrics-e2e-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    ::chmod(tmpl, 0711);  // tasks run as their tenants' uids and must reach the data dirs
    dir_ = tmpl;
    port_ = FreePort();
    url_ = "http://127.0.0.1:" + std::to_string(port_);
  }
  void TearDown() override {
    if (prometheus_ && prometheus_->running()) {
      prometheus_->Signal(SIGTERM);
      EXPECT_TRUE(prometheus_->Wait(30s).has_value());
    }
    if (up_ && up_->running()) {
      up_->Signal(SIGTERM);
      EXPECT_EQ(up_->Wait(30s), std::optional<int>(0)) << up_->Output();
    }
    if (!HasFailure()) {
      std::filesystem::remove_all(dir_);
    } else {
      std::cerr << "kept " << dir_ << " for inspection\n";
    }
  }

  void StartUp() {
    up_ = std::make_unique<Process>(
        std::vector<std::string>{TESSERA_BINARY, "up", "--data", dir_ + "/data", "--listen",
                                 "127.0.0.1:" + std::to_string(port_), "--telemetry-interval", "200ms"},
        dir_ + "/up.log");
    ASSERT_TRUE(WaitFor(
        [&] {
          json nodes = Get("/v1/nodes", Admin());
          return nodes.contains("nodes") && !nodes["nodes"].empty() &&
                 nodes["nodes"][0]["state"] == "up";
        },
        30s))
        << up_->Output();
  }

  std::string Admin() { return Trim(Process::ReadFile(dir_ + "/data/admin.token")); }
  std::string TeamA() { return Trim(Process::ReadFile(dir_ + "/data/tokens/team-a.token")); }

  httplib::Result Request(const std::string& path, const std::string& token) {
    httplib::Client c(url_);
    c.set_bearer_token_auth(token.c_str());
    c.set_connection_timeout(1, 0);
    c.set_read_timeout(30, 0);
    return c.Get(path.c_str());
  }

  json Get(const std::string& path, const std::string& token) {
    auto r = Request(path, token);
    if (!r || r->status != 200) {
      return json::object();
    }
    return json::parse(r->body, nullptr, false);
  }

  uint64_t Submit(const json& spec) {
    httplib::Client c(url_);
    c.set_bearer_token_auth(TeamA().c_str());
    auto r = c.Post("/v1/jobs", spec.dump(), "application/json");
    EXPECT_TRUE(r && (r->status == 200 || r->status == 201)) << (r ? r->body : "no answer");
    return r && (r->status == 200 || r->status == 201) ? json::parse(r->body)["id"].get<uint64_t>() : 0;
  }

  json Node() {
    json nodes = Get("/v1/nodes", Admin());
    return nodes.contains("nodes") && !nodes["nodes"].empty() ? nodes["nodes"][0] : json::object();
  }

  std::string dir_;
  int port_ = 0;
  std::string url_;
  std::unique_ptr<Process> up_;
  std::unique_ptr<Process> prometheus_;
};

// The metric names a text exposition declares (# TYPE lines).
std::set<std::string> DeclaredNames(const std::string& text) {
  std::set<std::string> names;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      names.insert(line.substr(7, line.find(' ', 7) - 7));
    }
  }
  return names;
}

TEST_F(MetricsTest, PrometheusScrapesTesseraAndDcgmMetrics) {
  ASSERT_TRUE(std::filesystem::exists(TESSERA_PROMETHEUS)) << "prometheus not found: run scripts/setup.sh";
  ASSERT_TRUE(std::filesystem::exists(TESSERA_PROMTOOL)) << "promtool not found: run scripts/setup.sh";
  StartUp();
  const uint64_t job = Submit({{"name", "hold"},
                               {"resources", {{"gpus", 2}, {"gpu_model", "H100-80GB"}}},
                               {"command", {"sleep", "120"}}});
  ASSERT_NE(job, 0U);
  ASSERT_TRUE(WaitFor(
      [&] {
        json n = Node();
        return Get("/v1/jobs/" + std::to_string(job), Admin()).value("state", "") == "running" &&
               n.contains("gpus") && !n["gpus"][0]["telemetry"].is_null();
      },
      30s))
      << up_->Output();

  // The metrics token reads metrics and nothing else; a tenant's token reads no metrics.
  const std::string metrics_token = Trim(Process::ReadFile(dir_ + "/data/metrics.token"));
  ASSERT_FALSE(metrics_token.empty());
  auto refused = Request("/v1/jobs", metrics_token);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 403);
  auto tenant_metrics = Request("/metrics", TeamA());
  ASSERT_TRUE(tenant_metrics);
  EXPECT_EQ(tenant_metrics->status, 403);

  auto tessera = Request("/metrics", metrics_token);
  auto gpus = Request("/metrics/gpus", metrics_token);
  ASSERT_TRUE(tessera && gpus);
  ASSERT_EQ(tessera->status, 200);
  ASSERT_EQ(gpus->status, 200);
  EXPECT_NE(tessera->get_header_value("Content-Type").find("text/plain; version=0.0.4"), std::string::npos);

  // promtool: /metrics is clean. /metrics/gpus keeps the DCGM exporter's label names,
  // and promtool's only objection is the one it makes to dcgm-exporter too: modelName
  // is camelCase.
  auto [rc, report] = RunWithInput({TESSERA_PROMTOOL, "check", "metrics"}, tessera->body, dir_);
  EXPECT_EQ(rc, 0) << report << "\n" << tessera->body;
  auto [gpu_rc, gpu_report] = RunWithInput({TESSERA_PROMTOOL, "check", "metrics"}, gpus->body, dir_);
  std::istringstream lines(gpu_report);
  std::string line;
  int problems = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) {
      continue;
    }
    ++problems;
    EXPECT_TRUE(line.rfind("DCGM_FI_DEV_", 0) == 0 &&
                line.find("label names should be written in 'snake_case' not 'camelCase'") !=
                    std::string::npos)
        << line;
  }
  EXPECT_GT(problems, 0) << "expected the modelName lint";
  EXPECT_EQ(gpu_rc, 3) << gpu_report;

  // Every metric the Grafana dashboard queries is exported.
  std::set<std::string> exported = DeclaredNames(tessera->body);
  for (const std::string& n : DeclaredNames(gpus->body)) {
    exported.insert(n);
  }
  const std::string grafana = Process::ReadFile(TESSERA_SOURCE_DIR "/deploy/grafana/tessera.json");
  ASSERT_FALSE(grafana.empty());
  const std::regex metric(R"((tessera_[a-z_]+|DCGM_FI_[A-Z_]+))");
  int queried = 0;
  for (auto it = std::sregex_iterator(grafana.begin(), grafana.end(), metric); it != std::sregex_iterator(); ++it) {
    std::string name = (*it)[1];
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s = suffix;
      if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0 &&
          exported.count(name.substr(0, name.size() - s.size())) > 0) {
        name = name.substr(0, name.size() - s.size());
      }
    }
    ++queried;
    EXPECT_EQ(exported.count(name), 1U) << name << " is in the Grafana dashboard but not exported";
  }
  EXPECT_GT(queried, 10);

  // Prometheus on loopback scrapes both endpoints every second with the metrics token.
  const int prom_port = FreePort();
  const std::string config = dir_ + "/prometheus.yml";
  std::ofstream(config) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                        << "scrape_configs:\n";
  for (const auto& [name, path] : {std::pair{"tessera", "/metrics"}, std::pair{"tessera-gpus", "/metrics/gpus"}}) {
    std::ofstream(config, std::ios::app)
        << "  - job_name: " << name << "\n    metrics_path: " << path
        << "\n    authorization:\n      type: Bearer\n      credentials_file: " << dir_
        << "/data/metrics.token\n    static_configs:\n      - targets: ['127.0.0.1:" << port_ << "']\n";
  }
  prometheus_ = std::make_unique<Process>(
      std::vector<std::string>{TESSERA_PROMETHEUS, "--config.file=" + config,
                               "--storage.tsdb.path=" + dir_ + "/tsdb",
                               "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)},
      dir_ + "/prometheus.log");
  httplib::Client prom("127.0.0.1", prom_port);
  prom.set_connection_timeout(1, 0);
  auto query = [&](const std::string& q) -> json {
    auto r = prom.Get(("/api/v1/query?query=" + httplib::detail::encode_query_param(q)).c_str());
    if (!r || r->status != 200) {
      return json::array();
    }
    json body = json::parse(r->body, nullptr, false);
    return body.is_object() && body["status"] == "success" ? body["data"]["result"] : json::array();
  };
  json running, util;
  const std::string job_label = std::to_string(job);
  ASSERT_TRUE(WaitFor(
      [&] {
        running = query(R"(tessera_jobs{queue="team-a",state="running"})");
        util = query("DCGM_FI_DEV_GPU_UTIL{job_id=\"" + job_label + "\"}");
        return running.size() == 1 && util.size() == 2;
      },
      60s))
      << "tessera_jobs: " << running.dump() << "\nDCGM_FI_DEV_GPU_UTIL: " << util.dump() << "\n"
      << prometheus_->Output();
  EXPECT_EQ(running[0]["value"][1], "1");
  EXPECT_EQ(running[0]["metric"]["job"], "tessera");  // the scrape job
  for (const json& series : util) {
    EXPECT_EQ(series["metric"]["tenant"], "team-a");
    EXPECT_EQ(series["metric"]["modelName"], "H100-80GB");
    EXPECT_EQ(series["metric"]["job"], "tessera-gpus");
    EXPECT_TRUE(series["metric"]["UUID"].get<std::string>().rfind("GPU-", 0) == 0);
    EXPECT_GT(std::stod(series["value"][1].get<std::string>()), 0.0) << "a busy fake GPU is utilised";
  }
  EXPECT_EQ(query("up").size(), 2U);
}

TEST_F(MetricsTest, InjectedXidDrainsTheGpuAndNothingNewLandsOnIt) {
  StartUp();
  // Wait for a first telemetry sample: the baseline of the XID counters.
  ASSERT_TRUE(WaitFor([&] { return !Node()["gpus"][0]["telemetry"].is_null(); }, 30s)) << up_->Output();
  std::ofstream(dir_ + "/data/agent/fake-faults", std::ios::app) << "{\"gpu\":0,\"xid\":79}\n";
  ASSERT_TRUE(WaitFor([&] { return Node()["gpus"][0]["health"] == "drained"; }, 30s)) << Node().dump();
  json gpu0 = Node()["gpus"][0];
  EXPECT_EQ(gpu0["drain"]["by"], "health");
  EXPECT_EQ(gpu0["drain"]["reason"], "XID 79 (GPU has fallen off the bus)");

  // `tessera nodes` says why.
  Process nodes({TESSERA_BINARY, "nodes", "--server", url_, "--token", Admin()}, dir_ + "/nodes.log");
  ASSERT_EQ(nodes.Wait(30s), std::optional<int>(0)) << nodes.Output();
  EXPECT_NE(nodes.Output().find("GPU 0 drained by health"), std::string::npos) << nodes.Output();
  EXPECT_NE(nodes.Output().find("XID 79 (GPU has fallen off the bus)"), std::string::npos) << nodes.Output();

  // The default fake inventory has 2 nodes' worth of H100s on one node (16): fill
  // every whole H100 that is left; none of the jobs may land on GPU 0.
  std::vector<uint64_t> jobs;
  for (int i = 0; i < 16; ++i) {
    jobs.push_back(Submit({{"name", "fill-" + std::to_string(i)},
                           {"resources", {{"gpus", 1}, {"gpu_model", "H100-80GB"}}},
                           {"command", {"sleep", "60"}}}));
  }
  ASSERT_TRUE(WaitFor(
      [&] {
        int running = 0;
        for (uint64_t id : jobs) {
          running += Get("/v1/jobs/" + std::to_string(id), Admin()).value("state", "") == "running";
        }
        return running == 15;
      },
      30s));
  json node = Node();
  EXPECT_TRUE(node["gpus"][0]["holders"].empty()) << node["gpus"][0].dump();
  int held = 0;
  for (const json& gpu : node["gpus"]) {
    held += gpu["model"] == "H100-80GB" && !gpu["holders"].empty();
  }
  EXPECT_EQ(held, 15);
  json pending = Get("/v1/jobs?state=pending", Admin());
  ASSERT_EQ(pending["jobs"].size(), 1U) << pending.dump();

  // An admin resumes the GPU; the last job starts there.
  httplib::Client c(url_);
  c.set_bearer_token_auth(Admin().c_str());
  auto r = c.Post(("/v1/nodes/" + node["name"].get<std::string>() + "/resume").c_str(), R"({"gpu":0})",
                  "application/json");
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  ASSERT_TRUE(WaitFor([&] { return !Node()["gpus"][0]["holders"].empty(); }, 30s)) << Node().dump();
}

}  // namespace
}  // namespace tessera::e2e
