#include "agent/runtime/container_runtime.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace tessera {
namespace {

class ContainerRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir() + "container_runtime_test_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_ + "/allowed/data");
    std::filesystem::create_directories(dir_ + "/private");
    std::filesystem::create_symlink(dir_ + "/private", dir_ + "/allowed/escape");
    // A stand-in that answers --version: the argv is what is tested.
    const std::string fake = dir_ + "/fake-podman";
    std::ofstream(fake) << "#!/bin/sh\necho \"podman version 9.9.9\"\n";
    ::chmod(fake.c_str(), 0755);
    ContainerRuntimeOptions o;
    o.podman = fake;
    o.storage_dir = dir_ + "/store";
    o.mount_prefixes = {dir_ + "/allowed"};
    o.insecure_registries = {"127.0.0.1:5000"};
    StatusOr<std::unique_ptr<ContainerRuntime>> rt = ContainerRuntime::Create(o);
    ASSERT_TRUE(rt.ok()) << rt.status().ToString();
    rt_ = std::move(*rt);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
  std::unique_ptr<ContainerRuntime> rt_;
};

bool Has(const std::vector<std::string>& argv, const std::vector<std::string>& run) {
  return std::search(argv.begin(), argv.end(), run.begin(), run.end()) != argv.end();
}

TEST_F(ContainerRuntimeTest, RunsTheImageAsTheTenantWithOnlyItsDevicesAndDirectories) {
  ContainerTask t;
  t.id = "42.0.1";
  t.container.image = "127.0.0.1:5000/team/img:v1";
  t.container.mounts = {{dir_ + "/allowed/data", "/data", true}};
  t.container.workdir = "/w";
  t.command = {"python", "-c", "--not-a-flag"};
  t.uid = 2001;
  t.gid = 2001;
  t.env_file = dir_ + "/env";
  t.cdi_devices = {"tessera.io/gpu=GPU-1"};
  t.own_dirs = {"/var/lib/tessera/jobs/42", "/ckpt/42"};
  t.cpus = {0, 1};
  t.cpu_milli = 1500;
  t.memory_mib = 2048;
  StatusOr<std::vector<std::string>> argv = rt_->RunArgs(t);
  ASSERT_TRUE(argv.ok()) << argv.status().ToString();
  const std::vector<std::string>& a = *argv;
  EXPECT_EQ(a[0], dir_ + "/fake-podman");
  EXPECT_TRUE(Has(a, {"--root", dir_ + "/store/root"}));
  EXPECT_TRUE(Has(a, {"--runroot", RunRootFor(dir_ + "/store")}));
  EXPECT_LT(RunRootFor(dir_ + "/store").size(), 50U);  // Podman refuses longer ones
  EXPECT_NE(RunRootFor(dir_ + "/store"), RunRootFor(dir_ + "/other"));
  EXPECT_TRUE(Has(a, {"--runtime", "runc"}));
  EXPECT_TRUE(Has(a, {"run", "--rm", "--replace", "--name", "tessera-42.0.1"}));
  EXPECT_TRUE(Has(a, {"--pull", "never"}));
  EXPECT_TRUE(Has(a, {"--init"}));
  EXPECT_TRUE(Has(a, {"--user", "2001:2001"}));
  EXPECT_TRUE(Has(a, {"--cap-drop", "all"}));
  EXPECT_TRUE(Has(a, {"--security-opt", "no-new-privileges"}));
  EXPECT_TRUE(Has(a, {"--pid", "private"}));
  EXPECT_TRUE(Has(a, {"--ipc", "host"}));  // as a bare task: NCCL's shared memory works
  EXPECT_TRUE(Has(a, {"--env-file", dir_ + "/env"}));
  EXPECT_TRUE(Has(a, {"--device", "tessera.io/gpu=GPU-1"}));
  // The mount's source as given: the agent has checked and staged it.
  EXPECT_TRUE(Has(a, {"--volume", dir_ + "/allowed/data:/data:ro,nosuid,nodev"}));
  EXPECT_TRUE(Has(a, {"--volume", "/ckpt/42:/ckpt/42:rw,nosuid,nodev"}));
  EXPECT_TRUE(Has(a, {"--workdir", "/w"}));
  EXPECT_TRUE(Has(a, {"--cpuset-cpus", "0,1"}));
  EXPECT_TRUE(Has(a, {"--cpus", "1.500"}));
  EXPECT_TRUE(Has(a, {"--memory", "2048m"}));
  // The image, then the command untouched: nothing after the image is Podman's.
  EXPECT_TRUE(Has(a, {"127.0.0.1:5000/team/img:v1", "python", "-c", "--not-a-flag"}));
  EXPECT_EQ(a.back(), "--not-a-flag");
  EXPECT_EQ(std::count(a.begin(), a.end(), "--ulimit"), 2);
  EXPECT_FALSE(Has(a, {"--entrypoint"}));

  t.container.entrypoint_set = true;
  t.container.entrypoint = {"/bin/sh", "-c"};
  argv = rt_->RunArgs(t);
  ASSERT_TRUE(argv.ok());
  EXPECT_TRUE(Has(*argv, {"--entrypoint", R"(["/bin/sh","-c"])"}));
}

