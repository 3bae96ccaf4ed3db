// Jobs in container images, end to end (issue 39): a real `tessera server`, root
// `tessera agent`s with --containers on (Podman with runc), Debian's docker-registry on
// loopback, and an image the test builds itself (busybox-static and an os-release of its
// own, imported and pushed with Podman). Fake GPUs are character devices the test makes
// (1:3, which behave as /dev/null) under the agents' --device-dir.
//
//  - a job with `image:` runs in it (the image's /etc/os-release, not the host's), as
//    its tenant's uid (the one its bare jobs get), sees exactly its own GPU's device
//    node, reads a read-only mount and cannot write it, cannot see the host's files (the
//    controller's tokens), another tenant's checkpoint or job directory, or signal its
//    process, and its exit code reaches the job;
//  - an XID 79 on its GPU stops it with the preemption marker and SIGTERM (which reach
//    the command in the container); it checkpoints, and the next attempt, on the other
//    GPU, reads the checkpoint;
//  - a MIG task in the image gets its card's and its instance's capability nodes only;
//  - a 2-task gang over two agents runs each task in the image;
//  - a Slurm script with pyxis's --container-image runs in the image;
//  - a missing image fails the job with "image not found" and is not retried;
//  - two jobs of one image download it once; past the cache's bound the least recently
//    used image is removed;
//  - an agent killed (-9) while a container runs adopts it on restart: it runs once, is
//    reported once, and its GPUs are not given to another job meanwhile (faults suite).
// Needs root (containers are rootful, tasks run as tenants' uids, mknod); skipped
// otherwise. Needs podman, runc, docker-registry and busybox-static (scripts/setup.sh).
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "e2e/cluster_fixture.h"
#include "e2e/process.h"

#ifndef TESSERA_FAKE_MPS_CONTROL
#error "TESSERA_FAKE_MPS_CONTROL must name the fake nvidia-cuda-mps-control (set by CMake)"
#endif

namespace tessera::e2e {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr int kGpusPerAgent = 2;

// Whether `program` is on PATH.
bool OnPath(const std::string& program) {
  return std::system(("command -v " + program + " >/dev/null 2>&1").c_str()) == 0;
}

// Runs a shell command line; its output in *out. True when it exited 0.
bool Shell(const std::string& line, std::string* out = nullptr) {
  std::string text;
  FILE* p = ::popen((line + " 2>&1").c_str(), "r");
  if (p == nullptr) {
    return false;
  }
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) {
    text.append(buf, n);
  }
  const int rc = ::pclose(p);
  if (out != nullptr) {
    *out = text;
  }
  return rc == 0;
}

// Every mount point under `dir` (the agents' container storage), deepest first.
std::vector<std::string> MountsUnder(const std::string& dir) {
  std::vector<std::string> out;
  std::istringstream in(Process::ReadFile("/proc/self/mountinfo"));
  for (std::string line; std::getline(in, line);) {
    std::istringstream w(line);
    std::string id, parent, devno, root, point;
    w >> id >> parent >> devno >> root >> point;
    if (point.rfind(dir + "/", 0) == 0) {
      out.push_back(point);
    }
  }
  std::sort(out.rbegin(), out.rend());
  return out;
}

