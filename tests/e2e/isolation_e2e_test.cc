// Isolation of tenants on a node (issue 11, "What it must show", item 2), with a real
// `tessera server` and a root `tessera agent`: tasks run as their tenant's uid from
// the controller's pool, and see only their own GPUs' device nodes (fake ones here:
// char devices 1:3, which behave as /dev/null, under the agent's --device-dir).
//
// Tenant B runs a task that keeps running, with a secret in its log and checkpoint
// directory. Tenant A's task then tries to read the admin, join and metrics tokens and
// B's token file (under the server's --data), the agent's node.credential, B's log and
// checkpoint, to write into B's checkpoint directory, to signal B's process, to read the
// agent's environment, and to open every fake GPU device node. Every attempt must fail
// except opening its own GPU; `id -u` in the task is the tenant's run_as uid, not 0 and
// not B's; nothing A's task can print (its environment, its parent's and the agent's
// command line) holds a secret.
// A second test gives a task a MIG instance on fake MIG cards whose capability nodes
// (nvidia-caps) and driver capability files the test makes: it may open only its own.
// Needs root (to start tasks as other uids and to mknod); skipped otherwise.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "e2e/cluster_fixture.h"
#include "e2e/process.h"

namespace tessera::e2e {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr int kGpus = 8;

// Tenant B: a secret in its log and its checkpoint directory; records its pid.
constexpr const char* kVictimScript = R"sh(echo "secret-log-$SECRET"
echo "$SECRET" > "$TESSERA_CHECKPOINT_DIR/secret"
rec="$RECORDS/b.$TESSERA_JOB_ID"
echo "start $TESSERA_JOB_ID $TESSERA_TASK_INDEX $TESSERA_ATTEMPT $$ $CUDA_VISIBLE_DEVICES" >> "$rec"
echo "ckpt $TESSERA_CHECKPOINT_DIR" >> "$rec"
sleep 120 & wait $!
)sh";

// Tenant A: every attempt prints "ok NAME" or "denied NAME".
constexpr const char* kProbeScript = R"sh(try() {
  n=$1; shift
  if "$@" >/dev/null 2>&1; then echo "ok $n"; else echo "denied $n"; fi
}
echo "start $TESSERA_JOB_ID $$ ${CUDA_VISIBLE_DEVICES:-none}" >> "$RECORDS/a.$TESSERA_JOB_ID"
try admin.token cat "$T_ADMIN"
try join.token cat "$T_JOIN"
try metrics.token cat "$T_METRICS"
try tenant-b.token cat "$T_BTOKEN"
try tokens.list ls "$T_TOKENS"
try server-data.list ls "$T_SERVER_DATA"
try node.credential cat "$T_CRED"
try agent-data.list ls "$T_AGENT_DATA"
try b.log cat "$T_BLOG"
try b.checkpoint.list ls "$T_BCKPT"
try b.checkpoint.read cat "$T_BCKPT/secret"
try b.checkpoint.write touch "$T_BCKPT/planted-by-a"
try b.signal kill -0 "$T_BPID"
try agent.environ cat "/proc/$T_AGENT_PID/environ"
for f in "$T_DEVDIR"/nvidia*; do
  if (: < "$f") 2>/dev/null; then echo "dev-ok ${f##*/}"; else echo "dev-denied ${f##*/}"; fi
done
echo "uid $(id -u)"
echo "cvd ${CUDA_VISIBLE_DEVICES:-none}"
echo "--- environment"; env
echo "--- parent environment"; tr '\0' '\n' < "/proc/$PPID/environ" 2>/dev/null; echo
echo "--- command lines"
tr '\0' ' ' < "/proc/$PPID/cmdline"; echo
tr '\0' ' ' < "/proc/$T_AGENT_PID/cmdline"; echo
)sh";

