// The cluster's admin and view commands (nodes, queues, usage), the transport (URL
// prefix, TLS) and the command line, against the fake controller.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/testing/self_signed_cert.h"
#include "cli/cluster_commands.h"
#include "cli/testing/fake_controller.h"

namespace tessera {
namespace {

using namespace ::tessera::cli_testing;  // NOLINT: the fake controller and its helpers

// ---------------------------------------------------------------------------------
// nodes

const char* kNodes = R"({"nodes": [
  {"name": "node-a", "state": "up", "reason": "", "last_heartbeat": "2026-11-29T21:09:55Z",
   "labels": {"rack": "r1", "block": "b1"},
   "cpu_milli": 64000, "cpu_used_milli": 8000, "memory_mib": 1048576, "memory_used_mib": 262144,
   "gpus": [
     {"index": 0, "uuid": "GPU-a0", "model": "H100-80GB", "mode": "exclusive", "used_milli": 1000,
      "holders": [{"job": 42, "tenant": "team-a", "milli": 1000, "mig_profile": null}]},
     {"index": 1, "uuid": "GPU-a1", "model": "H100-80GB", "mode": "shared", "used_milli": 300,
      "holders": [{"job": 43, "tenant": "team-b", "milli": 200, "mig_profile": null},
                  {"job": 44, "tenant": "team-c", "milli": 100, "mig_profile": null}]},
     {"index": 2, "uuid": "GPU-a2", "model": "H100-80GB", "mode": "mig", "used_milli": 571,
      "holders": [{"job": 45, "tenant": "team-a", "milli": 428, "mig_profile": "3g.40gb"},
                  {"job": 46, "tenant": "team-b", "milli": 143, "mig_profile": "1g.10gb"}]},
     {"index": 3, "uuid": "GPU-a3", "model": "H100-80GB", "mode": "exclusive", "used_milli": 0,
      "holders": []}]},
  {"name": "node-b", "state": "down", "reason": "no heartbeat for 2m",
   "last_heartbeat": "2026-11-29T21:08:00Z", "cpu_milli": 32000, "cpu_used_milli": 0,
   "memory_mib": 524288, "memory_used_mib": 0,
   "gpus": [{"index": 0, "uuid": "GPU-b0", "model": "A100-40GB", "mode": "mig", "used_milli": 0,
             "holders": []}]}
]})";

TEST(NodesTest, TableAndGpuMap) {
  FakeController ctl;
  ctl.Reply("GET", "/v1/nodes", 200, kNodes);
  ManualClock clock = TestClock();
  NodesOptions o;
  o.gpus = true;
  std::ostringstream out, err;
  EXPECT_EQ(RunNodes(ctl.Config(), o, clock, out, err), 0) << err.str();
  EXPECT_EQ(out.str(),
            "NAME    STATE  GPUS     MODEL      CPU   MEMORY       HEARTBEAT  LABELS            "
            "REASON\n"
            "node-a  up     1.871/4  H100-80GB  8/64  256GiB/1TiB  5s         block=b1,rack=r1\n"
            "node-b  down   0/1      A100-40GB  0/32  0MiB/512GiB  2m         -                 "
            "no heartbeat for 2m\n"
            "\n"
            "GPU map: [###.......] tenths of a GPU in use, [m:3g,1g...] MIG instances; then the "
            "jobs holding it\n"
            "node-a  [##########]42  [###.......]43,44  [m:3g,1g...]45,46  [..........]\n"
            "node-b  [m:........]  (down)\n"
            "jobs: 42=team-a 43=team-b 44=team-c 45=team-a 46=team-b\n");
  ASSERT_EQ(ctl.requests().size(), 1u);
  EXPECT_EQ(ctl.requests()[0].path, "/v1/nodes");
}