class ContainerTest : public ServerAndAgentsTest {
 protected:
  std::string Prefix() const override { return "container"; }

  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "needs root: containers are rootful, tasks run as tenants' uids, mknod";
    }
    for (const char* tool : {"podman", "runc", "docker-registry", "busybox", "bash-static"}) {
      ASSERT_TRUE(OnPath(tool)) << tool << " is missing: run scripts/setup.sh";
    }
    ServerAndAgentsTest::SetUp();
    if (HasFatalFailure()) {
      return;
    }
    shared_ = dir_ + "/shared";
    ASSERT_TRUE(std::filesystem::create_directories(shared_ + "/records"));
    ASSERT_EQ(::chmod(shared_.c_str(), 0755), 0);
    ASSERT_EQ(::chmod((shared_ + "/records").c_str(), 01777), 0);
    std::ofstream(shared_ + "/input") << "input-data\n";
    ::chmod((shared_ + "/input").c_str(), 0644);
    devices_ = dir_ + "/dev";
    ASSERT_TRUE(std::filesystem::create_directory(devices_));
    ASSERT_EQ(::chmod(devices_.c_str(), 0755), 0);
    for (int i = 0; i < kGpusPerAgent; ++i) {
      const std::string node = devices_ + "/nvidia" + std::to_string(i);
      ASSERT_EQ(::mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0) << node;
      ASSERT_EQ(::chmod(node.c_str(), 0666), 0);
    }
    registry_ = StartRegistry("registry", "");
    ASSERT_FALSE(HasFailure());
    image_ = registry_ + "/test/tt:1";
    BuildAndPushImage(image_);
  }

  void TearDown() override {
    if (dir_.empty()) {
      return;  // skipped
    }
    StopAgentsThenServer(agents_, server_);
    agents_.clear();
    for (auto& registry : registries_) {
      registry->Signal(SIGTERM);
      registry->Wait(5s);
    }
    for (const auto& [name, unused] : nodes_) {
      std::filesystem::remove("/var/run/cdi/tessera-" + name + ".json");
    }
    // Podman's storage under the agents' data directories: nothing may stay mounted.
    for (const std::string& point : MountsUnder(dir_)) {
      ::umount2(point.c_str(), MNT_DETACH);
    }
    ServerAndAgentsTest::TearDown();
  }

  // A docker-registry on loopback, DIR/NAME for its data and NAME.log for its log; with
  // `htpasswd` (a file) it asks for credentials. Its host:port.
  std::string StartRegistry(const std::string& name, const std::string& htpasswd) {
    const std::string addr = "127.0.0.1:" + std::to_string(FreePort());
    const std::string config = dir_ + "/" + name + ".yml";
    std::ofstream(config) << "version: 0.1\nlog: {level: warn}\nstorage:\n  filesystem:\n"
                          << "    rootdirectory: " << dir_ << "/" << name
                          << "\nhttp:\n  addr: " << addr << "\n"
                          << (htpasswd.empty() ? ""
                                               : "auth:\n  htpasswd:\n    realm: tessera\n"
                                                 "    path: " +
                                                     htpasswd + "\n");
    registries_.push_back(std::make_unique<Process>(
        std::vector<std::string>{Which("docker-registry"), "serve", config},
        dir_ + "/" + name + ".log"));
    const bool up = WaitFor(
        [&] {
          httplib::Client c("http://" + addr);
          auto r = c.Get("/v2/");
          return r && (r->status == 200 || r->status == 401);
        },
        15s);
    EXPECT_TRUE(up) << registries_.back()->Output();
    return addr;
  }

  // The test image (scripts/test-image.sh: busybox, bash and an os-release of its own),
  // pushed as `ref`.
  void BuildAndPushImage(const std::string& ref) {
    std::string out;
    ASSERT_TRUE(Shell(
        std::string(TESSERA_SOURCE_DIR) + "/scripts/test-image.sh " + ref + " " + dir_ + "/image",
        &out))
        << out;
  }

  static std::string Which(const std::string& program) {
    std::string out;
    Shell("command -v " + program, &out);
    return Trim(out);
  }

  void StartContainerAgent(const std::string& name) {
    nodes_[name] = true;
    StartAgent(name, std::to_string(kGpusPerAgent) + "xH100-80GB",
               {"--containers", "on", "--device-dir", devices_, "--insecure-registry", registry_,
                "--container-mount-prefix", shared_, "--telemetry-interval", "100ms"});
  }

  std::string TenantToken(const std::string& tenant) {
    auto r = ApiClient(url_, admin_)
                 .Post("/v1/tenants", json({{"name", tenant}}).dump(), "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
    return r ? json::parse(r->body).value("token", "") : "";
  }

  uint64_t Submit(const std::string& token, const json& spec) {
    auto r = ApiClient(url_, token).Post("/v1/jobs", spec.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
    if (!r || r->status != 201) {
      return 0;
    }
    return json::parse(r->body).value("id", uint64_t{0});
  }

  std::string Log(uint64_t id, int task = 0) {
    auto r =
        ApiClient(url_, admin_)
            .Get(("/v1/jobs/" + std::to_string(id) + "/logs?task=" + std::to_string(task)).c_str());
    return r && r->status == 200 ? r->body : "";
  }

  json WaitEnded(uint64_t id, std::chrono::milliseconds timeout) {
    json job;
    WaitFor(
        [&] {
          job = Job(id);
          const std::string s = job.value("state", "");
          return s == "succeeded" || s == "failed" || s == "cancelled";
        },
        timeout);
    return job;
  }

  std::string Records(const std::string& name) {
    return Process::ReadFile(shared_ + "/records/" + name);
  }

  std::string shared_, devices_, registry_, image_;
  std::vector<std::unique_ptr<Process>> registries_;
  std::map<std::string, bool> nodes_;
};

// What a task sees: its os-release, uid, device nodes, mounts, and the host's files.
constexpr const char* kProbe = R"sh(cat /etc/os-release
echo "uid $(id -u)"
for f in /dev/nvidia*; do echo "dev ${f##*/}"; done
echo "cvd $CUDA_VISIBLE_DEVICES"
echo "input $(cat /in/input)"
if touch /rec/planted 2>/dev/null; then echo "mount writable"; else echo "mount read-only"; fi
if cat "$CUDA_MPS_LOG_DIRECTORY/peek" >/dev/null 2>&1; then echo "closed readable"; else echo "closed hidden"; fi
if cat "$ADMIN_TOKEN" >/dev/null 2>&1; then echo "token readable"; else echo "token hidden"; fi
if [ -e /etc/debian_version ]; then echo "host etc"; else echo "image etc"; fi
echo "agent data: $(ls "$AGENT_DATA" | tr '\n' ' ')"
echo "home $HOME"
if cat "$B_CKPT/secret" >/dev/null 2>&1; then echo "b checkpoint readable"; else echo "b checkpoint hidden"; fi
if ls "$B_JOB_DIR" >/dev/null 2>&1; then echo "b job dir visible"; else echo "b job dir hidden"; fi
if kill -0 "$B_PID" 2>/dev/null; then echo "b signalled"; else echo "b not signalled"; fi
exit 7
)sh";

// Tenant B: a bare task with a secret in its checkpoint directory, which records its pid,
// checkpoint directory and job directory, then waits.
constexpr const char* kVictim = R"sh(echo "$SECRET" > "$TESSERA_CHECKPOINT_DIR/secret"
echo "$$ $TESSERA_CHECKPOINT_DIR $PWD" > "$RECORDS/b"
sleep 60 & wait $!
)sh";

