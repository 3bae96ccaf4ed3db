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
// The registry's side (credentials, pull progress, shares in images) is in
// container_registry_e2e_test.cc, the fixture in container_fixture.h.
// Needs root (containers are rootful, tasks run as tenants' uids, mknod); skipped
// otherwise. Needs podman, runc, docker-registry and busybox-static (scripts/setup.sh).
#include "e2e/container_fixture.h"

namespace tessera::e2e {
namespace {

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