TEST_F(ContainerRuntimeTest, MountsOnlyUnderTheAllowedPrefixesAfterResolvingLinks) {
  EXPECT_TRUE(CheckMountSource(dir_ + "/allowed/data", {dir_ + "/allowed"}).ok());
  EXPECT_TRUE(CheckMountSource(dir_ + "/allowed", {dir_ + "/allowed"}).ok());
  StatusOr<std::string> escape = CheckMountSource(dir_ + "/allowed/escape", {dir_ + "/allowed"});
  EXPECT_EQ(escape.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(CheckMountSource(dir_ + "/allowed-not", {dir_ + "/allowed"}).status().code(),
            StatusCode::kNotFound);
  std::filesystem::create_directories(dir_ + "/allowedx");
  EXPECT_EQ(CheckMountSource(dir_ + "/allowedx", {dir_ + "/allowed"}).status().code(),
            StatusCode::kPermissionDenied);  // a whole path component, not a string prefix
  EXPECT_NE(CheckMountSource(dir_ + "/private", {}).status().message().find("allows no host"),
            std::string::npos);

  std::string prefix;
  EXPECT_TRUE(
      CheckMountSource(dir_ + "/allowed/data", {"/nowhere", dir_ + "/allowed"}, &prefix).ok());
  EXPECT_EQ(prefix, dir_ + "/allowed");
}

TEST_F(ContainerRuntimeTest, PodmanRunsWithAFixedEnvironmentAndTheInsecureRegistriesListed) {
  std::map<std::string, std::string> env = rt_->PodmanEnv();
  ASSERT_TRUE(env.count("CONTAINERS_REGISTRIES_CONF"));
  std::ifstream in(env["CONTAINERS_REGISTRIES_CONF"]);
  std::string conf((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(conf.find("location = \"127.0.0.1:5000\""), std::string::npos);
  EXPECT_NE(conf.find("insecure = true"), std::string::npos);
  EXPECT_EQ(env["TMPDIR"], dir_ + "/store/tmp");
  EXPECT_EQ(env.size(), 5U);
  EXPECT_EQ(rt_->description(), "podman 9.9.9, runc");
}

TEST(ContainerEnvTest, WrittenPrivateAndRefusingLineBreaks) {
  const std::string path = testing::TempDir() + "container_env_" + std::to_string(::getpid());
  ASSERT_TRUE(WriteContainerEnv(path, {{"A", "1"}, {"B", "x=y z"}}).ok());
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "A=1\nB=x=y z\n");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600U);
  EXPECT_EQ(WriteContainerEnv(path, {{"A", "1\n2"}}).code(), StatusCode::kInvalidArgument);
  ::unlink(path.c_str());
}

TEST(ContainerExitTest, PodmansOwnFailuresAreToldFromTheCommands) {
  EXPECT_EQ(PodmanFailure(125, "Error: setting up CDI devices: unresolvable CDI devices x\n"),
            "setting up CDI devices: unresolvable CDI devices x");
  EXPECT_EQ(PodmanFailure(125, ""), "podman exited with 125");  // always Podman's
  EXPECT_EQ(PodmanFailure(127, "ERROR (catatonit:6): failed to exec pid1: No such file\n"),
            "ERROR (catatonit:6): failed to exec pid1: No such file");
  EXPECT_EQ(PodmanFailure(1, "ERROR (catatonit:6): failed to exec pid1: No such file\n"),
            "ERROR (catatonit:6): failed to exec pid1: No such file");
  EXPECT_EQ(PodmanFailure(1, "ERROR (catatonit:6): something else\n"), "");
  EXPECT_EQ(PodmanFailure(127, "sh: frobnicate: not found\n"), "");  // the command's own
  EXPECT_EQ(PodmanFailure(126, "Error: runc: exec failed\n\n"), "runc: exec failed");
  EXPECT_EQ(PodmanFailure(3, "Error: whatever\n"), "");
}

TEST(ContainerExitTest, SignalsComeBackAsSignalsAndPodmansOwnCodesStayCodes) {
  EXPECT_EQ(ContainerExit(0), std::make_pair(0, 0));
  EXPECT_EQ(ContainerExit(3), std::make_pair(3, 0));
  EXPECT_EQ(ContainerExit(125), std::make_pair(125, 0));
  EXPECT_EQ(ContainerExit(128), std::make_pair(128, 0));
  EXPECT_EQ(ContainerExit(143), std::make_pair(-1, 15));
  EXPECT_EQ(ContainerExit(137), std::make_pair(-1, 9));
  EXPECT_EQ(ContainerExit(193), std::make_pair(193, 0));
}

}  // namespace
}  // namespace tessera
