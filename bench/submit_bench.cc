// Submit-to-start throughput of the controller, durable: N trivial jobs (one fake
// GPU each) submitted over HTTP by concurrent clients to a controller whose store
// fsyncs every commit, on fake nodes with room for all of them. A job counts as
// started when its start decision is durable (the moment its launch may go to an
// agent). Prints jobs per second and the submit-to-start latency percentiles.
//
// Usage: submit_bench [--jobs N] [--clients C] [--nodes M] [--no-fsync]
#include <httplib.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench_cluster.h"
#include "bench_util.h"
#include "server/server.h"

using tessera::bench::Clock;
using tessera::bench::Percentile;

namespace {

struct Flags {
  int jobs = 10000;
  int clients = 16;
  int nodes = 1250;
  bool fsync = true;
};

// False (after printing the usage) for a flag it does not know.
bool ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--jobs") == 0 && i + 1 < argc) {
      flags->jobs = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--clients") == 0 && i + 1 < argc) {
      flags->clients = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--nodes") == 0 && i + 1 < argc) {
      flags->nodes = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--no-fsync") == 0) {
      flags->fsync = false;
    } else {
      std::fprintf(stderr,
                   "usage: submit_bench [--jobs N] [--clients C] [--nodes M] [--no-fsync]\n");
      return false;
    }
  }
  return true;
}

// Submits jobs 0..jobs-1 over `clients` concurrent keep-alive connections, recording when
// each was sent in `submitted` (by job id). Returns the job id of each (0: refused).
std::vector<uint64_t> SubmitAll(int port, const std::string& token, int jobs, int clients,
                                std::vector<Clock::time_point>& submitted,
                                std::atomic<int>& failures) {
  std::atomic<int> next{0};
  std::vector<uint64_t> id_of(static_cast<size_t>(jobs));
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      httplib::Client client("127.0.0.1", port);
      client.set_bearer_token_auth(token.c_str());
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      for (int i = next++; i < jobs; i = next++) {
        const std::string body =
            R"({"name": "j)" + std::to_string(i) +
            R"(", "command": "true", "resources": {"gpus": 1, "cpu": "0.1", "memory": "64MiB"}})";
        const auto sent = Clock::now();
        auto r = client.Post("/v1/jobs", body, "application/json");
        if (!r || r->status != 201) {
          ++failures;
          continue;
        }
        const uint64_t id =
            static_cast<uint64_t>(std::atoll(r->body.substr(r->body.find("\"id\":") + 5).c_str()));
        if (id < submitted.size()) {
          submitted[id] = sent;
        }
        id_of[static_cast<size_t>(i)] = id;
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  return id_of;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) {
    return 2;
  }
  const int jobs = flags.jobs, clients = flags.clients, nodes = flags.nodes;
  char tmpl[] = "/tmp/tessera-submit-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    return 1;
  }
  const std::string dir = tmpl;
  const tessera::GpuCatalog& catalog = tessera::GpuCatalog::Default();

  std::vector<Clock::time_point> submitted(static_cast<size_t>(jobs) + 2);
  std::vector<Clock::time_point> started(static_cast<size_t>(jobs) + 2);
  std::atomic<int> started_count{0};

  tessera::ServerOptions o;
  o.data_dir = dir;
  o.port = 0;
  o.fsync = flags.fsync;
  o.threads = clients + 4;
  o.rate_per_second = 0;  // no limit
  o.controller.node_timeout = 3600LL * 1'000'000;
  o.controller.policy = "fifo";
  o.controller.on_started = [&](tessera::JobNumber number, tessera::Micros) {
    const uint64_t job = number.value();
    if (job < started.size()) {
      started[job] = Clock::now();
      ++started_count;
    }
  };
  o.queues_yaml = "queues:\n  - name: default\n";
  auto server = tessera::Server::Create(o, catalog);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  if (!(*server)->Start().ok()) {
    return 1;
  }
  if (!tessera::bench::RegisterFakeNodes((*server)->controller(), nodes, 8)) {
    return 1;
  }
  std::printf("controller on %s: %d fake nodes x 8 GPUs, store fsync %s\n",
              (*server)->url().c_str(), nodes, flags.fsync ? "on" : "off");

  const std::string admin = (*server)->admin_token();
  std::atomic<int> failures{0};
  const auto t0 = Clock::now();
  const std::vector<uint64_t> id_of =
      SubmitAll((*server)->port(), admin, jobs, clients, submitted, failures);
  const auto t_submitted = Clock::now();
  const int expected = jobs - failures.load();
  const auto deadline = Clock::now() + std::chrono::seconds(300);
  while (started_count.load() < expected && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const auto t_end = Clock::now();
  std::vector<double> latency_ms;
  Clock::time_point last = t0;
  for (uint64_t id : id_of) {
    if (id != 0 && started[id] != Clock::time_point{}) {
      latency_ms.push_back(std::chrono::duration<double, std::milli>(started[id] - submitted[id]).count());
      last = std::max(last, started[id]);
    }
  }
  const double submit_s = std::chrono::duration<double>(t_submitted - t0).count();
  const double total_s = std::chrono::duration<double>(last - t0).count();
  std::printf("jobs submitted: %d (%d failed), started: %d%s\n", expected, failures.load(),
              started_count.load(), t_end >= deadline ? " (TIMED OUT)" : "");
  std::printf("submit phase: %.2f s = %.0f submissions/s (acknowledged once durable)\n", submit_s,
              expected / submit_s);
  std::printf("submit-to-start: %.2f s for all = %.0f jobs/s\n", total_s,
              static_cast<double>(latency_ms.size()) / total_s);
  std::printf("latency submit->durable start: p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms\n",
              Percentile(latency_ms, 0.5), Percentile(latency_ms, 0.9), Percentile(latency_ms, 0.99),
              Percentile(latency_ms, 1.0));
  (*server)->Stop();
  server->reset();
  std::filesystem::remove_all(dir);
  return failures.load() == 0 && started_count.load() >= expected ? 0 : 1;
}
