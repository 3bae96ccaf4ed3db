// Submit-to-start throughput of the controller, durable: N trivial jobs (one fake
// GPU each) submitted over HTTP by concurrent clients to a controller whose store
// fsyncs every commit, on fake nodes with room for all of them. A job counts as
// started when its start decision is durable (the moment its launch may go to an
// agent). Prints jobs per second, the submit-to-start latency percentiles, the
// failures by cause and the kernel's TCP counters over the run (listen queue
// overflows, SYN retransmissions: a dropped connect costs a client 1 s).
//
// --batch B submits through POST /v1/jobs/batch, B jobs a request. --default-rate keeps
// the server's default per-tenant rate limit (one tenant's token for every client) and
// counts its 429s as refused rather than failed: what a burst of N jobs from one tenant
// gets through; --rate R BURST does the same under another limit.
//
// --store etcd runs the controller on an EtcdStore (as `tessera server --store etcd://`
// opens it: --max-txn-ops 10000 on both sides) instead of SQLite: on the members named by
// --etcd HOST:PORT,..., else on a 3-member cluster it starts on loopback (the test
// cluster: heartbeat 50 ms, election timeout 500 ms). --compare-stores runs the same load
// on SQLite and then on etcd and prints one table (under 20 s on 2 cores, etcd's start
// included).
// The store is not fenced here (a leader's is): one compare more per Txn.
//
// Usage: submit_bench [--jobs N] [--clients C] [--nodes M] [--batch B] [--default-rate]
//                     [--rate R BURST] [--no-fsync] [--store sqlite|etcd] [--etcd EPS]
//                     [--compare-stores]
#include <httplib.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_cluster.h"
#include "bench_util.h"
#include "server/http/server.h"
#include "store/etcd/etcd_store.h"
#include "store/etcd/testing/etcd_cluster.h"

using tessera::bench::Clock;
using tessera::bench::Percentile;

namespace {

struct Flags {
  int jobs = 10000;
  int clients = 16;
  int nodes = 1250;
  int batch = 0;  // jobs per POST /v1/jobs/batch; 0: one POST /v1/jobs each
  bool default_rate = false;
  double rate = -1, burst = -1;  // >= 0: this rate limit instead (with --default-rate)
  bool fsync = true;
  std::string store = "sqlite";  // or "etcd"
  std::string etcd;              // --etcd: members to use; "": start a cluster
  bool compare = false;          // --compare-stores
};

constexpr const char* kUsage =
    "usage: submit_bench [--jobs N] [--clients C] [--nodes M] [--batch B] [--default-rate] "
    "[--rate R BURST] [--no-fsync] [--store sqlite|etcd] [--etcd HOST:PORT,...] "
    "[--compare-stores]\n";

// False (after printing the usage) for a flag it does not know.
bool ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--jobs") == 0 && i + 1 < argc) {
      flags->jobs = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--clients") == 0 && i + 1 < argc) {
      flags->clients = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--nodes") == 0 && i + 1 < argc) {
      flags->nodes = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--batch") == 0 && i + 1 < argc) {
      flags->batch = std::max(0, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--default-rate") == 0) {
      flags->default_rate = true;
    } else if (std::strcmp(argv[i], "--rate") == 0 && i + 2 < argc) {
      flags->default_rate = true;
      flags->rate = std::atof(argv[++i]);
      flags->burst = std::atof(argv[++i]);
    } else if (std::strcmp(argv[i], "--no-fsync") == 0) {
      flags->fsync = false;
    } else if (std::strcmp(argv[i], "--store") == 0 && i + 1 < argc &&
               (std::strcmp(argv[i + 1], "sqlite") == 0 || std::strcmp(argv[i + 1], "etcd") == 0)) {
      flags->store = argv[++i];
    } else if (std::strcmp(argv[i], "--etcd") == 0 && i + 1 < argc) {
      flags->etcd = argv[++i];
    } else if (std::strcmp(argv[i], "--compare-stores") == 0) {
      flags->compare = true;
    } else {
      std::fprintf(stderr, "%s", kUsage);
      return false;
    }
  }
  return true;
}

// The kernel's TCP counters (/proc/net/snmp and /proc/net/netstat) by name.
std::map<std::string, long long> TcpCounters() {
  std::map<std::string, long long> out;
  for (const char* file : {"/proc/net/snmp", "/proc/net/netstat"}) {
    std::ifstream in(file);
    std::string names, values;
    while (std::getline(in, names) && std::getline(in, values)) {
      std::istringstream n(names), v(values);
      std::string prefix, name, value;
      n >> prefix;
      v >> value;
      while (n >> name && v >> value) {
        out[prefix + name] = std::atoll(value.c_str());
      }
    }
  }
  return out;
}

