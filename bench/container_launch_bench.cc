// What a container costs at launch: a controller and one agent (2 fake GPUs, containers
// on: Podman with runc) in process on loopback, the store fsyncing, a docker-registry on
// loopback holding the test image (scripts/test-image.sh). Every task is
// `bash -c 'echo "gpu $CUDA_VISIBLE_DEVICES"; echo ${EPOCHREALTIME/./}'`: it prints the
// wall clock in microseconds once bash runs, on the host or in the image alike.
//
//   decision -> exec   from the durable start decision (Controller's on_started) to the
//                      task's print: the push, the agent's launch, the shim and, for a
//                      container, Podman creating and starting it.
//
// Phases, one job at a time on an idle node: "bare" (a host process), "container" (the
// image already in the node's store), then "pull": one job of a second image of the
// same base and PAD_MIB more MiB of random bytes, which the node does not hold, so its
// decision -> exec includes the pull from the loopback registry.
//
// Needs root, podman, runc, docker-registry, busybox-static and bash-static.
// Usage: container_launch_bench [--jobs 30] [--pull-mib 1024]
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "bench_util.h"
#include "server/http/server.h"

namespace {

using nlohmann::json;
using tessera::Micros;

using tessera::bench::Percentile;

void Print(const char* what, const std::vector<double>& ms) {
  std::printf("  %-22s n=%-4zu p50 %8.1f ms  p99 %8.1f ms  max %8.1f ms\n", what, ms.size(),
              Percentile(ms, 0.5), Percentile(ms, 0.99),
              ms.empty() ? 0.0 : *std::max_element(ms.begin(), ms.end()));
}

int Run(const std::string& line) { return std::system(line.c_str()); }

class Bench {
 public:
  ~Bench() {
    if (registry_ > 0) {
      ::kill(registry_, SIGTERM);
      ::waitpid(registry_, nullptr, 0);
    }
  }