TEST_F(ContainerTest, AJobInAnImageRunsInItAsItsTenantWithOnlyItsGpu) {
  StartContainerAgent("n1");
  const std::string token = TenantToken("team-a");
  // Tenant B runs beside it, with a secret.
  const uint64_t victim = Submit(
      TenantToken("team-b"), {{"name", "victim"},
                              {"queue", "team-b"},
                              {"command", kVictim},
                              {"env", {{"RECORDS", shared_ + "/records"}, {"SECRET", "s3cr3t"}}},
                              {"resources", {{"cpu", "0.1"}}}});
  ASSERT_TRUE(WaitFor([&] { return !Records("b").empty(); }, 30s)) << Job(victim).dump();
  std::istringstream b_line(Records("b"));
  std::string b_pid, b_ckpt, b_dir;
  b_line >> b_pid >> b_ckpt >> b_dir;
  const std::string closed = dir_ + "/closed";  // 0700: nobody but root goes in
  ASSERT_TRUE(std::filesystem::create_directories(closed + "/open"));
  ASSERT_EQ(::chmod(closed.c_str(), 0700), 0);
  std::ofstream(closed + "/open/peek") << "peek\n";
  ::chmod((closed + "/open/peek").c_str(), 0644);
  ASSERT_EQ(Trim(Process::ReadFile(b_ckpt + "/secret")), "s3cr3t") << Records("b");
  ASSERT_FALSE(b_dir.empty());
  ASSERT_EQ(::kill(std::stoi(b_pid), 0), 0) << b_pid;  // B runs while A looks
  const uint64_t bare = Submit(token, {{"name", "bare"},
                                       {"queue", "team-a"},
                                       {"command", "id -u"},
                                       {"resources", {{"cpu", "0.1"}}}});
  const uint64_t id =
      Submit(token, {{"name", "in-image"},
                     {"queue", "team-a"},
                     {"image", image_},
                     // records/ is open to all (01777): only the
                     // mount keeps the task from writing there.
                     {"container", {{"mounts", {shared_ + ":/in", shared_ + "/records:/rec:ro"}}}},
                     {"command", {"sh", "-c", kProbe}},
                     {"env",
                      {{"ADMIN_TOKEN", dir_ + "/server/admin.token"},
                       {"AGENT_DATA", dir_ + "/agent-n1"},
                       {"B_CKPT", b_ckpt},
                       {"B_JOB_DIR", b_dir},
                       {"B_PID", b_pid},
                       // A host path in the job's environment that the agent's own share
                       // variables use: it must not become a mount (it lies inside a
                       // directory closed to all).
                       {"CUDA_MPS_LOG_DIRECTORY", closed + "/open"}}},
                     {"resources", {{"gpus", 1}, {"cpu", "0.1"}}}});
  ASSERT_NE(id, 0u);
  const json job = WaitEnded(id, 60s);
  ASSERT_EQ(job.value("state", ""), "failed") << job.dump() << "\n" << agents_["n1"]->Output();
  EXPECT_EQ(job["exit_code"], 7);  // the container's exit code is the job's
  const std::string log = Log(id);
  EXPECT_NE(log.find("NAME=\"Tessera test image\""), std::string::npos) << log;
  EXPECT_EQ(log.find("Debian"), std::string::npos) << log;
  // Exactly its own GPU's node; CUDA_VISIBLE_DEVICES names that GPU.
  const int gpu = job["attempt_history"][0]["tasks"][0]["gpus"][0].value("index", -1);
  const std::string uuid = job["attempt_history"][0]["tasks"][0]["gpus"][0].value("uuid", "");
  EXPECT_NE(log.find("dev nvidia" + std::to_string(gpu) + "\n"), std::string::npos) << log;
  EXPECT_EQ(log.find("dev nvidia" + std::to_string(1 - gpu) + "\n"), std::string::npos) << log;
  EXPECT_NE(log.find("cvd " + uuid + "\n"), std::string::npos) << log;
  EXPECT_NE(log.find("input input-data"), std::string::npos) << log;
  EXPECT_NE(log.find("mount read-only"), std::string::npos) << log;
  EXPECT_FALSE(std::filesystem::exists(shared_ + "/records/planted"));
  EXPECT_NE(log.find("closed hidden"), std::string::npos) << log;
  // The host's files are not there: only the directories mounted for the job are, at
  // their host paths (so the agent's data directory shows its jobs/ and nothing else).
  EXPECT_NE(log.find("token hidden"), std::string::npos) << log;
  EXPECT_NE(log.find("image etc"), std::string::npos) << log;
  EXPECT_NE(log.find("agent data: jobs \n"), std::string::npos) << log;
  // Nothing of tenant B: its checkpoint, its job directory, its process.
  EXPECT_NE(log.find("b checkpoint hidden"), std::string::npos) << log;
  EXPECT_NE(log.find("b job dir hidden"), std::string::npos) << log;
  EXPECT_NE(log.find("b not signalled"), std::string::npos) << log;
  ApiClient(url_, admin_).Post(("/v1/jobs/" + std::to_string(victim) + "/cancel").c_str());
  EXPECT_EQ(WaitEnded(victim, 30s).value("state", ""), "cancelled");
  // The tenant's uid: the one its bare job ran as, not root.
  ASSERT_EQ(WaitEnded(bare, 30s).value("state", ""), "succeeded");
  const std::string bare_uid = Trim(Log(bare));
  EXPECT_NE(bare_uid, "0");
  EXPECT_NE(log.find("uid " + bare_uid + "\n"), std::string::npos) << log << " vs " << bare_uid;
}

// Records each attempt's start (and what it resumed from) into the shared records; on
// SIGTERM records the preemption marker's reason, reports a checkpoint and exits.
constexpr const char* kCheckpointing = R"sh(d="$TESSERA_CHECKPOINT_DIR"
echo "run $TESSERA_ATTEMPT $CUDA_VISIBLE_DEVICES" >> /in/records/runs
if [ -f "$d/state" ]; then echo "resumed $(cat "$d/state")" >> /in/records/runs; fi
echo "step-$TESSERA_ATTEMPT" > "$d/state"
on_term() {
  { read deadline; read reason; } < "$d/.tessera/preempt"
  echo "term $reason" >> /in/records/runs
  mkdir -p "$d/.tessera"; touch "$d/.tessera/checkpointed"; exit 143
}
trap on_term TERM
i=0
while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
)sh";