const char* const kTcpCounters[] = {"Tcp:ActiveOpens",        "Tcp:RetransSegs",
                                    "TcpExt:ListenOverflows", "TcpExt:ListenDrops",
                                    "TcpExt:TCPSynRetrans",   "TcpExt:TCPReqQFullDrop",
                                    "TcpExt:TCPTimeouts",     "Tcp:EstabResets"};

// What each client saw: job ids by index, failures by cause, refusals (429).
struct Outcome {
  std::vector<uint64_t> id_of;
  std::atomic<int> failures{0};
  std::atomic<int> refused{0};
  std::mutex mu;
  std::map<std::string, int> causes;
  std::vector<double> request_ms;
  void Fail(const std::string& cause) {
    ++failures;
    std::lock_guard<std::mutex> lock(mu);
    ++causes[cause];
  }
};

std::string JobBody(int i) {
  return R"({"name": "j)" + std::to_string(i) +
         R"(", "command": "true", "resources": {"gpus": 1, "cpu": "0.1", "memory": "64MiB"}})";
}

// Submits jobs [first, first + n) in one request; true when they were taken.
bool SubmitSome(httplib::Client& client, int first, int n, bool batch,
                std::vector<Clock::time_point>& submitted, Outcome& out) {
  std::string body;
  if (batch) {
    body = R"({"jobs": [)";
    for (int i = first; i < first + n; ++i) {
      body += (i > first ? "," : "") + JobBody(i);
    }
    body += "]}";
  } else {
    body = JobBody(first);
  }
  const auto sent = Clock::now();
  auto r = client.Post(batch ? "/v1/jobs/batch" : "/v1/jobs", body, "application/json");
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - sent).count();
  if (!r || r->status != 201) {
    if (r && r->status == 429) {
      out.refused += n;
    } else {
      out.Fail(r ? "HTTP " + std::to_string(r->status) : httplib::to_string(r.error()));
    }
    return false;
  }
  std::vector<uint64_t> ids;
  if (batch) {
    ids = nlohmann::json::parse(r->body)["ids"].get<std::vector<uint64_t>>();
  } else {
    ids.push_back(
        static_cast<uint64_t>(std::atoll(r->body.substr(r->body.find("\"id\":") + 5).c_str())));
  }
  std::lock_guard<std::mutex> lock(out.mu);
  out.request_ms.push_back(ms);
  for (size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] < submitted.size()) {
      submitted[ids[k]] = sent;
    }
    out.id_of[static_cast<size_t>(first) + k] = ids[k];
  }
  return true;
}

