// API reads while the scheduler cycles over a large backlog: a controller and its HTTP
// server in process on loopback, 16 fake nodes of 8 GPUs filled by 128 running jobs, and
// N pending one-GPU jobs (default 100,000) that cannot start, so that every cycle walks
// the whole backlog. A tenant then reads, every 10 ms on one keep-alive connection,
// GET /v1/jobs (its first page of 100) and GET /v1/jobs/{id}, for S seconds each; the
// scheduling loop runs all the while. Prints the read latency percentiles and the
// cycles' count and mean duration over each phase (from /metrics). Bounded: the
// submissions (about N / 5,000 s) plus 2 S.
//
// Usage: read_during_cycles_bench [--pending N] [--seconds S]
#include <httplib.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_cluster.h"
#include "bench_util.h"
#include "server/http/server.h"

namespace {

using tessera::bench::Clock;
using tessera::bench::Percentile;

// tessera_scheduler_cycles_total and the cycle-duration histogram's _sum, from /metrics.
struct CycleCounters {
  double cycles = 0;
  double seconds = 0;
};

CycleCounters ReadCycles(int port, const std::string& token) {
  httplib::Client c("127.0.0.1", port);
  c.set_bearer_token_auth(token.c_str());
  CycleCounters out;
  httplib::Result r = c.Get("/metrics");
  if (!r || r->status != 200) {
    return out;
  }
  std::istringstream lines(r->body);
  for (std::string line; std::getline(lines, line);) {
    auto value = [&] { return std::atof(line.substr(line.rfind(' ') + 1).c_str()); };
    if (line.rfind("tessera_scheduler_cycles_total ", 0) == 0) {
      out.cycles = value();
    } else if (line.rfind("tessera_scheduler_cycle_duration_seconds_sum ", 0) == 0) {
      out.seconds = value();
    }
  }
  return out;
}

void Phase(const char* name, int port, const std::string& token, const std::string& path,
           const std::string& admin, double seconds) {
  httplib::Client c("127.0.0.1", port);
  c.set_bearer_token_auth(token.c_str());
  c.set_keep_alive(true);
  c.set_tcp_nodelay(true);
  c.set_read_timeout(30, 0);
  const CycleCounters before = ReadCycles(port, admin);
  std::vector<double> ms;
  int errors = 0;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  auto next = Clock::now();
  while (Clock::now() < end) {
    const auto t0 = Clock::now();
    httplib::Result r = c.Get(path);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    errors += (!r || r->status != 200) ? 1 : 0;
    next += std::chrono::milliseconds(10);
    std::this_thread::sleep_until(next);
  }
  const CycleCounters after = ReadCycles(port, admin);
  const double cycles = after.cycles - before.cycles;
  std::printf(
      "%-28s n=%4zu errors=%d  p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms;"
      "  %4.0f cycles, mean %.2f ms\n",
      name, ms.size(), errors, Percentile(ms, 0.5), Percentile(ms, 0.99), Percentile(ms, 1.0),
      cycles, cycles > 0 ? 1000.0 * (after.seconds - before.seconds) / cycles : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  int pending = 100000;
  double seconds = 10;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--pending") == 0 && i + 1 < argc) {
      pending = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      seconds = std::max(1.0, std::min(60.0, std::atof(argv[++i])));
    } else {
      std::fprintf(stderr, "usage: read_during_cycles_bench [--pending N] [--seconds S]\n");
      return 2;
    }
  }
  char tmpl[] = "/tmp/tessera-read-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    return 1;
  }
  const std::string dir = tmpl;
  const tessera::GpuCatalog& catalog = tessera::GpuCatalog::Default();
  tessera::ServerOptions o;
  o.data_dir = dir;
  o.port = 0;
  o.fsync = false;        // reads are measured; the backlog is set up beforehand
  o.rate_per_second = 0;  // the setup submits as fast as it can
  o.controller.node_timeout = 3600LL * 1'000'000;
  auto server = tessera::Server::Create(o, catalog);
  if (!server.ok() || !(*server)->Start().ok()) {
    std::fprintf(stderr, "cannot start the server\n");
    return 1;
  }
  tessera::Server& s = **server;
  constexpr int kNodes = 16;
  if (!tessera::bench::RegisterFakeNodes(s.controller(), kNodes, 8)) {
    return 1;
  }
  const std::string token = s.CreateTenantToken("team-a", "a").value();
  const std::string admin = s.admin_token();
  const int total = kNodes * 8 + pending;  // the first 128 fill every GPU and keep running
  std::atomic<int> next{0}, failures{0};
  std::atomic<uint64_t> last_id{0};
  const auto t0 = Clock::now();
  {
    std::vector<std::thread> clients;
    for (int c = 0; c < 4; ++c) {
      clients.emplace_back([&] {
        httplib::Client client("127.0.0.1", s.port());
        client.set_bearer_token_auth(token.c_str());
        client.set_keep_alive(true);
        client.set_tcp_nodelay(true);
        for (int i = next++; i < total; i = next++) {
          const std::string body =
              R"({"name": "j", "command": "true", "resources": {"gpus": 1, "cpu": "0.1"}})";
          httplib::Result r = client.Post("/v1/jobs", body, "application/json");
          if (!r || r->status != 201) {
            ++failures;
            continue;
          }
          const uint64_t id = static_cast<uint64_t>(
              std::atoll(r->body.substr(r->body.find("\"id\":") + 5).c_str()));
          uint64_t seen = last_id.load();
          while (id > seen && !last_id.compare_exchange_weak(seen, id)) {
          }
        }
      });
    }
    for (std::thread& t : clients) {
      t.join();
    }
  }
  const double setup_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::this_thread::sleep_for(std::chrono::seconds(1));  // the backlog's first cycles
  auto count = [&](const char* state) {
    httplib::Client c("127.0.0.1", s.port());
    c.set_bearer_token_auth(admin.c_str());
    size_t n = 0;
    std::string after;
    for (;;) {
      httplib::Result r = c.Get(std::string("/v1/jobs?limit=1000&state=") + state +
                                (after.empty() ? "" : "&after=" + after));
      if (!r || r->status != 200) {
        return n;
      }
      const nlohmann::json page = nlohmann::json::parse(r->body);
      n += page["jobs"].size();
      if (page["next"].is_null()) {
        return n;
      }
      after = page["next"].get<std::string>();
    }
  };
  const size_t running = count("running");
  const size_t waiting = count("pending");
  std::printf(
      "%d fake nodes x 8 GPUs; %zu jobs running, %zu pending (%d submissions "
      "failed; submitted in %.1f s); %.0f s a phase; resident memory %.1f MiB\n",
      kNodes, running, waiting, failures.load(), setup_s, seconds, tessera::bench::RssMib());
  Phase("GET /v1/jobs (page of 100)", s.port(), token, "/v1/jobs", admin, seconds);
  Phase("GET /v1/jobs/{id}", s.port(), token, "/v1/jobs/" + std::to_string(last_id.load()), admin,
        seconds);
  server->reset();
  std::filesystem::remove_all(dir);
  return failures.load() == 0 ? 0 : 1;
}