TEST_F(ContainerTest, AGpuFaultStopsTheContainerWithTheMarkerAndTheNextAttemptResumes) {
  StartContainerAgent("n1");
  const std::string token = TenantToken("team-a");
  const uint64_t id = Submit(token, {{"name", "resumes"},
                                     {"queue", "team-a"},
                                     {"image", image_},
                                     {"container", {{"mounts", {shared_ + ":/in:rw"}}}},
                                     {"command", {"sh", "-c", kCheckpointing}},
                                     {"checkpoint", {{"on_signal", true}}},
                                     {"resources", {{"gpus", 1}, {"cpu", "0.1"}}}});
  ASSERT_NE(id, 0u);
  int gpu = -1;
  ASSERT_TRUE(WaitFor(
      [&] {
        const json job = Job(id);
        gpu = job["tasks"][0]["gpus"].empty() ? -1 : job["tasks"][0]["gpus"][0].value("index", -1);
        return job.value("state", "") == "running" && gpu >= 0 && !Records("runs").empty();
      },
      60s))
      << Job(id).dump() << "\n"
      << agents_["n1"]->Output();
  std::this_thread::sleep_for(300ms);  // a healthy telemetry sample first
  std::ofstream(dir_ + "/agent-n1/fake-faults", std::ios::app)
      << "{\"gpu\":" << gpu << ",\"xid\":79}\n";
  json job;
  ASSERT_TRUE(WaitFor(
      [&] {
        job = Job(id);
        return job.value("attempts", 0) == 2 && job.value("state", "") == "running" &&
               Records("runs").find("resumed") != std::string::npos;
      },
      60s))
      << job.dump() << "\n"
      << Records("runs") << "\n"
      << agents_["n1"]->Output();
  const std::string runs = Records("runs");
  // SIGTERM reached the command in the container, after the marker was written.
  EXPECT_NE(runs.find("term "), std::string::npos) << runs;
  EXPECT_NE(runs.find("resumed step-1"), std::string::npos) << runs;
  EXPECT_EQ(job["attempt_history"][0]["ended"], "gpu-fault") << job.dump();
  EXPECT_NE(job["tasks"][0]["gpus"][0].value("index", -1), gpu);
  ApiClient(url_, admin_).Post(("/v1/jobs/" + std::to_string(id) + "/cancel").c_str());
  EXPECT_EQ(WaitEnded(id, 30s).value("state", ""), "cancelled");
}

TEST_F(ContainerTest, AGangOnTwoAgentsRunsEachTaskInTheImage) {
  StartContainerAgent("n1");
  StartContainerAgent("n2");
  const std::string token = TenantToken("team-a");
  const uint64_t id =
      Submit(token, {{"name", "gang"},
                     {"queue", "team-a"},
                     {"image", image_},
                     {"replicas", 2},
                     {"topology", {{"scope", "any"}}},
                     {"command",
                      {"sh", "-c",
                       "grep NAME= /etc/os-release; echo \"rank $RANK of $WORLD_SIZE\"; "
                       "for f in /dev/nvidia*; do echo \"dev ${f##*/}\"; done"}},
                     {"resources", {{"gpus", 2}, {"cpu", "0.1"}}}});
  ASSERT_NE(id, 0u);
  const json job = WaitEnded(id, 60s);
  ASSERT_EQ(job.value("state", ""), "succeeded") << job.dump();
  std::set<std::string> nodes;
  for (const json& t : job["attempt_history"][0]["tasks"]) {
    nodes.insert(t.value("node", ""));
  }
  EXPECT_EQ(nodes.size(), 2u) << "one task per node: " << job.dump();
  for (int task = 0; task < 2; ++task) {
    const std::string log = Log(id, task);
    EXPECT_NE(log.find("NAME=\"Tessera test image\""), std::string::npos) << log;
    EXPECT_NE(log.find("rank " + std::to_string(task) + " of 2"), std::string::npos) << log;
    EXPECT_NE(log.find("dev nvidia0\ndev nvidia1\n"), std::string::npos) << log;
  }
}