  bool StartRegistry(const std::string& dir) {
    httplib::Client probe("127.0.0.1", 0);
    for (int port = 45000 + ::getpid() % 1000; port < 46000; ++port) {
      registry_addr_ = "127.0.0.1:" + std::to_string(port);
      const std::string config = dir + "/registry.yml";
      FILE* f = std::fopen(config.c_str(), "w");
      std::fprintf(f,
                   "version: 0.1\nlog: {level: warn}\nstorage:\n  filesystem:\n    "
                   "rootdirectory: %s/registry\nhttp:\n  addr: %s\n",
                   dir.c_str(), registry_addr_.c_str());
      std::fclose(f);
      std::string program = "/usr/bin/docker-registry";
      char* argv[] = {program.data(), const_cast<char*>("serve"), const_cast<char*>(config.c_str()),
                      nullptr};
      if (::posix_spawn(&registry_, argv[0], nullptr, nullptr, argv, environ) != 0) {
        return false;
      }
      for (int i = 0; i < 100; ++i) {
        httplib::Client c("http://" + registry_addr_);
        if (auto r = c.Get("/v2/"); r && r->status == 200) {
          return true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (::waitpid(registry_, nullptr, WNOHANG) == registry_) {
          break;  // the port was taken: the next one
        }
      }
      ::kill(registry_, SIGKILL);
      ::waitpid(registry_, nullptr, 0);
    }
    registry_ = 0;
    return false;
  }

  bool Start(const std::string& dir) {
    tessera::ServerOptions o;
    o.data_dir = dir + "/server";
    o.port = 0;
    o.fsync = true;
    o.controller.heartbeat_interval = 200'000;  // as under `tessera up`
    o.controller.on_started = [this](tessera::JobNumber job, Micros now) {
      std::lock_guard<std::mutex> lock(mu_);
      decided_[job.value()] = now;
    };
    auto server = tessera::Server::Create(o, tessera::GpuCatalog::Default());
    if (!server.ok() || !(*server)->Start().ok()) {
      std::fprintf(stderr, "cannot start the controller\n");
      return false;
    }
    server_ = std::move(server).value();
    token_ = server_->CreateTenantToken("team-a", "bench").value();
    tessera::AgentOptions a;
    a.server_url = server_->url();
    a.token = server_->join_token();
    a.node_name = "bench";
    a.data_dir = dir + "/agent";
    a.fake_gpus = "2xH100-80GB";
    std::error_code ec;
    std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    a.shim_program = (self.parent_path().parent_path() / "tessera-shim").string();
    a.telemetry_interval = 0;
    a.containers = "on";
    a.container_insecure_registries = {registry_addr_};
    auto agent = tessera::Agent::Create(a, tessera::GpuCatalog::Default());
    if (!agent.ok()) {
      std::fprintf(stderr, "agent: %s\n", agent.status().ToString().c_str());
      return false;
    }
    agent_ = std::move(agent).value();
    agent_->Start();
    for (int i = 0; i < 1000 && server_->channel_streams() == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return server_->channel_streams() == 1;
  }

  void Stop() {
    agent_->Stop();
    server_->Stop();
  }

  const std::string& registry() const { return registry_addr_; }

  // One job to its end; its decision -> exec in ms, or a negative number on failure.
  double RunOne(const std::string& image) {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_bearer_token_auth(token_.c_str());
    json spec = {{"resources", {{"gpus", 1}, {"cpu", "0.1"}}},
                 {"command",
                  {"bash", "-c", "echo \"gpu $CUDA_VISIBLE_DEVICES\"; echo ${EPOCHREALTIME/./}"}}};
    if (!image.empty()) {
      spec["image"] = image;
    }
    auto r = c.Post("/v1/jobs", spec.dump(), "application/json");
    if (!r || r->status != 201) {
      std::fprintf(stderr, "submit: %s\n", r ? r->body.c_str() : "no answer");
      return -1;
    }
    const uint64_t id = json::parse(r->body)["id"].get<uint64_t>();
    const std::string path = "/v1/jobs/" + std::to_string(id);
    for (int i = 0; i < 600'000; ++i) {
      auto j = c.Get(path);
      const std::string state =
          j && j->status == 200 ? json::parse(j->body).value("state", "") : "";
      if (state == "failed" || state == "cancelled") {
        auto log = c.Get(path + "/logs?task=0");
        std::fprintf(stderr, "job %llu %s: %s\n%s\n", static_cast<unsigned long long>(id),
                     state.c_str(), json::parse(j->body).value("reason", "").c_str(),
                     log && log->status == 200 ? log->body.c_str() : "");
        return -1;
      }
      if (state == "succeeded") {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    long long us = 0;
    for (int i = 0; i < 1000 && us == 0; ++i) {
      auto log = c.Get(path + "/logs?task=0");
      std::string body = log && log->status == 200 ? log->body : "";
      const size_t gpu = body.find("gpu ");
      const size_t nl = gpu == std::string::npos ? gpu : body.find('\n', gpu);
      if (nl != std::string::npos && body.size() > nl + 1 && body.back() == '\n') {
        us = std::atoll(body.c_str() + nl + 1);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    return us > 0 ? static_cast<double>(us - decided_[id]) / 1000.0 : -1;
  }

 private:
  pid_t registry_ = 0;
  std::string registry_addr_;
  std::unique_ptr<tessera::Server> server_;
  std::unique_ptr<tessera::Agent> agent_;
  std::string token_;
  std::mutex mu_;
  std::map<uint64_t, Micros> decided_;
};

}  // namespace

int main(int argc, char** argv) {
  int jobs = 30;
  int pull_mib = 1024;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--jobs") == 0) {
      jobs = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--pull-mib") == 0) {
      pull_mib = std::atoi(argv[i + 1]);
    }
  }
  if (jobs < 1 || pull_mib < 0 || ::geteuid() != 0) {
    std::fprintf(stderr, "usage (as root): container_launch_bench [--jobs N] [--pull-mib N]\n");
    return 2;
  }
  std::string dir = "/tmp/tessera-container-bench-XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) {
    return 1;
  }
  ::chmod(dir.c_str(), 0711);
  const std::string image_script = std::string(TESSERA_SOURCE_DIR) + "/scripts/test-image.sh";
  int rc = 0;
  {
    Bench bench;
    const std::string small = "/test/tt:1";
    const std::string large = "/test/large:1";
    if (!bench.StartRegistry(dir) ||
        Run(image_script + " " + bench.registry() + small + " " + dir + "/image") != 0 ||
        !bench.Start(dir)) {
      std::fprintf(stderr, "cannot set up (registry, image, controller, agent)\n");
      return 1;
    }
    std::vector<double> bare;
    std::vector<double> container;
    if (bench.RunOne(bench.registry() + small) < 0) {  // the first pull, not counted
      rc = 1;
    }
    for (int i = 0; rc == 0 && i < jobs; ++i) {  // interleaved: both see the same machine
      const double b = bench.RunOne("");
      const double c = bench.RunOne(bench.registry() + small);
      if (b < 0 || c < 0) {
        rc = 1;
      }
      bare.push_back(b);
      container.push_back(c);
    }
    if (rc == 0) {
      std::printf("decision -> exec, one job at a time (%d each, interleaved):\n", jobs);
      Print("bare task", bare);
      Print("container (cached)", container);
    }
    if (rc == 0 && pull_mib > 0) {
      const auto build = std::chrono::steady_clock::now();
      if (Run(image_script + " " + bench.registry() + large + " " + dir + "/image " +
              std::to_string(pull_mib)) != 0) {
        rc = 1;
      } else {
        const double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - build).count();
        const double pulled = bench.RunOne(bench.registry() + large);
        if (pulled < 0) {
          rc = 1;
        } else {
          std::printf("pull: an image of %d MiB more (built and pushed in %.1f s):\n", pull_mib,
                      secs);
          Print("container (pulled)", {pulled});
          std::printf("  the pull: about %.1f s (less the cached container's p50)\n",
                      (pulled - Percentile(container, 0.5)) / 1000.0);
        }
      }
    }
    bench.Stop();
  }
  std::filesystem::remove_all(dir);
  return rc;
}