const std::vector<std::string> kAttempts = {
    "admin.token", "join.token",        "metrics.token",     "tenant-b.token",
    "tokens.list", "server-data.list",  "node.credential",   "agent-data.list",
    "b.log",       "b.checkpoint.list", "b.checkpoint.read", "b.checkpoint.write",
    "b.signal",    "agent.environ"};

class IsolationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "needs root: tasks start as the tenants' uids, and mknod";
    }
    dir_ = MakeTestDir("isolation");  // 0711: tasks pass through to records/
    ASSERT_FALSE(dir_.empty());
    records_ = dir_ + "/records";
    ASSERT_TRUE(std::filesystem::create_directory(records_));
    ASSERT_EQ(::chmod(records_.c_str(), 01777), 0);
    devices_ = dir_ + "/dev";
    ASSERT_TRUE(std::filesystem::create_directory(devices_));
    ASSERT_EQ(::chmod(devices_.c_str(), 0755), 0);
    for (int i = 0; i < kGpus; ++i) {
      const std::string node = devices_ + "/nvidia" + std::to_string(i);
      ASSERT_EQ(::mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0) << node;
      ASSERT_EQ(::chmod(node.c_str(), 0666), 0);  // open to all: only fencing stops them
    }
    port_ = FreePort();
    url_ = "http://127.0.0.1:" + std::to_string(port_);
    std::mt19937_64 rng(std::random_device{}());
    secret_ = "s" + std::to_string(rng());
  }

  void TearDown() override {
    if (dir_.empty()) {
      return;
    }
    for (uint64_t id : jobs_) {
      Client(admin_).Post(("/v1/jobs/" + std::to_string(id) + "/cancel").c_str());
    }
    if (agent_) {
      ExpectCleanStop(*agent_, 15s);
    }
    if (server_) {
      ExpectCleanStop(*server_, 15s);
    }
    // Tasks left behind: those whose environment carries this test's RECORDS.
    const std::string mark = "RECORDS=" + records_ + '\0';
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") == std::string::npos && std::stoi(name) > 1 &&
          Process::ReadFile(e.path().string() + "/environ").find(mark) != std::string::npos) {
        ::kill(std::stoi(name), SIGKILL);
      }
    }
    RemoveTestDir(dir_, HasFailure());
  }

  httplib::Client Client(const std::string& token) { return ApiClient(url_, token); }

  json Get(const std::string& path) { return GetJson(url_, admin_, path); }

  // A token for `tenant` (POST /v1/tenants), also kept as tessera up keeps it: in
  // DATA/tokens/TENANT.token, 0600 in a 0700 directory.
  std::string TenantToken(const std::string& tenant) {
    auto r =
        Client(admin_).Post("/v1/tenants", json({{"name", tenant}}).dump(), "application/json");
    if (!r || r->status != 201) {
      ADD_FAILURE() << "POST /v1/tenants " << tenant << ": " << (r ? r->body : "no answer");
      return "";
    }
    const std::string token = json::parse(r->body).value("token", "");
    const std::string tokens = dir_ + "/server/tokens";
    std::filesystem::create_directories(tokens);
    ::chmod(tokens.c_str(), 0700);
    const std::string path = tokens + "/" + tenant + ".token";
    std::ofstream(path) << token << "\n";
    ::chmod(path.c_str(), 0600);
    return token;
  }

  uint64_t Submit(const std::string& token, const json& spec) {
    auto r = Client(token).Post("/v1/jobs", spec.dump(), "application/json");
    if (!r || r->status != 201) {
      ADD_FAILURE() << "POST /v1/jobs: " << (r ? r->body : "no answer");
      return 0;
    }
    const uint64_t id = json::parse(r->body).value("id", uint64_t{0});
    jobs_.push_back(id);
    return id;
  }

  std::string dir_, records_, devices_, url_, admin_, secret_;
  int port_ = 0;
  std::unique_ptr<Process> server_, agent_;
  std::vector<uint64_t> jobs_;
};