TEST(NodesTest, BarsRoundToTenthsButShowAnyUseAndAnyFreeSpace) {
  FakeController ctl;
  ctl.Reply("GET", "/v1/nodes", 200, R"({"nodes": [{"name": "n", "state": "up", "gpus": [
    {"index": 0, "mode": "shared", "used_milli": 10, "holders": [{"job": 1, "tenant": "t"}]},
    {"index": 1, "mode": "shared", "used_milli": 990, "holders": [{"job": 2, "tenant": "t"}]},
    {"index": 2, "mode": "shared", "used_milli": 550, "holders": []},
    {"index": 3, "mode": "mig", "used_milli": 1000, "holders": [
      {"job": 3, "mig_profile": "1g.10gb"}, {"job": 4, "mig_profile": "1g.10gb"},
      {"job": 5, "mig_profile": "2g.20gb"}, {"job": 6, "mig_profile": "3g.40gb"}]}]}]})");
  ManualClock clock = TestClock();
  NodesOptions o;
  o.gpus = true;
  std::ostringstream out, err;
  EXPECT_EQ(RunNodes(ctl.Config(), o, clock, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("n  [#.........]1  [#########.]2  [######....]  [m:1gx2,2g+]3,4,5,6\n"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("jobs: 1=t 2=t 3=? 4=? 5=? 6=?\n"), std::string::npos) << out.str();
}

TEST(NodesTest, TimesliceGpusAreSaidToShareWithoutIsolation) {
  FakeController ctl;
  ctl.Reply("GET", "/v1/nodes", 200, R"({"nodes": [{"name": "n", "state": "up", "gpus": [
    {"index": 0, "model": "A100-80GB", "mode": "timeslice", "replicas": 4, "used_milli": 500,
     "holders": [{"job": 1, "tenant": "t"}, {"job": 2, "tenant": "t"}]},
    {"index": 1, "model": "A100-80GB", "mode": "exclusive", "replicas": 0, "used_milli": 0,
     "holders": []}]}]})");
  ManualClock clock = TestClock();
  std::ostringstream out, err;
  EXPECT_EQ(RunNodes(ctl.Config(), NodesOptions{}, clock, out, err), 0) << err.str();
  EXPECT_NE(
      out.str().find(
          "n GPU 0 timeslice, 4 replicas: no memory or fault isolation between its shares\n"),
      std::string::npos)
      << out.str();
  EXPECT_EQ(out.str().find("GPU 1 timeslice"), std::string::npos) << out.str();
}

// ---------------------------------------------------------------------------------
// queues

TEST(QueuesTest, TableInGpusAndBinaryUnits) {
  FakeController ctl;
  ctl.Reply("GET", "/v1/queues", 200, R"({"queues": [
    {"name": "team-a", "parent": "root", "tenant": "team-a", "weight": 1, "pending": 3,
     "running": 2, "resources": [
       {"resource": "gpu", "nominal": 8000, "borrowing_limit": null, "lending_limit": null,
        "used": 4500},
       {"resource": "memory", "nominal": 524288, "borrowing_limit": null,
        "lending_limit": 262144, "used": 1536}]},
    {"name": "team-b", "parent": "root", "tenant": "team-b", "weight": 2.5, "pending": 0,
     "running": 0, "resources": [
       {"resource": "gpu:H100-80GB", "nominal": 1500, "borrowing_limit": 2000,
        "lending_limit": 0, "used": 1}]},
    {"name": "root", "parent": "", "tenant": "", "weight": 1, "pending": 0, "running": 0,
     "resources": []}]})");
  std::ostringstream out, err;
  EXPECT_EQ(RunQueues(ctl.Config(), QueuesOptions{}, out, err), 0) << err.str();
  EXPECT_EQ(out.str(),
            "NAME    PARENT  TENANT  WEIGHT  PENDING  RUNNING  RESOURCE       NOMINAL  USED    "
            "BORROWING-LIMIT  LENDING-LIMIT\n"
            "team-a  root    team-a  1       3        2        gpu            8        4.5     -"
            "                -\n"
            "                                                  memory         512GiB   1.5GiB  -"
            "                256GiB\n"
            "team-b  root    team-b  2.5     0        0        gpu:H100-80GB  1.5      0.001   2"
            "                0\n"
            "root                    1       0        0        -              -        -       -"
            "                -\n");
}

TEST(QueuesTest, SetSendsTheYamlAsIsAndNeedsAnAdmin) {
  char tmpl[] = "/tmp/tessera_cli_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string yaml = "queues:\n  - name: team-a\n    quota: {gpu: 8}\n";
  std::ofstream(dir + "/queues.yaml") << yaml;

  FakeController ctl;
  auto allowed = std::make_shared<bool>(true);
  ctl.On("PUT", "/v1/queues", [allowed](const httplib::Request&, httplib::Response& res) {
    if (*allowed) {
      res.set_content(R"({"queues": [{"name": "team-a"}, {"name": "root"}]})", "application/json");
    } else {
      res.status = 403;
      res.set_content(Error("PermissionDenied", "only admins may change queues"),
                      "application/json");
    }
  });
  QueuesSetOptions o;
  o.file = dir + "/queues.yaml";
  std::ostringstream out, err;
  EXPECT_EQ(RunQueuesSet(ctl.Config(), o, out, err), 0) << err.str();
  EXPECT_EQ(out.str(), "queue configuration replaced (2 queues)\n");
  *allowed = false;
  std::ostringstream err2;
  EXPECT_EQ(RunQueuesSet(ctl.Config(), o, out, err2), 4);
  EXPECT_EQ(err2.str(), "tessera: only admins may change queues (PermissionDenied)\n");

  const std::vector<SeenRequest> seen = ctl.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].method, "PUT");
  EXPECT_EQ(seen[0].content_type, "application/yaml");
  EXPECT_EQ(seen[0].body, yaml);

  o.file = dir + "/missing.yaml";
  std::ostringstream err3;
  EXPECT_EQ(RunQueuesSet(ctl.Config(), o, out, err3), 2);
  EXPECT_EQ(ctl.requests().size(), 2u);
  std::filesystem::remove_all(dir);
}