// A node that runs no containers gets no job with an image; with none that runs them,
// such a job is refused as one that never fits.
TEST_F(ContainerTest, AJobWithAnImageGoesOnlyToNodesThatRunContainers) {
  StartAgent("plain", "4xH100-80GB", {"--device-dir", devices_});
  const std::string token = TenantToken("team-a");
  auto r = ApiClient(url_, token)
               .Post("/v1/jobs",
                     json({{"queue", "team-a"}, {"image", image_}, {"command", {"true"}}}).dump(),
                     "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("node runs no containers"), std::string::npos) << r->body;

  StartContainerAgent("n1");
  std::vector<uint64_t> ids;
  for (int i = 0; i < 2; ++i) {
    ids.push_back(Submit(token, {{"queue", "team-a"},
                                 {"image", image_},
                                 {"command", {"true"}},
                                 {"resources", {{"gpus", 1}, {"cpu", "0.1"}}}}));
  }
  for (uint64_t id : ids) {
    const json job = WaitEnded(id, 60s);
    ASSERT_EQ(job.value("state", ""), "succeeded") << job.dump();
    EXPECT_EQ(job["attempt_history"][0]["tasks"][0]["node"], "n1") << job.dump();
  }
}

// Agent kill -9 while a container runs, and a restart on the same data directory: the
// container is adopted (its one run goes on and ends once), its end is reported once,
// and its GPUs are not handed out again while it runs.
TEST_F(ContainerTest, AnAgentKilledWhileContainersRunAdoptsThemAndRestartsNone) {
  StartContainerAgent("n1");
  const std::string token = TenantToken("team-a");
  const uint64_t first =
      Submit(token, {{"name", "survives"},
                     {"queue", "team-a"},
                     {"image", image_},
                     {"container", {{"mounts", {shared_ + ":/in:rw"}}}},
                     {"command",
                      {"sh", "-c",
                       "echo \"start $TESSERA_ATTEMPT $CUDA_VISIBLE_DEVICES\" >> /in/records/a; "
                       "sleep 5; echo end >> /in/records/a"}},
                     {"resources", {{"gpus", 1}, {"cpu", "0.1"}}}});
  ASSERT_TRUE(WaitFor([&] { return !Records("a").empty(); }, 60s))
      << Job(first).dump() << agents_["n1"]->Output();
  agents_["n1"]->Signal(SIGKILL);
  agents_["n1"]->Wait(10s);
  agents_.erase("n1");
  StartContainerAgent("n1");
  // Both GPUs: it may start only once the adopted container has ended.
  const uint64_t second = Submit(token, {{"name", "after"},
                                         {"queue", "team-a"},
                                         {"image", image_},
                                         {"command", {"true"}},
                                         {"resources", {{"gpus", 2}, {"cpu", "0.1"}}}});
  const json a = WaitEnded(first, 60s);
  const json b = WaitEnded(second, 60s);
  ASSERT_EQ(a.value("state", ""), "succeeded") << a.dump() << agents_["n1"]->Output();
  ASSERT_EQ(b.value("state", ""), "succeeded") << b.dump();
  EXPECT_EQ(a.value("attempts", 0), 1) << a.dump();
  EXPECT_EQ(a["attempt_history"].size(), 1u) << a.dump();
  const std::string runs = Records("a");
  EXPECT_EQ(std::count(runs.begin(), runs.end(), '\n'), 2) << runs;  // one start, one end
  EXPECT_EQ(runs.rfind("start 1 ", 0), 0u) << runs;
  EXPECT_GE(b["attempt_history"][0].value("start_time", ""),
            a["attempt_history"][0].value("end_time", ""))
      << "the second job got a GPU the adopted container held\n"
      << a.dump() << "\n"
      << b.dump();
}

// A MIG instance in a container: its card's node and its instance's two capability nodes
// (named by the driver's capability files, fake ones here), and no other device node.
TEST_F(ContainerTest, AMigTaskInAnImageGetsOnlyItsInstancesCapabilities) {
  const std::string caps = dir_ + "/capabilities";
  const std::string cap_nodes = devices_ + "/nvidia-caps";
  ASSERT_TRUE(std::filesystem::create_directory(cap_nodes));
  ASSERT_EQ(::chmod(cap_nodes.c_str(), 0755), 0);
  auto cap_node = [&](int n) {
    const std::string node = cap_nodes + "/nvidia-cap" + std::to_string(n);
    ASSERT_EQ(::mknod(node.c_str(), S_IFCHR | 0444, makedev(1, 3)), 0) << node;
  };
  // GPU instance gi of card `minor`: capability 10 + 20 minor + 2 gi, its compute
  // instance's the next; config (1) and monitor (2) too.
  auto gi_cap = [](int minor, int gi) { return 10 + minor * 20 + gi * 2; };
  cap_node(1);
  cap_node(2);
  for (int minor = 0; minor < kGpusPerAgent; ++minor) {
    for (int gi = 1; gi <= 7; ++gi) {
      const std::string base =
          caps + "/gpu" + std::to_string(minor) + "/mig/gi" + std::to_string(gi);
      std::filesystem::create_directories(base + "/ci0");
      std::ofstream(base + "/access") << "DeviceFileMinor: " << gi_cap(minor, gi) << "\n";
      std::ofstream(base + "/ci0/access") << "DeviceFileMinor: " << gi_cap(minor, gi) + 1 << "\n";
      cap_node(gi_cap(minor, gi));
      cap_node(gi_cap(minor, gi) + 1);
    }
  }
  nodes_["m1"] = true;
  StartAgent("m1", std::to_string(kGpusPerAgent) + "xH100-80GB:mig",
             {"--containers", "on", "--device-dir", devices_, "--nvidia-caps-dir", caps,
              "--insecure-registry", registry_});
  const std::string token = TenantToken("team-a");
  const uint64_t id = Submit(
      token, {{"queue", "team-a"},
              {"image", image_},
              {"command",
               {"sh", "-c",
                "for f in /dev/nvidia* /dev/nvidia-caps/*; do [ -e \"$f\" ] && echo \"dev $f\"; "
                "done; echo \"cvd $CUDA_VISIBLE_DEVICES\""}},
              {"resources", {{"gpus", 1}, {"mig", "1g.10gb"}, {"cpu", "0.1"}}}});
  const json job = WaitEnded(id, 60s);
  ASSERT_EQ(job.value("state", ""), "succeeded") << job.dump() << agents_["m1"]->Output();
  const std::string log = Log(id);
  std::set<std::string> devices;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("dev ", 0) == 0) {
      devices.insert(line.substr(4));
    }
  }
  const int card = devices.count("/dev/nvidia0") > 0 ? 0 : 1;
  const std::set<std::string> expected = {
      "/dev/nvidia" + std::to_string(card), "/dev/nvidia-caps",
      "/dev/nvidia-caps/nvidia-cap" + std::to_string(gi_cap(card, 1)),
      "/dev/nvidia-caps/nvidia-cap" + std::to_string(gi_cap(card, 1) + 1)};
  EXPECT_EQ(devices, expected) << log;
  EXPECT_NE(log.find("cvd MIG-"), std::string::npos) << log;
}