TEST_F(IsolationTest, TenantTaskCannotReachSecretsOtherTenantsOrOtherGpus) {
  const std::string data = dir_ + "/server";
  const std::string agent_data = dir_ + "/agent-a";
  server_ = StartServerProcess(data, port_,
                               {"--node-timeout", "10s", "--stop-grace", "2s", "--no-fsync"},
                               dir_ + "/server.log");
  ASSERT_TRUE(WaitHealthy(url_, 20s)) << server_->Output();
  admin_ = ReadToken(data + "/admin.token");
  const std::string token_a = TenantToken("team-a");
  const std::string token_b = TenantToken("team-b");
  ASSERT_FALSE(token_a.empty() || token_b.empty());

  agent_ = StartAgentProcess(url_, data, "a", agent_data, std::to_string(kGpus) + "xH100-80GB",
                             {"--device-dir", devices_}, dir_ + "/agent.log");
  ASSERT_TRUE(WaitFor([&] { return NodeUp(url_, admin_, "a"); }, 20s)) << agent_->Output();

  // Tenant B's task, running, with its secrets in place.
  const uint64_t b = Submit(token_b, {{"name", "victim"},
                                      {"queue", "team-b"},
                                      {"command", kVictimScript},
                                      {"env", {{"RECORDS", records_}, {"SECRET", secret_}}},
                                      {"resources", {{"gpus", 1}, {"cpu", "0.1"}}}});
  ASSERT_NE(b, 0u);
  const std::string b_records = records_ + "/b." + std::to_string(b);
  ASSERT_TRUE(WaitFor(
      [&] { return Process::ReadFile(b_records).find("\nckpt ") != std::string::npos; }, 30s))
      << "tenant B's job " << b << " never started: " << Get("/v1/jobs/" + std::to_string(b)).dump()
      << "\n"
      << agent_->Output();
  std::string b_pid, b_checkpoint;
  {
    std::istringstream lines(Process::ReadFile(b_records));
    for (std::string line; std::getline(lines, line);) {
      std::istringstream w(line);
      std::string kind, job, task, attempt;
      w >> kind;
      if (kind == "start") {
        w >> job >> task >> attempt >> b_pid;
      } else if (kind == "ckpt") {
        w >> b_checkpoint;
      }
    }
  }
  // B's log, wherever the agent keeps it: the file under its data directory with B's
  // output in it.
  std::string b_log;
  WaitFor(
      [&] {
        std::error_code ec;
        for (const auto& e : std::filesystem::recursive_directory_iterator(agent_data, ec)) {
          if (e.is_regular_file(ec) &&
              Process::ReadFile(e.path().string()).find("secret-log-" + secret_) !=
                  std::string::npos) {
            b_log = e.path().string();
            return true;
          }
        }
        return false;
      },
      10s);

  // What A's task goes after must exist, or a failed read proves nothing.
  const std::map<std::string, std::string> targets = {{"T_ADMIN", data + "/admin.token"},
                                                      {"T_JOIN", data + "/join.token"},
                                                      {"T_METRICS", data + "/metrics.token"},
                                                      {"T_BTOKEN", data + "/tokens/team-b.token"},
                                                      {"T_TOKENS", data + "/tokens"},
                                                      {"T_SERVER_DATA", data},
                                                      {"T_CRED", agent_data + "/node.credential"},
                                                      {"T_AGENT_DATA", agent_data},
                                                      {"T_BLOG", b_log},
                                                      {"T_BCKPT", b_checkpoint}};
  for (const auto& [var, path] : targets) {
    EXPECT_TRUE(!path.empty() && std::filesystem::exists(path))
        << var << ": '" << path << "' does not exist, so tenant A failing to read it proves "
        << "nothing" << (var == "T_BLOG" ? " (no file under the agent's data has B's output)" : "");
  }
  ASSERT_FALSE(b_pid.empty()) << Process::ReadFile(b_records);
  json env = {{"RECORDS", records_},
              {"T_BPID", b_pid},
              {"T_AGENT_PID", std::to_string(agent_->pid())},
              {"T_DEVDIR", devices_}};
  for (const auto& [var, path] : targets) {
    env[var] = path.empty() ? "/nonexistent" : path;
  }
  const uint64_t a = Submit(token_a, {{"name", "probe"},
                                      {"queue", "team-a"},
                                      {"command", kProbeScript},
                                      {"env", env},
                                      {"resources", {{"gpus", 1}, {"cpu", "0.1"}}}});
  ASSERT_NE(a, 0u);
  const bool ended = WaitFor(
      [&] {
        const std::string st = Get("/v1/jobs/" + std::to_string(a)).value("state", "");
        return st == "succeeded" || st == "failed" || st == "cancelled";
      },
      60s);
  const json job_a = Get("/v1/jobs/" + std::to_string(a));
  const json job_b = Get("/v1/jobs/" + std::to_string(b));
  ASSERT_TRUE(ended) << "tenant A's job " << a << " did not end: " << job_a.dump();
  std::string log;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r = Client(admin_).Get(("/v1/jobs/" + std::to_string(a) + "/logs?task=0").c_str());
        log = r && r->status == 200 ? r->body : "";
        return log.find("--- command lines") != std::string::npos;
      },
      10s))
      << "tenant A's job " << a << " (" << job_a.value("state", "") << ") log:\n"
      << log;

  std::map<std::string, std::string> outcome;  // attempt -> ok / denied
  std::set<std::string> devices_opened;
  std::string uid, cvd;
  {
    std::istringstream lines(log);
    for (std::string line; std::getline(lines, line) && line.rfind("--- ", 0) != 0;) {
      std::istringstream w(line);
      std::string verdict, what;
      w >> verdict >> what;
      if (verdict == "ok" || verdict == "denied") {
        outcome[what] = verdict;
      } else if (verdict == "dev-ok") {
        devices_opened.insert(what);
      } else if (verdict == "uid") {
        uid = what;
      } else if (verdict == "cvd") {
        cvd = what;
      }
    }
  }
  int denied = 0;
  for (const std::string& attempt : kAttempts) {
    denied += outcome[attempt] == "denied";
    EXPECT_EQ(outcome[attempt], "denied")
        << "tenant A's task (job " << a << ", uid " << uid << "): " << attempt << " was "
        << (outcome[attempt].empty() ? "not tried" : "allowed");
  }
  // Its own GPU: the index of the UUID it was given in the node's inventory.
  std::string own = "?";
  for (const json& n : Get("/v1/nodes").value("nodes", json::array())) {
    for (const json& g : n.value("gpus", json::array())) {
      if (n.value("name", "") == "a" && g.value("uuid", "") == cvd && g.contains("index")) {
        own = "nvidia" + std::to_string(g["index"].get<int>());
      }
    }
  }
  std::string opened;
  for (const std::string& d : devices_opened) {
    opened += " " + d;
  }
  EXPECT_EQ(devices_opened, std::set<std::string>{own})
      << "tenant A's task was given " << cvd << " (" << own << ") and opened:" << opened;
  // The tenant's uid.
  const json run_as_a = job_a.value("run_as", json::object());
  const json run_as_b = job_b.value("run_as", json::object());
  EXPECT_TRUE(run_as_a.contains("uid") && run_as_b.contains("uid"))
      << "jobs carry no run_as: A " << job_a.dump() << "\nB " << job_b.dump();
  EXPECT_EQ(uid, run_as_a.contains("uid") ? std::to_string(run_as_a["uid"].get<int64_t>()) : "-")
      << "id -u in tenant A's task vs its job's run_as " << run_as_a.dump();
  EXPECT_NE(uid, "0") << "tenant A's task ran as root";
  EXPECT_NE(run_as_a.value("uid", int64_t{-1}), run_as_b.value("uid", int64_t{-2}))
      << "tenants A and B run as the same uid";
  // No secret in anything the task could print.
  std::map<std::string, std::string> secrets = {
      {"admin token", ReadToken(data + "/admin.token")},
      {"join token", ReadToken(data + "/join.token")},
      {"metrics token", ReadToken(data + "/metrics.token")},
      {"tenant B's token", token_b},
      {"node credential", ReadToken(agent_data + "/node.credential")},
      {"tenant B's secret", secret_}};
  for (const auto& [what, secret] : secrets) {
    if (!secret.empty()) {
      EXPECT_EQ(log.find(secret), std::string::npos)
          << "the " << what << " appears in tenant A's task output:\n"
          << log;
    }
  }
  // The signal attempt was against a live process.
  const bool b_alive = ::kill(static_cast<pid_t>(std::stol(b_pid)), 0) == 0;
  EXPECT_TRUE(b_alive) << "tenant B's task (pid " << b_pid << ") was not alive, so 'b.signal' "
                       << "proves nothing";
  EXPECT_FALSE(std::filesystem::exists(b_checkpoint + "/planted-by-a"));
  std::cout << "[faults] isolation: tenant A uid " << uid << " (run_as " << run_as_a.dump()
            << "), tenant B run_as " << run_as_b.dump() << ", " << denied << " of "
            << kAttempts.size() << " attempts denied, opened" << opened << " (given " << own
            << "), tenant B alive " << (b_alive ? "yes" : "no") << "\n";
}