// ---------------------------------------------------------------------------------
// usage

const char* kUsage = R"({"since": "2026-11-01T00:00:00Z", "until": "2026-11-29T21:10:00Z",
  "by": "tenant", "rows": [{"key": "team-a", "gpu_hours": 12.5, "jobs": 3},
                           {"key": "team,b", "gpu_hours": 0.25, "jobs": 1}]})";

TEST(UsageTest, TableWithTotalAndTheTimesInTheQuery) {
  FakeController ctl;
  ctl.Reply("GET", "/v1/usage", 200, kUsage);
  ManualClock clock = TestClock();
  UsageOptions o;
  o.since = "2026-11-01";
  std::ostringstream out, err;
  EXPECT_EQ(RunUsage(ctl.Config(), o, clock, out, err), 0) << err.str();
  EXPECT_EQ(out.str(),
            "GPU usage from 2026-11-01T00:00:00Z to 2026-11-29T21:10:00Z by tenant\n"
            "TENANT  GPU-HOURS  JOBS\n"
            "team-a      12.50     3\n"
            "team,b       0.25     1\n"
            "TOTAL       12.75     4\n");
  const std::vector<SeenRequest> seen = ctl.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].Param("since"), "2026-11-01T00:00:00Z");
  EXPECT_EQ(seen[0].Param("until"), "2026-11-29T21:10:00Z");
  EXPECT_EQ(seen[0].Param("by"), "tenant");
}

TEST(UsageTest, CsvAndRelativeTimes) {
  FakeController ctl;
  ctl.Reply("GET", "/v1/usage", 200, kUsage);
  ManualClock clock = TestClock();
  UsageOptions o;
  o.since = "24h";
  o.until = "1h";
  o.by = "queue";
  o.output = "csv";
  std::ostringstream out, err;
  EXPECT_EQ(RunUsage(ctl.Config(), o, clock, out, err), 0) << err.str();
  EXPECT_EQ(out.str(), "queue,gpu_hours,jobs\nteam-a,12.5,3\n\"team,b\",0.25,1\n");
  const std::vector<SeenRequest> seen = ctl.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].Param("since"), "2026-11-28T21:10:00Z");
  EXPECT_EQ(seen[0].Param("until"), "2026-11-29T20:10:00Z");
  EXPECT_EQ(seen[0].Param("by"), "queue");
}

TEST(UsageTest, BadArgumentsExit2AndRateLimitExits6) {
  FakeController ctl;
  ctl.Reply("GET", "/v1/usage", 429, Error("ResourceExhausted", "slow down"));
  ManualClock clock = TestClock();
  for (const auto& [since, until, by] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"tomorrow", "now", "tenant"}, {"1h", "2h", "tenant"}, {"24h", "now", "gpu"}}) {
    UsageOptions o;
    o.since = since;
    o.until = until;
    o.by = by;
    std::ostringstream out, err;
    EXPECT_EQ(RunUsage(ctl.Config(), o, clock, out, err), 2) << since << " " << until << " " << by;
    EXPECT_EQ(err.str().rfind("tessera: ", 0), 0u);
  }
  EXPECT_TRUE(ctl.requests().empty());
  std::ostringstream out, err;
  EXPECT_EQ(RunUsage(ctl.Config(), UsageOptions{}, clock, out, err), 6);
  EXPECT_EQ(err.str(), "tessera: slow down (ResourceExhausted)\n");
}

// ---------------------------------------------------------------------------------
// Transport: a URL prefix, TLS.

