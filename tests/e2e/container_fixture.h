// The fixture of the container end-to-end tests (container_e2e_test.cc,
// container_registry_e2e_test.cc): a real `tessera server`, root `tessera agent`s with
// --containers on (Podman with runc), Debian's docker-registry on loopback, and an image
// the test builds itself (busybox-static and an os-release of its own, imported and
// pushed with Podman). Fake GPUs are character devices the test makes (1:3, which behave
// as /dev/null) under the agents' --device-dir. Needs root (containers are rootful, tasks
// run as tenants' uids, mknod); skipped otherwise. Needs podman, runc, docker-registry and
// busybox-static (scripts/setup.sh).
#pragma once

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

using namespace std::chrono_literals;  // NOLINT: the fixture's and its tests' timeouts
using nlohmann::json;

inline constexpr int kGpusPerAgent = 2;

// Whether `program` is on PATH.
inline bool OnPath(const std::string& program) {
  return std::system(("command -v " + program + " >/dev/null 2>&1").c_str()) == 0;
}

// Runs a shell command line; its output in *out. True when it exited 0.
inline bool Shell(const std::string& line, std::string* out = nullptr) {
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
inline std::vector<std::string> MountsUnder(const std::string& dir) {
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

}  // namespace tessera::e2e