// How many times the registry served blobs of `repo` (an image's config and layers).
int BlobDownloads(const std::string& registry_log, const std::string& repo) {
  int n = 0;
  std::istringstream lines(registry_log);
  for (std::string line; std::getline(lines, line);) {
    n += line.find("\"GET /v2/" + repo + "/blobs/") != std::string::npos &&
         line.find("HTTP/1.1\" 200 ") != std::string::npos;
  }
  return n;
}

// The node's image cache: two jobs of one image at once download it once; past the
// cache's bound the least recently used image no task uses is removed (its next job
// downloads it again), and one a task uses is kept.
TEST_F(ContainerTest, TheCacheDownloadsAnImageOnceAndEvictsTheLeastRecentlyUsed) {
  std::string out;
  const std::string other = registry_ + "/test/other:1";
  ASSERT_TRUE(Shell(std::string(TESSERA_SOURCE_DIR) + "/scripts/test-image.sh " + other + " " +
                        dir_ + "/image-other 1",
                    &out))
      << out;
  nodes_["n1"] = true;
  StartAgent("n1", std::to_string(kGpusPerAgent) + "xH100-80GB",
             {"--containers", "on", "--device-dir", devices_, "--insecure-registry", registry_,
              "--image-cache-size", "1MiB"});  // smaller than either image
  const std::string token = TenantToken("team-a");
  auto run = [&](const std::string& image) {
    return Submit(token, {{"queue", "team-a"},
                          {"image", image},
                          {"command", {"true"}},
                          {"resources", {{"gpus", 1}, {"cpu", "0.1"}}}});
  };
  const std::string log = dir_ + "/registry.log";
  const uint64_t a1 = run(image_);
  const uint64_t a2 = run(image_);  // both at once, on the node's two GPUs
  for (uint64_t id : {a1, a2}) {
    ASSERT_EQ(WaitEnded(id, 60s).value("state", ""), "succeeded") << Job(id).dump();
  }
  const int once = BlobDownloads(Process::ReadFile(log), "test/tt");
  EXPECT_GT(once, 0);
  // The other image: pulled, then the cache is past its bound and drops test/tt (used
  // less recently, and by no task now), but not the other (in use).
  ASSERT_EQ(WaitEnded(run(other), 60s).value("state", ""), "succeeded");
  EXPECT_EQ(BlobDownloads(Process::ReadFile(log), "test/other"), once);
  ASSERT_EQ(WaitEnded(run(image_), 60s).value("state", ""), "succeeded");
  EXPECT_EQ(BlobDownloads(Process::ReadFile(log), "test/tt"), 2 * once)
      << "test/tt was not evicted, or was downloaded twice at first";
}

// A registry that asks for credentials: the tenant that set its own (`tessera registry
// login`) runs the image; another tenant's job of the same image, already on the node,
// is refused by the registry; the credential is in no view, log or environment.
TEST_F(ContainerTest, ATenantsRegistryCredentialPullsItsImageAndNoOneElses) {
  const std::string htpasswd = dir_ + "/htpasswd";
  std::string out;
  ASSERT_TRUE(
      Shell("python3 -c \"import crypt; print('ada:' + crypt.crypt('s3cret', "
            "crypt.mksalt(crypt.METHOD_BLOWFISH)))\" > " +
                htpasswd,
            &out))
      << out;
  const std::string priv = StartRegistry("private", htpasswd);
  const std::string image = priv + "/team/tt:1";
  ASSERT_TRUE(Shell("CREDS=ada:s3cret " + std::string(TESSERA_SOURCE_DIR) +
                        "/scripts/test-image.sh " + image + " " + dir_ + "/image-private",
                    &out))
      << out;
  nodes_["n1"] = true;
  StartAgent("n1", std::to_string(kGpusPerAgent) + "xH100-80GB",
             {"--containers", "on", "--device-dir", devices_, "--insecure-registry", priv});
  const std::string a = TenantToken("team-a");
  const std::string b = TenantToken("team-b");
  std::ofstream(dir_ + "/password") << "s3cret\n";
  ASSERT_TRUE(Shell(std::string(TESSERA_BINARY) + " registry login " + priv +
                        " -u ada --password-file " + dir_ + "/password --server " + url_ +
                        " --token " + a,
                    &out))
      << out;
  ASSERT_TRUE(Shell(
      std::string(TESSERA_BINARY) + " registry list --server " + url_ + " --token " + a, &out));
  EXPECT_EQ(Trim(out), priv);
  ASSERT_TRUE(Shell(
      std::string(TESSERA_BINARY) + " registry list --server " + url_ + " --token " + b, &out));
  EXPECT_EQ(Trim(out), "");
  EXPECT_FALSE(Shell(std::string(TESSERA_BINARY) + " registry list --tenant team-a --server " +
                         url_ + " --token " + b,
                     &out))
      << "one tenant listed another's registries: " << out;

  const uint64_t mine = Submit(a, {{"queue", "team-a"},
                                   {"image", image},
                                   {"command", {"env"}},
                                   {"resources", {{"cpu", "0.1"}}}});
  const json ok = WaitEnded(mine, 60s);
  ASSERT_EQ(ok.value("state", ""), "succeeded") << ok.dump() << agents_["n1"]->Output();
  const uint64_t theirs = Submit(b, {{"queue", "team-b"},
                                     {"image", image},
                                     {"command", {"env"}},
                                     {"resources", {{"cpu", "0.1"}}}});
  const json refused = WaitEnded(theirs, 60s);
  ASSERT_EQ(refused.value("state", ""), "failed") << refused.dump();
  EXPECT_NE(refused.value("reason", "").find("the registry refused the credentials"),
            std::string::npos)
      << refused.dump();
  // base64("ada:s3cret") and the password: nowhere a tenant or the node's files show.
  for (const std::string& text :
       {Log(mine), Job(mine).dump(), Get("/v1/registry-credentials?tenant=team-a").dump()}) {
    EXPECT_EQ(text.find("s3cret"), std::string::npos) << text;
    EXPECT_EQ(text.find("YWRhOnMzY3JldA"), std::string::npos) << text;
  }
  EXPECT_TRUE(Shell("! grep -rqs -e s3cret -e YWRhOnMzY3JldA " + dir_ + "/agent-n1", &out))
      << "the agent's data directory holds the credential";
}