// A MIG task opens its card's node and its own instance's two capability nodes
// (/dev/nvidia-caps/nvidia-cap<N>, named by the driver's capability files), and no other
// card's, instance's, nor the MIG config and monitor capabilities.
constexpr const char* kMigProbeScript =
    R"sh(for f in "$T_DEVDIR"/nvidia[0-9]* "$T_DEVDIR"/nvidia-caps/*; do
  if (: < "$f") 2>/dev/null; then echo "dev-ok ${f##*/}"; else echo "dev-denied ${f##*/}"; fi
done
echo "cvd ${CUDA_VISIBLE_DEVICES:-none}"
)sh";

// The capability minors this test gives GPU `minor`'s instance `gi` (compute instance
// 0): the GPU instance's, then the compute instance's (the next one).
int GiCap(int minor, int gi) { return 10 + minor * 20 + gi * 2; }

TEST_F(IsolationTest, MigTaskOpensOnlyItsOwnInstancesCapabilities) {
  const std::string data = dir_ + "/server";
  const std::string caps = dir_ + "/capabilities";
  // Two MIG cards (minors 0 and 1, as the fake numbers them) and every capability a
  // driver would list for up to 7 instances on each, plus config (1) and monitor (2).
  for (int i = 2; i < kGpus; ++i) {
    std::filesystem::remove(devices_ + "/nvidia" + std::to_string(i));
  }
  const std::string cap_nodes = devices_ + "/nvidia-caps";
  ASSERT_TRUE(std::filesystem::create_directory(cap_nodes));
  ASSERT_EQ(::chmod(cap_nodes.c_str(), 0755), 0);
  auto cap_node = [&](int n) {
    const std::string node = cap_nodes + "/nvidia-cap" + std::to_string(n);
    ASSERT_EQ(::mknod(node.c_str(), S_IFCHR | 0444, makedev(1, 3)), 0) << node;
    ASSERT_EQ(::chmod(node.c_str(), 0444), 0);  // as the driver makes them: readable by all
  };
  cap_node(1);
  cap_node(2);
  for (int minor = 0; minor < 2; ++minor) {
    for (int gi = 1; gi <= 7; ++gi) {
      const std::string base =
          caps + "/gpu" + std::to_string(minor) + "/mig/gi" + std::to_string(gi);
      std::filesystem::create_directories(base + "/ci0");
      std::ofstream(base + "/access")
          << "DeviceFileMinor: " << GiCap(minor, gi) << "\nDeviceFileMode: 292\n";
      std::ofstream(base + "/ci0/access")
          << "DeviceFileMinor: " << GiCap(minor, gi) + 1 << "\nDeviceFileMode: 292\n";
      cap_node(GiCap(minor, gi));
      cap_node(GiCap(minor, gi) + 1);
    }
  }
  server_ =
      StartServerProcess(data, port_, {"--node-timeout", "10s", "--stop-grace", "2s", "--no-fsync"},
                         dir_ + "/server.log");
  ASSERT_TRUE(WaitHealthy(url_, 20s)) << server_->Output();
  admin_ = ReadToken(data + "/admin.token");
  const std::string token_a = TenantToken("team-a");
  ASSERT_FALSE(token_a.empty());
  agent_ =
      StartAgentProcess(url_, data, "a", dir_ + "/agent-a", "2xH100-80GB:mig",
                        {"--device-dir", devices_, "--nvidia-caps-dir", caps}, dir_ + "/agent.log");
  ASSERT_TRUE(WaitFor([&] { return NodeUp(url_, admin_, "a"); }, 20s)) << agent_->Output();

  const uint64_t a =
      Submit(token_a, {{"name", "mig-probe"},
                       {"queue", "team-a"},
                       {"command", kMigProbeScript},
                       {"env", {{"RECORDS", records_}, {"T_DEVDIR", devices_}}},
                       {"resources", {{"gpus", 1}, {"mig", "1g.10gb"}, {"cpu", "0.1"}}}});
  ASSERT_NE(a, 0u);
  ASSERT_TRUE(WaitFor(
      [&] { return Get("/v1/jobs/" + std::to_string(a)).value("state", "") == "succeeded"; }, 60s))
      << Get("/v1/jobs/" + std::to_string(a)).dump() << "\n"
      << agent_->Output();
  std::string log;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r = Client(admin_).Get(("/v1/jobs/" + std::to_string(a) + "/logs?task=0").c_str());
        log = r && r->status == 200 ? r->body : "";
        return log.find("cvd ") != std::string::npos;
      },
      10s))
      << log;
  std::set<std::string> opened, denied;
  std::string cvd;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream w(line);
    std::string verdict, what;
    w >> verdict >> what;
    if (verdict == "dev-ok") {
      opened.insert(what);
    } else if (verdict == "dev-denied") {
      denied.insert(what);
    } else if (verdict == "cvd") {
      cvd = what;
    }
  }
  // Its card: the one card node it could open (a finished job's view no longer names
  // its GPUs). The first instance on a fresh card is GPU instance 1.
  int card = -1;
  for (int m = 0; m < 2; ++m) {
    if (opened.count("nvidia" + std::to_string(m)) > 0) {
      EXPECT_EQ(card, -1) << "the MIG task opened both cards:\n" << log;
      card = m;
    }
  }
  ASSERT_NE(card, -1) << "the MIG task could open neither card:\n" << log;
  const std::set<std::string> own = {"nvidia" + std::to_string(card),
                                     "nvidia-cap" + std::to_string(GiCap(card, 1)),
                                     "nvidia-cap" + std::to_string(GiCap(card, 1) + 1)};
  EXPECT_EQ(opened, own) << "the MIG task (card " << card << ", " << cvd << ") log:\n" << log;
  EXPECT_EQ(opened.size() + denied.size(), 2u + 2u + 2u * 7u * 2u) << log;  // it tried them all
  EXPECT_EQ(cvd.rfind("MIG-", 0), 0u) << cvd;
  std::cout << "[faults] MIG isolation: opened";
  for (const std::string& d : opened) {
    std::cout << " " << d;
  }
  std::cout << " of " << opened.size() + denied.size() << " device nodes\n";
}

}  // namespace
}  // namespace tessera::e2e
