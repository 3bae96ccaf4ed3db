// Launch latency on fake GPUs: a controller and one agent (8 fake GPUs, real task
// processes) in process on loopback, the store fsyncing, as under `tessera up`. Every
// task is `sh -c 'echo "gpu $CUDA_VISIBLE_DEVICES"; exec date +%s%N'`: it names its GPU
// and prints the wall clock when date runs, then exits (so "exec" includes sh's start).
//
//   decision -> exec   from the durable start decision (Controller's on_started) to the
//                      time the task printed: the push, the agent's launch, the fork,
//                      the exec of date.
//   exit -> next exec  on one GPU, from a task's print (it exits right after) to the
//                      next task's print there: the exit report, its commit, the cycle,
//                      the start decision's commit, the push and the launch.
//
// Phase "idle": jobs one at a time on an idle node (each waits for the one before).
// Phase "backlog": jobs queued for all 8 GPUs at once.
//
// Usage: launch_latency_bench [--jobs 200] [--backlog 1000]
#include <httplib.h>
#include <stdlib.h>
#include <sys/stat.h>
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
#include <system_error>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "server/http/server.h"

namespace {

using nlohmann::json;
using tessera::Micros;

struct Sample {
  Micros decided = 0;  // wall clock, µs
  Micros ran = 0;      // the task's print, µs
  std::string gpu;     // its CUDA_VISIBLE_DEVICES
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

void Print(const char* what, const std::vector<double>& ms) {
  std::printf("  %-18s n=%-5zu p50 %7.2f ms  p90 %7.2f ms  p99 %7.2f ms  max %7.2f ms\n", what,
              ms.size(), Percentile(ms, 0.5), Percentile(ms, 0.9), Percentile(ms, 0.99),
              ms.empty() ? 0.0 : *std::max_element(ms.begin(), ms.end()));
}

class Bench {
 public:
  bool Start(const std::string& dir) {
    tessera::ServerOptions o;
    o.data_dir = dir + "/server";
    o.port = 0;
    o.fsync = true;
    o.controller.heartbeat_interval = 200'000;  // as under `tessera up`
    o.controller.identities.run_as["team-a"] = {::getuid(), ::getgid()};
    o.controller.on_started = [this](tessera::JobNumber job, Micros now) {
      std::lock_guard<std::mutex> lock(mu_);
      samples_[job.value()].decided = now;
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
    a.fake_gpus = "8xH100-80GB";
    a.use_cgroups = false;
    // As tesserad: shims spawned from tessera-shim (in the build directory's root).
    std::error_code ec;
    std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    a.shim_program = (self.parent_path().parent_path() / "tessera-shim").string();
    a.allow_root_tasks = true;
    a.telemetry_interval = 0;
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

  uint64_t Submit() {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_bearer_token_auth(token_.c_str());
    json spec = {
        {"resources", {{"gpus", 1}}},
        {"command", {"/bin/sh", "-c", "echo \"gpu $CUDA_VISIBLE_DEVICES\"; exec date +%s%N"}}};
    auto r = c.Post("/v1/jobs", spec.dump(), "application/json");
    return r && r->status == 201 ? json::parse(r->body)["id"].get<uint64_t>() : 0;
  }

  json Job(uint64_t id) {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_bearer_token_auth(token_.c_str());
    auto r = c.Get("/v1/jobs/" + std::to_string(id));
    return r && r->status == 200 ? json::parse(r->body) : json::object();
  }

  bool WaitDone(uint64_t id) {
    for (int i = 0; i < 60'000; ++i) {
      const std::string state = Job(id).value("state", "");
      if (state == "succeeded") {
        return true;
      }
      if (state == "failed" || state == "cancelled") {
        std::fprintf(stderr, "job %llu %s: %s\n", static_cast<unsigned long long>(id),
                     state.c_str(), Job(id).value("reason", "").c_str());
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }

  // The task's print and GPU, from its log and its job.
  bool Collect(uint64_t id) {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_bearer_token_auth(token_.c_str());
    // A job's view may say "succeeded" a moment before its last output is appended: wait
    // for both lines (the GPU, then the time), each ended.
    auto complete = [](const std::string& body) {
      const size_t gpu = body.find("gpu ");
      const size_t line = gpu == std::string::npos ? gpu : body.find('\n', gpu);
      return line != std::string::npos && body.size() > line + 1 && body.back() == '\n';
    };
    httplib::Result r = c.Get("/v1/jobs/" + std::to_string(id) + "/logs?task=0");
    for (int i = 0; i < 100 && r && r->status == 200 && !complete(r->body); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      r = c.Get("/v1/jobs/" + std::to_string(id) + "/logs?task=0");
    }
    if (!r || r->status != 200) {
      std::fprintf(stderr, "job %llu: no log (%d)\n", static_cast<unsigned long long>(id),
                   r ? r->status : 0);
      return false;
    }
    long long ns = 0;
    std::string gpu;
    for (size_t at = 0; at < r->body.size();) {
      const size_t end = r->body.find('\n', at);
      const std::string line = r->body.substr(at, end == std::string::npos ? end : end - at);
      if (!line.empty() && line.find_first_not_of("0123456789") == std::string::npos) {
        ns = std::stoll(line);
      } else if (line.rfind("gpu ", 0) == 0) {
        gpu = line.substr(4);
      }
      at = end == std::string::npos ? r->body.size() : end + 1;
    }
    std::lock_guard<std::mutex> lock(mu_);
    Sample& s = samples_[id];
    s.ran = ns / 1000;
    s.gpu = gpu;
    if (ns <= 0 || s.decided <= 0) {
      std::fprintf(stderr, "job %llu: log '%s', decided at %lld\n",
                   static_cast<unsigned long long>(id), r->body.c_str(),
                   static_cast<long long>(s.decided));
      return false;
    }
    return true;
  }

  void Report(const char* phase, const std::vector<uint64_t>& ids) {
    std::vector<double> decision_to_exec;
    std::map<std::string, std::vector<Micros>> by_gpu;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (uint64_t id : ids) {
        const Sample& s = samples_[id];
        decision_to_exec.push_back(static_cast<double>(s.ran - s.decided) / 1000.0);
        by_gpu[s.gpu].push_back(s.ran);
      }
    }
    std::vector<double> exit_to_next;
    for (auto& [gpu, times] : by_gpu) {
      std::sort(times.begin(), times.end());
      for (size_t i = 1; i < times.size(); ++i) {
        exit_to_next.push_back(static_cast<double>(times[i] - times[i - 1]) / 1000.0);
      }
    }
    std::printf("%s (%zu jobs, %zu GPUs used):\n", phase, ids.size(), by_gpu.size());
    Print("decision -> exec", decision_to_exec);
    if (std::strcmp(phase, "backlog") == 0) {
      Print("exit -> next exec", exit_to_next);
    }
  }

 private:
  std::unique_ptr<tessera::Server> server_;
  std::unique_ptr<tessera::Agent> agent_;
  std::string token_;
  std::mutex mu_;
  std::map<uint64_t, Sample> samples_;
};

}  // namespace

int main(int argc, char** argv) {
  int jobs = 200;
  int backlog = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--jobs") == 0) {
      jobs = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--backlog") == 0) {
      backlog = std::atoi(argv[i + 1]);
    }
  }
  if (jobs < 1 || backlog < 1) {
    std::fprintf(stderr, "usage: launch_latency_bench [--jobs N] [--backlog N]\n");
    return 2;
  }
  std::string dir = "/tmp/tessera-launch-bench-XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) {
    return 1;
  }
  ::chmod(dir.c_str(), 0711);  // tasks run as the tenant's uid and must reach the agent's dir
  Bench bench;
  int rc = 0;
  if (!bench.Start(dir)) {
    std::fprintf(stderr, "the agent opened no channel stream\n");
    rc = 1;
  }
  std::vector<uint64_t> idle;
  for (int i = 0; rc == 0 && i < jobs; ++i) {
    const uint64_t id = bench.Submit();
    if (id == 0 || !bench.WaitDone(id) || !bench.Collect(id)) {
      rc = 1;
    }
    idle.push_back(id);
  }
  std::vector<uint64_t> queued;
  for (int i = 0; rc == 0 && i < backlog; ++i) {
    queued.push_back(bench.Submit());
    rc = queued.back() == 0 ? 1 : 0;
  }
  for (uint64_t id : queued) {
    if (rc == 0 && (!bench.WaitDone(id) || !bench.Collect(id))) {
      rc = 1;
    }
  }
  if (rc == 0) {
    bench.Report("idle", idle);
    bench.Report("backlog", queued);
  } else {
    std::fprintf(stderr, "a job did not run as expected\n");
  }
  bench.Stop();
  std::filesystem::remove_all(dir);
  return rc;
}