// pyxis's flags in a Slurm script: the script runs in the image, its output file lands
// in the mounted directory (its working directory there).
TEST_F(ContainerTest, ASlurmScriptWithContainerImageRunsInTheImage) {
  StartContainerAgent("n1");
  const std::string token = TenantToken("team-a");
  const std::string script = dir_ + "/train.sh";
  std::ofstream(script) << "#!/bin/bash\n"
                        << "#SBATCH --container-image=" << registry_ << "#test/tt:1\n"
                        << "#SBATCH --container-mounts=" << shared_ << "/records:/work:rw\n"
                        << "#SBATCH --container-workdir=/work -o out-%j.txt --gpus=1\n"
                        << "grep NAME= /etc/os-release\n"
                        << "echo \"job $SLURM_JOB_ID in $PWD as $(id -u)\"\n"
                        << "for f in /dev/nvidia*; do echo \"dev ${f##*/}\"; done\n";
  std::string out;
  ASSERT_TRUE(Shell(std::string(TESSERA_BINARY) + " sbatch --parsable --server " + url_ +
                        " --token " + token + " " + script,
                    &out))
      << out;
  const uint64_t id = std::stoull(Trim(out));
  const json job = WaitEnded(id, 60s);
  ASSERT_EQ(job.value("state", ""), "succeeded") << job.dump() << "\n" << Log(id);
  EXPECT_EQ(job["spec"]["image"], registry_ + "/test/tt:1");
  const std::string file = Records("out-" + std::to_string(id) + ".txt");
  EXPECT_NE(file.find("NAME=\"Tessera test image\""), std::string::npos) << file << Log(id);
  EXPECT_NE(file.find("job " + std::to_string(id) + " in /work as "), std::string::npos) << file;
  EXPECT_EQ(file.find("as 0\n"), std::string::npos) << file;
  const int gpu = job["attempt_history"][0]["tasks"][0]["gpus"][0].value("index", -1);
  EXPECT_NE(file.find("dev nvidia" + std::to_string(gpu) + "\n"), std::string::npos) << file;
  EXPECT_EQ(file.find("dev nvidia" + std::to_string(1 - gpu) + "\n"), std::string::npos) << file;
}

// A share in an image: the node's MPS pipe directory and the CUDA limiter come into the
// container at their host paths with the share's limits, and the task, as its tenant's
// uid, connects to the node's MPS daemon (the fake nvidia-cuda-mps-control, run as a
// client from the image: it records each client's uid in the daemon's directory).
TEST_F(ContainerTest, AShareInAnImageReachesTheNodesMpsAndGetsTheLimiter) {
  const std::string fake = shared_ + "/fake-nvidia-cuda-mps-control";  // mountable
  std::filesystem::copy_file(TESSERA_FAKE_MPS_CONTROL, fake);
  ASSERT_EQ(::chmod(fake.c_str(), 0755), 0);
  const std::string limiter = dir_ + "/libfake-limiter.so";
  std::ofstream(limiter) << "fake-limiter-bytes\n";
  ASSERT_EQ(::chmod(limiter.c_str(), 0644), 0);
  nodes_["n1"] = true;
  StartAgent(
      "n1", "1xA100-80GB:shared",
      {"--containers", "on", "--device-dir", devices_, "--insecure-registry", registry_,
       "--container-mount-prefix", shared_, "--mps-control", fake, "--cuda-limiter", limiter});
  const std::string pipe = dir_ + "/agent-n1/mps/0/pipe";
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(pipe + "/fake-mps/clients.log"); }, 30s))
      << agents_["n1"]->Output();
  const uint64_t id = Submit(
      TenantToken("team-a"),
      {{"queue", "team-a"},
       {"image", image_},
       {"container", {{"mounts", {shared_ + ":/opt/mps:ro"}}}},
       {"command",
        {"sh", "/opt/mps/fake-nvidia-cuda-mps-control", "--client", "sh", "-c",
         "echo pipe=$CUDA_MPS_PIPE_DIRECTORY; echo preload=$LD_PRELOAD; cat \"$LD_PRELOAD\"; "
         "echo compute=$TESSERA_CUDA_COMPUTE_PERCENT memory=$TESSERA_CUDA_MEMORY_LIMIT_MIB; "
         "echo uid=$(id -u); grep -q ID=tessera-test /etc/os-release && echo in-image"}},
       {"resources",
        {{"gpus", 1}, {"gpu_fraction", 0.5}, {"gpu_memory", "10GiB"}, {"cpu", "0.1"}}}});
  const json job = WaitEnded(id, 60s);
  ASSERT_EQ(job.value("state", ""), "succeeded") << job.dump() << Log(id);
  const std::string log = Log(id);
  EXPECT_NE(log.find("in-image\n"), std::string::npos) << log;
  EXPECT_NE(log.find("pipe=" + pipe + "\n"), std::string::npos) << log;
  // The agent preloads its own copy of the limiter (readable by every task's uid).
  EXPECT_NE(log.find("preload=" + dir_ + "/agent-n1/lib/libtessera_cuda_limiter.so\n"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("fake-limiter-bytes\n"), std::string::npos) << "the limiter is not there:\n"
                                                                 << log;
  EXPECT_NE(log.find("compute=50 memory=10240\n"), std::string::npos) << log;
  const size_t at = log.find("uid=");
  ASSERT_NE(at, std::string::npos) << log;
  const std::string uid = log.substr(at + 4, log.find('\n', at) - at - 4);
  EXPECT_NE(uid, "0") << log;
  // The daemon on the host saw the container's process connect, as the tenant's uid.
  EXPECT_NE(Process::ReadFile(pipe + "/fake-mps/clients.log").find(" uid=" + uid + " connected"),
            std::string::npos)
      << Process::ReadFile(pipe + "/fake-mps/clients.log");
}