// Submits jobs 0..jobs-1 over `clients` concurrent keep-alive connections, recording when
// each was sent in `submitted` (by job id) and each job's id in out.id_of (0: not taken).
void SubmitAll(int port, const std::string& token, const Flags& flags,
               std::vector<Clock::time_point>& submitted, Outcome& out) {
  std::atomic<int> next{0};
  out.id_of.assign(static_cast<size_t>(flags.jobs), 0);
  const int step = std::max(flags.batch, 1);
  std::vector<std::thread> threads;
  for (int c = 0; c < flags.clients; ++c) {
    threads.emplace_back([&] {
      httplib::Client client("127.0.0.1", port);
      client.set_bearer_token_auth(token.c_str());
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      for (int i = next.fetch_add(step); i < flags.jobs; i = next.fetch_add(step)) {
        SubmitSome(client, i, std::min(step, flags.jobs - i), flags.batch > 0, submitted, out);
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
}

void PrintCauses(const Outcome& out) {
  for (const auto& [cause, count] : out.causes) {
    std::printf("  failed: %d x %s\n", count, cause.c_str());
  }
}

void PrintTcpDelta(const std::map<std::string, long long>& before,
                   const std::map<std::string, long long>& after) {
  std::printf("tcp over the run:");
  for (const char* name : kTcpCounters) {
    auto b = before.find(name);
    auto a = after.find(name);
    if (a != after.end() && b != before.end()) {
      std::printf(" %s +%lld", std::strchr(name, ':') + 1, a->second - b->second);
    }
  }
  std::printf("\n");
}

// One run's figures.
struct Result {
  std::string store;
  int expected = 0, started = 0, failures = 0, refused = 0;
  bool timed_out = false;
  double submit_s = 0, total_s = 0;
  size_t measured = 0;  // jobs with both times
  double p50 = 0, p90 = 0, p99 = 0, max = 0, request_p50 = 0, request_p99 = 0;
  uint64_t txns = 0;  // etcd: write Txns (group commit); 0 on SQLite
  bool ok() const { return failures == 0 && started >= expected && !timed_out; }
};

using OpenStoreFn = std::function<tessera::StatusOr<std::unique_ptr<tessera::Store>>()>;

// The load of `flags` on a controller whose store `open_store` opens (unset: SQLite in a
// scratch directory); prints its figures as it goes. False when the controller did not run.
bool RunLoad(const Flags& flags, const std::string& store_name, const OpenStoreFn& open_store,
             const std::function<uint64_t()>& txns, Result* result) {
  const int jobs = flags.jobs, clients = flags.clients, nodes = flags.nodes;
  char tmpl[] = "/tmp/tessera-submit-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    return false;
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
  o.open_store = open_store;
  if (!flags.default_rate) {
    o.rate_per_second = 0;  // no limit
  } else if (flags.rate >= 0) {
    o.rate_per_second = flags.rate;
    o.rate_burst = flags.burst;
  }
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
    std::filesystem::remove_all(dir);
    return false;
  }
  if (!(*server)->Start().ok() ||
      !tessera::bench::RegisterFakeNodes((*server)->controller(), nodes, 8)) {
    std::fprintf(stderr, "the controller did not start\n");
    server->reset();
    std::filesystem::remove_all(dir);
    return false;
  }
  const std::string limit = !flags.default_rate
                                ? std::string("off")
                                : std::to_string(int(o.rate_per_second)) + "/s, burst " +
                                      std::to_string(int(o.rate_burst)) +
                                      (flags.rate < 0 ? " (the default)" : "");
  const std::string grouping =
      flags.batch > 0 ? "batches of " + std::to_string(flags.batch) : "one job a request";
  std::printf("controller on %s: %d fake nodes x 8 GPUs, store %s, %s, rate limit %s\n",
              (*server)->url().c_str(), nodes, store_name.c_str(), grouping.c_str(), limit.c_str());

  const uint64_t txns_before = txns ? txns() : 0;
  const std::string admin = (*server)->admin_token();
  Outcome out;
  const auto tcp_before = TcpCounters();
  const auto t0 = Clock::now();
  SubmitAll((*server)->port(), admin, flags, submitted, out);
  const auto t_submitted = Clock::now();
  const int expected = jobs - out.failures.load() * std::max(flags.batch, 1) - out.refused.load();
  const auto deadline = Clock::now() + std::chrono::seconds(300);
  while (started_count.load() < expected && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const auto t_end = Clock::now();
  const auto tcp_after = TcpCounters();
  std::vector<double> latency_ms;
  Clock::time_point last = t0;
  for (uint64_t id : out.id_of) {
    if (id != 0 && started[id] != Clock::time_point{}) {
      latency_ms.push_back(
          std::chrono::duration<double, std::milli>(started[id] - submitted[id]).count());
      last = std::max(last, started[id]);
    }
  }
  Result& r = *result;
  r.store = store_name;
  r.expected = expected;
  r.started = started_count.load();
  r.failures = out.failures.load();
  r.refused = out.refused.load();
  r.timed_out = t_end >= deadline;
  r.submit_s = std::chrono::duration<double>(t_submitted - t0).count();
  r.total_s = std::chrono::duration<double>(last - t0).count();
  r.measured = latency_ms.size();
  r.p50 = Percentile(latency_ms, 0.5);
  r.p90 = Percentile(latency_ms, 0.9);
  r.p99 = Percentile(latency_ms, 0.99);
  r.max = Percentile(latency_ms, 1.0);
  r.request_p50 = Percentile(out.request_ms, 0.5);
  r.request_p99 = Percentile(out.request_ms, 0.99);
  r.txns = txns ? txns() - txns_before : 0;
  std::printf(
      "jobs submitted: %d (%d requests failed, %d jobs refused by the rate limit = %.1f%%), "
      "started: %d%s\n",
      expected, r.failures, r.refused, 100.0 * r.refused / std::max(jobs, 1), r.started,
      r.timed_out ? " (TIMED OUT)" : "");
  PrintCauses(out);
  std::printf("submit phase: %.2f s = %.0f jobs/s acknowledged (durable)\n", r.submit_s,
              expected / r.submit_s);
  std::printf("submit-to-start: %.2f s for all = %.0f jobs/s\n", r.total_s,
              static_cast<double>(r.measured) / r.total_s);
  std::printf("latency submit->durable start: p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms\n",
              r.p50, r.p90, r.p99, r.max);
  std::printf("request round trip: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", r.request_p50,
              r.request_p99, Percentile(out.request_ms, 1.0));
  if (txns) {
    // Each job is written twice (submitted, started): group commit shares the Txns.
    std::printf("etcd write Txns: %llu (%.1f job writes a Txn)\n",
                static_cast<unsigned long long>(r.txns),
                r.txns > 0 ? 2.0 * expected / static_cast<double>(r.txns) : 0.0);
  }
  PrintTcpDelta(tcp_before, tcp_after);
  (*server)->Stop();
  server->reset();
  std::filesystem::remove_all(dir);
  return true;
}

std::vector<std::string> SplitEndpoints(const std::string& endpoints) {
  std::vector<std::string> out;
  for (size_t begin = 0; begin <= endpoints.size();) {
    size_t end = endpoints.find(',', begin);
    end = end == std::string::npos ? endpoints.size() : end;
    if (end > begin) {
      out.push_back(endpoints.substr(begin, end - begin));
    }
    begin = end + 1;
  }
  return out;
}

// The EtcdStore as `tessera server --store etcd://EPS` opens it, under a prefix of this
// process's own (an empty store on a cluster used before); `last` is set to the store.
OpenStoreFn EtcdOpener(const std::string& endpoints, tessera::EtcdStore** last) {
  return [endpoints, last]() -> tessera::StatusOr<std::unique_ptr<tessera::Store>> {
    tessera::EtcdStoreOptions o;
    o.endpoints = SplitEndpoints(endpoints);
    o.prefix = "/submit-bench/" + std::to_string(getpid()) + "/";
    o.max_txn_ops = 10000;  // the cluster's --max-txn-ops, as `tessera server` sets it
    auto store = tessera::EtcdStore::Open(std::move(o));
    if (!store.ok()) {
      return store.status();
    }
    *last = store->get();
    return std::unique_ptr<tessera::Store>(std::move(store).value());
  };
}

void PrintTable(const Flags& flags, const std::vector<Result>& results) {
  std::printf(
      "\n%d jobs, %d clients, %s, %d nodes x 8 GPUs:\n", flags.jobs, flags.clients,
      flags.batch > 0 ? ("batches of " + std::to_string(flags.batch)).c_str() : "one job a request",
      flags.nodes);
  std::printf("%-18s %12s %12s %9s %9s %9s %4s\n", "store", "submit j/s", "to-start j/s", "p50 ms",
              "p99 ms", "max ms", "ok");
  for (const Result& r : results) {
    std::printf("%-18s %12.0f %12.0f %9.1f %9.1f %9.1f %4s\n", r.store.c_str(),
                r.expected / r.submit_s, static_cast<double>(r.measured) / r.total_s, r.p50, r.p99,
                r.max, r.ok() ? "yes" : "NO");
  }
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) {
    return 2;
  }
  const bool need_etcd = flags.compare || flags.store == "etcd";
  std::unique_ptr<tessera::testing::EtcdCluster> cluster;
  std::string endpoints = flags.etcd;
  if (need_etcd && endpoints.empty()) {
    const auto t = Clock::now();
    auto started = tessera::testing::EtcdCluster::Start();
    if (!started.ok()) {
      std::fprintf(stderr, "%s\n", started.status().ToString().c_str());
      return 1;
    }
    cluster = std::move(started).value();
    endpoints = cluster->Endpoints();
    std::printf("etcd: 3 members on loopback (%s), started in %.1f s\n", endpoints.c_str(),
                std::chrono::duration<double>(Clock::now() - t).count());
  }
  std::vector<Result> results;
  bool ran = true;
  if (flags.compare || flags.store == "sqlite") {
    Result& r = results.emplace_back();
    ran = RunLoad(flags, std::string("sqlite, fsync ") + (flags.fsync ? "on" : "off"), nullptr,
                  nullptr, &r);
  }
  if (flags.compare || flags.store == "etcd") {
    if (flags.compare) {
      std::printf("\n");
    }
    tessera::EtcdStore* store = nullptr;
    Result& r = results.emplace_back();
    const std::string name =
        "etcd, " + std::to_string(SplitEndpoints(endpoints).size()) + " members";
    const auto txns = [&store] { return store != nullptr ? store->txns() : 0; };
    ran = RunLoad(flags, name, EtcdOpener(endpoints, &store), txns, &r) && ran;
  }
  if (flags.compare && ran) {
    PrintTable(flags, results);
  }
  if (!ran) {
    return 1;
  }
  for (const Result& r : results) {
    if (!r.ok()) {
      return 1;
    }
  }
  return 0;
}
