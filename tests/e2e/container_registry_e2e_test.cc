// Jobs in container images, end to end, around the registry (container_fixture.h): a
// private registry's image pulled with its tenant's own credential and refused to
// another tenant's job, the credential nowhere on the node; a share in an image reaching
// the node's MPS daemon with the CUDA limiter; a slow pull's progress as its job's reason,
// with a bare task not kept waiting.
#include <regex>
#include <set>
#include <string>

#include "e2e/container_fixture.h"

namespace tessera::e2e {
namespace {

// A registry that asks for credentials: the tenant that set its own (`tessera registry
// login`) runs the image; another tenant's job of the same image, already on the node,
// is refused by the registry with that tenant's (wrong) credential; neither credential is
// in a view, a log, an environment or the node's files (a failed launch's record too).
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
  // Kept for the agent's restarts: team-a may use the image without asking again.
  const json allowed =
      json::parse(Process::ReadFile(dir_ + "/agent-n1/containers/allowed.json"), nullptr, false);
  EXPECT_EQ(allowed.value("tenants", json::array()), json::array({json::array({"team-a", image})}))
      << allowed.dump();
  // Team B's own credential, which this registry refuses: its job fails, and the
  // failed launch leaves the credential nowhere on the node either.
  std::ofstream(dir_ + "/wrong") << "wr0ng-pw\r\n";  // a file written on Windows
  ASSERT_TRUE(Shell(std::string(TESSERA_BINARY) + " registry login " + priv +
                        " -u bob --password-file " + dir_ + "/wrong --server " + url_ +
                        " --token " + b,
                    &out))
      << out;
  const uint64_t theirs = Submit(b, {{"queue", "team-b"},
                                     {"image", image},
                                     {"command", {"env"}},
                                     {"resources", {{"cpu", "0.1"}}}});
  const json refused = WaitEnded(theirs, 60s);
  ASSERT_EQ(refused.value("state", ""), "failed") << refused.dump();
  EXPECT_NE(refused.value("reason", "").find("the registry refused the credentials"),
            std::string::npos)
      << refused.dump();
  // The passwords and base64("ada:s3cret"), base64("bob:wr0ng-pw"): nowhere a tenant
  // or the node's files show.
  for (const std::string& text : {Log(mine), Job(mine).dump(), Job(theirs).dump(),
                                  Get("/v1/registry-credentials?tenant=team-a").dump()}) {
    for (const char* secret : {"s3cret", "YWRhOnMzY3JldA", "wr0ng-pw", "Ym9iOndyMG5nLXB3"}) {
      EXPECT_EQ(text.find(secret), std::string::npos) << secret << " in " << text;
    }
  }
  EXPECT_TRUE(Shell("! grep -rqs -e s3cret -e YWRhOnMzY3JldA -e wr0ng-pw -e Ym9iOndyMG5nLXB3 " +
                        dir_ + "/agent-n1",
                    &out))
      << "the agent's data directory holds a credential";
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

}  // namespace
}  // namespace tessera::e2e