TEST(TransportTest, UrlPrefixIsPutBeforeEveryPath) {
  FakeController ctl;
  ctl.Reply("GET", "/tessera/v1/queues", 200, R"({"queues": []})");
  ClientConfig config = ctl.Config();
  config.server += "/tessera/";
  std::ostringstream out, err;
  EXPECT_EQ(RunQueues(config, QueuesOptions{}, out, err), 0) << err.str();
  ASSERT_EQ(ctl.requests().size(), 1u);
  EXPECT_EQ(ctl.requests()[0].path, "/tessera/v1/queues");
}

TEST(TransportTest, HttpsVerifiesAgainstTheGivenCaOrSkipsWithInsecure) {
  char tmpl[] = "/tmp/tessera_cli_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string cert = dir + "/cert.pem";
  const std::string key = dir + "/key.pem";
  ASSERT_TRUE(testing::WriteSelfSignedCert(cert, key));
  {
    FakeController ctl(std::make_unique<httplib::SSLServer>(cert.c_str(), key.c_str()));
    ctl.Reply("GET", "/v1/queues", 200, R"({"queues": []})");

    // Not trusted by the system's CAs: unreachable, with a hint.
    ClientConfig config = ctl.Config("https");
    std::ostringstream out, err;
    EXPECT_EQ(RunQueues(config, QueuesOptions{}, out, err), 5);
    EXPECT_NE(err.str().find("--ca-cert"), std::string::npos) << err.str();

    config.ca_cert = cert;
    std::ostringstream err2;
    EXPECT_EQ(RunQueues(config, QueuesOptions{}, out, err2), 0) << err2.str();

    ClientConfig insecure = ctl.Config("https");
    insecure.insecure = true;
    std::ostringstream err3;
    EXPECT_EQ(RunQueues(insecure, QueuesOptions{}, out, err3), 0) << err3.str();

    const std::vector<SeenRequest> seen = ctl.requests();
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen[0].authorization, "Bearer tok-123");
  }
  std::filesystem::remove_all(dir);
}

// ---------------------------------------------------------------------------------
// The command line itself: flags reach the options.

TEST(CommandLineTest, SubmitFlagsAndCommandAfterDoubleDash) {
  FakeController ctl;
  ctl.Reply("POST", "/v1/jobs", 201, kRunningJob.dump());
  CLI::App app{"tessera"};
  int exit_code = -1;
  AddClusterCommands(app, &exit_code);
  const std::string server = ctl.Config().server;
  std::vector<std::string> args = {"tessera", "submit", "--server", server,  "--token", "abc",
                                   "--env",   "A=1",    "--env",    "B=2",   "--gpus",  "1",
                                   "--",      "python", "-m",       "train", "--lr",    "3"};
  std::vector<char*> argv;
  for (std::string& a : args) {
    argv.push_back(a.data());
  }
  ::testing::internal::CaptureStdout();
  app.parse(static_cast<int>(argv.size()), argv.data());
  const std::string printed = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(exit_code, 0);
  EXPECT_EQ(printed, "42\n");
  const std::vector<SeenRequest> seen = ctl.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].authorization, "Bearer abc");
  // The directory it ran in goes with the job.
  json body = json::parse(seen[0].body);
  const std::string submit_dir = body.value("submit_dir", "");
  ASSERT_FALSE(submit_dir.empty()) << body.dump();
  EXPECT_TRUE(std::filesystem::equivalent(submit_dir, std::filesystem::current_path()))
      << submit_dir;
  body.erase("submit_dir");
  EXPECT_EQ(body,
            json::parse(R"({"command": ["python", "-m", "train", "--lr", "3"],
                            "env": {"A": "1", "B": "2"}, "resources": {"gpus": 1}})"));
}

TEST(CommandLineTest, EnvTakesOneValueSoTheCommandMayFollowWithoutDoubleDash) {
  FakeController ctl;
  ctl.Reply("POST", "/v1/jobs", 201, kRunningJob.dump());
  CLI::App app{"tessera"};
  int exit_code = -1;
  AddClusterCommands(app, &exit_code);
  std::vector<std::string> args = {"tessera", "submit", "--server", ctl.Config().server,
                                   "--env",   "A=1",    "python",   "train.py"};
  std::vector<char*> argv;
  for (std::string& a : args) {
    argv.push_back(a.data());
  }
  ::testing::internal::CaptureStdout();
  app.parse(static_cast<int>(argv.size()), argv.data());
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "42\n");
  EXPECT_EQ(exit_code, 0);
  ASSERT_EQ(ctl.requests().size(), 1u);
  json body = json::parse(ctl.requests()[0].body);
  body.erase("submit_dir");
  EXPECT_EQ(body, json::parse(R"({"command": ["python", "train.py"], "env": {"A": "1"}})"));
}

}  // namespace
}  // namespace tessera