// A pull that takes a while (the registry behind a relay at 4 MB/s): while the task
// starts, its job's reason says how far the pull is, against the image's size from its
// manifest; once it runs, the reason says so no more. A bare task is not kept waiting
// by two tasks whose image is being pulled.
TEST_F(ContainerTest, AJobsReasonShowsItsImagesPullProgressAndBareTasksDoNotWait) {
  std::string out;
  const std::string big = registry_ + "/test/big:1";
  ASSERT_TRUE(Shell(std::string(TESSERA_SOURCE_DIR) + "/scripts/test-image.sh " + big + " " + dir_ +
                        "/image-big 16",
                    &out))
      << out;
  const int relay_port = FreePort();
  const std::string relay = "127.0.0.1:" + std::to_string(relay_port);
  registries_.push_back(std::make_unique<Process>(
      std::vector<std::string>{
          Which("python3"), std::string(TESSERA_SOURCE_DIR) + "/tests/e2e/slow_relay.py",
          std::to_string(relay_port), registry_.substr(registry_.find(':') + 1), "4000000"},
      dir_ + "/relay.log"));
  ASSERT_TRUE(WaitFor(
      [&] {
        httplib::Client c("http://" + relay);
        auto r = c.Get("/v2/");
        return r && r->status == 200;
      },
      15s));
  nodes_["n1"] = true;
  StartAgent("n1", std::to_string(kGpusPerAgent) + "xH100-80GB",
             {"--containers", "on", "--device-dir", devices_, "--insecure-registry", relay});
  const std::string image = relay + "/test/big:1";
  const std::string token = TenantToken("team-a");
  auto submit = [&](const json& more) {
    json spec = {{"queue", "team-a"}, {"command", {"true"}}, {"resources", {{"cpu", "0.1"}}}};
    spec.update(more);
    return Submit(token, spec);
  };
  // Two tasks of the image (the second waits for the first's pull), then a bare one,
  // which starts while they wait: pulls have launch threads of their own.
  const uint64_t id = submit({{"image", image}});
  const uint64_t second = submit({{"image", image}});
  ASSERT_TRUE(WaitFor([&] { return Job(second).value("state", "") == "running"; }, 30s));
  const uint64_t bare = submit({{"name", "bare"}});
  ASSERT_EQ(WaitEnded(bare, 30s).value("state", ""), "succeeded");
  const json first = Job(id);
  EXPECT_NE(first.value("reason", "").find("pulling image"), std::string::npos)
      << "the bare task waited for the pulls: " << first.dump();
  std::set<std::string> reasons;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  json job;
  while (std::chrono::steady_clock::now() < deadline) {
    job = Job(id);
    const std::string state = job.value("state", "");
    if (state != "pending" && state != "running") {
      break;
    }
    reasons.insert(job.value("reason", ""));
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(job.value("state", ""), "succeeded") << job.dump();
  ASSERT_EQ(WaitEnded(second, 30s).value("state", ""), "succeeded");
  const std::string head = "task 0: pulling image " + image + ": ";
  // The image is 16 MiB of random bytes and a few of busybox: its size shows as 17-19 MB.
  const std::regex progress(head + R"((\d+) of (1[7-9]|2[0-2]) MB)");
  int with_size = 0;
  std::string all;
  for (const std::string& r : reasons) {
    all += r + "\n";
    with_size += std::regex_search(r, progress) ? 1 : 0;
  }
  EXPECT_GE(with_size, 2) << "the pull's progress did not show, or did not move:\n" << all;
  EXPECT_EQ(job.value("reason", "").find("pulling"), std::string::npos) << job.dump();
}

TEST_F(ContainerTest, AMissingImageFailsTheJobWithAClearReasonOnce) {
  StartContainerAgent("n1");
  const std::string token = TenantToken("team-a");
  const uint64_t id = Submit(token, {{"name", "missing"},
                                     {"queue", "team-a"},
                                     {"image", registry_ + "/test/no-such-image:1"},
                                     {"resources", {{"gpus", 1}, {"cpu", "0.1"}}}});
  ASSERT_NE(id, 0u);
  const json job = WaitEnded(id, 60s);
  ASSERT_EQ(job.value("state", ""), "failed") << job.dump();
  EXPECT_EQ(job.value("attempts", 0), 1) << job.dump();
  EXPECT_NE(job.dump().find("image not found: " + registry_ + "/test/no-such-image:1"),
            std::string::npos)
      << job.dump();
  // A command the image does not have: Podman's failure, not the command's exit code.
  const uint64_t no_program = Submit(token, {{"queue", "team-a"},
                                             {"image", image_},
                                             {"command", {"/no/such/program"}},
                                             {"resources", {{"cpu", "0.1"}}}});
  const json failed = WaitEnded(no_program, 60s);
  ASSERT_EQ(failed.value("state", ""), "failed") << failed.dump();
  EXPECT_NE(failed.value("reason", "").find("the container could not start: "), std::string::npos)
      << failed.dump();
}

}  // namespace
}  // namespace tessera::e2e
