// The controller against a fleet of simulated agents (e2e/agent_fleet.h): for each
// fleet size, a real `tesserad server` child process on loopback (its own store, fsync
// on unless --no-fsync) and N agents of 8 fake GPUs in this process, each with its own
// stream on the agent channel at the controller's default heartbeat. Per size:
//
//   join           from the fleet's start until all N registered (join token, first
//                  time) and opened their streams
//   steady window  --steady-s seconds: the controller's CPU (utime + stime from
//                  /proc/PID/stat, % of one core) and RSS (VmRSS) at its end; GET
//                  /healthz and GET /v1/jobs (a page of 100) each 4 times a second from
//                  a client thread of their own; every heartbeat's round trip (write to
//                  answer) across the agents; heartbeats answered per second
//   throughput     --jobs one-GPU jobs that run for no time, in POST /v1/jobs/batch
//                  requests of 500: jobs/s from the first submit until the agents had
//                  started all of them, and until every end was acknowledged (recorded)
//   restart        kill -9 of the controller (--sigterm: SIGTERM), then the same command
//                  on the same store and ports: seconds from the restart until all N
//                  agents had registered again and reopened their streams, and the CPU
//                  seconds the new controller spent until then
//
// The bench raises its RLIMIT_NOFILE to the hard limit before it starts the controller,
// which inherits it: both ends hold a socket per agent. Every wait is bounded; a size
// that fails prints why and the next one runs. --perf records the controller (perf
// record --call-graph dwarf) while the agents join, during the steady window and while
// they register again, into the run's directory, which is then kept.
//
// Usage: agent_scale_bench [--agents 100,1000,10000] [--steady-s 20] [--jobs 2000]
//                          [--register-clients 8] [--heartbeat-ms MS] [--telemetry-ms 1000]
//                          [--sigterm] [--no-fsync] [--perf]
// --heartbeat-ms overrides the controller's interval, as `tessera agent --heartbeat` does.
#include <httplib.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "e2e/agent_fleet.h"
#include "e2e/process.h"

using tessera::bench::Clock;
using tessera::bench::Percentile;
using tessera::e2e::Process;
using tessera::e2e::WaitFor;

namespace {

using nlohmann::json;
using namespace std::chrono_literals;

struct Flags {
  std::vector<int> agents = {100, 1000, 10000};
  int steady_s = 20;
  int jobs = 2000;
  int register_clients = 8;
  int telemetry_ms = 1000;
  int heartbeat_ms = 0;  // 0: the controller's default
  bool sigterm = false;
  bool fsync = true;
  bool perf = false;
};

constexpr const char* kUsage =
    "usage: agent_scale_bench [--agents 100,1000,10000] [--steady-s S] [--jobs N] "
    "[--register-clients C] [--heartbeat-ms MS] [--telemetry-ms MS] [--sigterm] [--no-fsync] "
    "[--perf]\n";

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool more = i + 1 < argc;
    if (a == "--agents" && more) {
      f->agents.clear();
      std::stringstream list(argv[++i]);
      for (std::string n; std::getline(list, n, ',');) {
        f->agents.push_back(std::atoi(n.c_str()));
      }
    } else if (a == "--steady-s" && more) {
      f->steady_s = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--jobs" && more) {
      f->jobs = std::max(0, std::atoi(argv[++i]));
    } else if (a == "--register-clients" && more) {
      f->register_clients = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--heartbeat-ms" && more) {
      f->heartbeat_ms = std::max(0, std::atoi(argv[++i]));
    } else if (a == "--telemetry-ms" && more) {
      f->telemetry_ms = std::max(0, std::atoi(argv[++i]));
    } else if (a == "--sigterm") {
      f->sigterm = true;
    } else if (a == "--no-fsync") {
      f->fsync = false;
    } else if (a == "--perf") {
      f->perf = true;
    } else {
      std::fprintf(stderr, "%s", kUsage);
      return false;
    }
  }
  return true;
}

double Seconds(Clock::time_point from, Clock::time_point to = Clock::now()) {
  return std::chrono::duration<double>(to - from).count();
}

// utime + stime of a process in seconds (/proc/PID/stat fields 14 and 15).
double CpuSeconds(pid_t pid) {
  const std::string stat = Process::ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) {
    return 0;
  }
  std::istringstream rest(stat.substr(paren + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i >= 14) {
      ticks += std::atof(field.c_str());
    }
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// A line of /proc/PID/status or /proc/PID/limits that starts with `key`, or "".
std::string ProcLine(pid_t pid, const std::string& file, const std::string& key) {
  std::istringstream in(Process::ReadFile("/proc/" + std::to_string(pid) + "/" + file));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) == 0) {
      return line;
    }
  }
  return "";
}

double RssMib(pid_t pid) {
  const std::string line = ProcLine(pid, "status", "VmRSS:");
  return line.empty() ? 0 : std::atof(line.c_str() + 6) / 1024.0;
}

// The value of the first sample of `name` in a Prometheus text exposition; 0 if none.
double Metric(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name, 0) == 0 && line.size() > name.size() &&
        (line[name.size()] == ' ' || line[name.size()] == '{')) {
      return std::atof(line.c_str() + line.rfind(' ') + 1);
    }
  }
  return 0;
}

// The samples of a histogram family above `le` (its +Inf bucket less that bucket).
double Above(const std::string& text, const std::string& family, const std::string& le) {
  return Metric(text, family + "_bucket{le=\"+Inf\"}") -
         Metric(text, family + "_bucket{le=\"" + le + "\"}");
}

double SelfCpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct Row {
  int agents = 0;
  std::string failed;  // why the size did not finish; "" when it did
  double join_s = 0;
  double cpu_pct = 0, rss_mib = 0, fleet_cpu_pct = 0;
  double healthz_p50 = 0, healthz_p99 = 0, jobs_p50 = 0, jobs_p99 = 0;
  double hb_p50 = 0, hb_p99 = 0, hb_per_s = 0;
  double cycles_per_s = 0, cycle_ms = 0;  // the scheduling loop over the steady window
  double start_jobs_s = 0, done_jobs_s = 0;
  double healthy_s = 0, reregister_s = 0, reregister_cpu_s = 0;
  tessera::fleet::FleetStats stats;
};

class Run {
 public:
  Run(const Flags& flags, int agents) : flags_(flags) { row_.agents = agents; }

  Row Go() {
    char tmpl[] = "/tmp/tessera-scale-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      row_.failed = "cannot make a scratch directory";
      return row_;
    }
    dir_ = tmpl;
    std::ofstream(dir_ + "/queues.yaml") << "queues:\n  - name: default\n";
    port_ = tessera::e2e::FreePort();
    agent_port_ = tessera::e2e::FreePort();
    url_ = "http://127.0.0.1:" + std::to_string(port_);
    if (Steps()) {
      std::printf("  %d agents: FAILED: %s (kept %s)\n", row_.agents, row_.failed.c_str(),
                  dir_.c_str());
    }
    if (fleet_ != nullptr) {
      row_.stats = fleet_->Stats();
      fleet_->Stop();
    }
    if (server_ != nullptr && server_->running()) {
      server_->Signal(SIGTERM);
      if (!server_->Wait(30s)) {
        std::printf("  the controller did not stop within 30 s of SIGTERM; killed\n");
      }
    }
    if (row_.failed.empty() && !flags_.perf) {
      std::filesystem::remove_all(dir_);
    }
    return row_;
  }

 private:
  bool Fail(const std::string& why) {
    row_.failed = why;
    return true;
  }

  bool StartServer() {
    std::vector<std::string> argv = {TESSERAD_BINARY, "server",
                                     "--data",        dir_ + "/server",
                                     "--listen",      "127.0.0.1:" + std::to_string(port_),
                                     "--agent-port",  std::to_string(agent_port_),
                                     "--queues",      dir_ + "/queues.yaml"};
    if (!flags_.fsync) {
      argv.push_back("--no-fsync");
    }
    server_ = std::make_unique<Process>(argv, dir_ + "/server.log");
    return WaitFor(
        [&] {
          httplib::Client c(url_);
          c.set_connection_timeout(0, 200'000);
          auto r = c.Get("/healthz");
          return r && r->status == 200;
        },
        60s);
  }

  // `perf record --call-graph dwarf` of the controller for `seconds` (or until it gets
  // SIGINT), into DIR/perf-N-WHAT.data.
  std::unique_ptr<Process> Perf(const std::string& what, int seconds) {
    if (!flags_.perf) {
      return nullptr;
    }
    const std::string out = dir_ + "/perf-" + std::to_string(row_.agents) + "-" + what + ".data";
    return std::make_unique<Process>(
        std::vector<std::string>{"/usr/bin/perf", "record", "-F", "199", "--call-graph",
                                 "dwarf,16384", "-p", std::to_string(server_->pid()), "-o", out,
                                 "--", "sleep", std::to_string(seconds)},
        dir_ + "/perf.log");
  }

  // True when the step failed (row_.failed says why).
  bool Steps() {
    const int n = row_.agents;
    if (!StartServer()) {
      return Fail("the controller did not answer /healthz within 60 s");
    }
    std::printf("  %d agents: controller pid %d, %s\n", n, server_->pid(),
                ProcLine(server_->pid(), "limits", "Max open files").c_str());
    admin_ = tessera::e2e::Trim(Process::ReadFile(dir_ + "/server/admin.token"));
    tessera::fleet::FleetOptions o;
    o.server_url = url_;
    o.join_token = tessera::e2e::Trim(Process::ReadFile(dir_ + "/server/join.token"));
    o.agents = n;
    o.register_clients = flags_.register_clients;
    o.telemetry_interval = flags_.telemetry_ms * 1000;
    o.heartbeat_interval = flags_.heartbeat_ms * 1000;
    auto made = tessera::fleet::AgentFleet::Create(o, tessera::GpuCatalog::Default());
    if (!made.ok()) {
      return Fail(made.status().ToString());
    }
    fleet_ = std::move(made).value();
    const auto joined_from = Clock::now();
    const auto join_bound = std::chrono::milliseconds(60'000 + 30 * n);
    auto perf = Perf("join", 60);
    fleet_->Start();
    const bool joined = WaitFor([&] { return fleet_->Stats().streaming == n; }, join_bound);
    if (perf != nullptr) {
      perf->Signal(SIGINT);
      (void)perf->Wait(30s);
    }
    if (!joined) {
      return Fail(std::to_string(fleet_->Stats().streaming) + " of " + std::to_string(n) +
                  " agents streaming after " + std::to_string(join_bound.count() / 1000) + " s");
    }
    row_.join_s = Seconds(joined_from);
    std::printf("  %d agents: all registered and streaming in %.1f s\n", n, row_.join_s);
    std::fflush(stdout);
    std::this_thread::sleep_for(2s);  // past the first telemetry and the last joins' cycles
    Steady();
    if (flags_.jobs > 0 && Throughput()) {
      return true;
    }
    return Restart();
  }

  void Steady() {
    auto perf = Perf("steady", flags_.steady_s);
    fleet_->heartbeat_rtt().Reset();
    const uint64_t hb0 = fleet_->Stats().heartbeats;
    const std::string metrics0 = Metrics();
    const double cpu0 = CpuSeconds(server_->pid());
    const double self0 = SelfCpuSeconds();
    const auto t0 = Clock::now();
    std::atomic<bool> stop{false};
    std::vector<double> healthz_ms, jobs_ms;
    std::thread prober([&] {
      httplib::Client health(url_), jobs(url_);
      for (httplib::Client* c : {&health, &jobs}) {
        c->set_keep_alive(true);
        c->set_connection_timeout(2, 0);
        c->set_read_timeout(30, 0);
      }
      jobs.set_bearer_token_auth(admin_.c_str());
      auto next = Clock::now();
      for (int i = 0; !stop; ++i) {
        next += 125ms;
        const auto sent = Clock::now();
        auto r = i % 2 == 0 ? health.Get("/healthz") : jobs.Get("/v1/jobs");
        const double ms = Seconds(sent) * 1000;
        (i % 2 == 0 ? healthz_ms : jobs_ms).push_back(r && r->status == 200 ? ms : 1e9);
        std::this_thread::sleep_until(next);
      }
    });
    std::this_thread::sleep_for(std::chrono::seconds(flags_.steady_s));
    const double window = Seconds(t0);
    row_.cpu_pct = (CpuSeconds(server_->pid()) - cpu0) / window * 100;
    row_.fleet_cpu_pct = (SelfCpuSeconds() - self0) / window * 100;
    row_.hb_per_s = static_cast<double>(fleet_->Stats().heartbeats - hb0) / window;
    row_.hb_p50 = fleet_->heartbeat_rtt().PercentileMs(0.5);
    row_.hb_p99 = fleet_->heartbeat_rtt().PercentileMs(0.99);
    stop = true;
    prober.join();
    const std::string metrics1 = Metrics();
    const char* kCycles = "tessera_scheduler_cycles_total";
    const char* kCycleSum = "tessera_scheduler_cycle_duration_seconds_sum";
    const char* kCycleCount = "tessera_scheduler_cycle_duration_seconds_count";
    row_.cycles_per_s = (Metric(metrics1, kCycles) - Metric(metrics0, kCycles)) / window;
    const double count = Metric(metrics1, kCycleCount) - Metric(metrics0, kCycleCount);
    row_.cycle_ms =
        count > 0 ? (Metric(metrics1, kCycleSum) - Metric(metrics0, kCycleSum)) / count * 1000 : 0;
    row_.rss_mib = RssMib(server_->pid());
    row_.healthz_p50 = Percentile(healthz_ms, 0.5);
    row_.healthz_p99 = Percentile(healthz_ms, 0.99);
    row_.jobs_p50 = Percentile(jobs_ms, 0.5);
    row_.jobs_p99 = Percentile(jobs_ms, 0.99);
    if (perf != nullptr) {
      (void)perf->Wait(30s);
    }
  }

  std::string Metrics() {
    httplib::Client c(url_);
    c.set_bearer_token_auth(admin_.c_str());
    c.set_read_timeout(30, 0);
    auto r = c.Get("/metrics");
    return r && r->status == 200 ? r->body : "";
  }

  // True when it failed.
  bool Throughput() {
    const tessera::fleet::FleetStats base = fleet_->Stats();
    const auto t0 = Clock::now();
    httplib::Client c(url_);
    c.set_bearer_token_auth(admin_.c_str());
    c.set_read_timeout(60, 0);
    for (int sent = 0; sent < flags_.jobs;) {
      json jobs = json::array();
      for (int i = 0; i < 500 && sent < flags_.jobs; ++i, ++sent) {
        jobs.push_back({{"name", "scale-" + std::to_string(sent)},
                        {"queue", "default"},
                        {"command", {"true"}},
                        {"resources", {{"gpus", 1}, {"cpu", "0.1"}, {"memory", "64MiB"}}}});
      }
      auto r = c.Post("/v1/jobs/batch", json{{"jobs", jobs}}.dump(), "application/json");
      if (!r || r->status != 201) {
        return Fail("a batch was refused: " + (r ? std::to_string(r->status) + " " + r->body
                                                 : httplib::to_string(r.error())));
      }
    }
    const auto want = static_cast<uint64_t>(flags_.jobs);
    if (!WaitFor([&] { return fleet_->Stats().tasks_started - base.tasks_started >= want; },
                 120s)) {
      return Fail("only " + std::to_string(fleet_->Stats().tasks_started - base.tasks_started) +
                  " of " + std::to_string(want) + " jobs started within 120 s");
    }
    row_.start_jobs_s = static_cast<double>(want) / Seconds(t0);
    if (!WaitFor(
            [&] { return fleet_->Stats().exits_acknowledged - base.exits_acknowledged >= want; },
            120s)) {
      return Fail("only " +
                  std::to_string(fleet_->Stats().exits_acknowledged - base.exits_acknowledged) +
                  " of " + std::to_string(want) + " job ends acknowledged within 120 s");
    }
    row_.done_jobs_s = static_cast<double>(want) / Seconds(t0);
    return false;
  }

  bool Restart() {
    const int n = row_.agents;
    const auto killed_at = std::chrono::steady_clock::now();
    server_->Signal(flags_.sigterm ? SIGTERM : SIGKILL);
    if (!server_->Wait(30s)) {
      return Fail("the controller did not exit within 30 s of the signal");
    }
    const auto restarted_at = Clock::now();
    if (!StartServer()) {
      return Fail("the restarted controller did not answer /healthz within 60 s");
    }
    row_.healthy_s = Seconds(restarted_at);
    auto perf = Perf("restart", 30);
    fleet_->hello_rtt().Reset();
    fleet_->heartbeat_rtt().Reset();
    const tessera::fleet::FleetStats before = fleet_->Stats();
    const auto bound = std::chrono::milliseconds(60'000 + 10 * n);
    // When a half, nine tenths and all of them had registered again, and were streaming.
    struct Progress {
      std::string text;
      int mark = 0;
      void Note(int now, int n, double at) {
        const int marks[] = {n / 2, n * 9 / 10, n};
        for (; mark < 3 && now >= marks[mark]; ++mark) {
          char line[64];
          std::snprintf(line, sizeof line, "%s%d at %.1f s", mark == 0 ? "" : ", ", marks[mark],
                        at);
          text += line;
        }
      }
    } registered, streaming;
    const bool back = WaitFor(
        [&] {
          const double at = Seconds(restarted_at);
          registered.Note(fleet_->RegisteredSince(killed_at), n, at);
          const int now = fleet_->StreamingSince(killed_at);
          streaming.Note(now, n, at);
          return now == n;
        },
        bound);
    row_.reregister_s = Seconds(restarted_at);
    std::printf("  %d agents: registered again: %s; streaming again: %s\n", n,
                registered.text.empty() ? "none" : registered.text.c_str(),
                streaming.text.empty() ? "none" : streaming.text.c_str());
    row_.reregister_cpu_s = CpuSeconds(server_->pid());
    {
      // The controller's side of each answer (a worker's wait and the commit), against the
      // round trip the agents saw: what the network, gRPC and the fleet's own threads add.
      const std::string m = Metrics();
      const std::string family = "tessera_agent_channel_answer_seconds";
      std::printf(
          "  %d agents: the controller answered %.0f agent messages since its restart, "
          "%.0f after more than 1 s, %.0f after more than 5 s\n",
          n, Metric(m, family + "_count"), Above(m, family, "1"), Above(m, family, "5"));
      const tessera::fleet::FleetStats after = fleet_->Stats();
      std::printf(
          "  %d agents: while they came back, the agents saw hellos answered in %.1f / "
          "%.1f ms (p50 / p99, the stream's set-up included), heartbeats in %.1f / %.1f "
          "ms; %llu answers were not seen within 10 s, %llu of them hellos\n",
          n, fleet_->hello_rtt().PercentileMs(0.5), fleet_->hello_rtt().PercentileMs(0.99),
          fleet_->heartbeat_rtt().PercentileMs(0.5), fleet_->heartbeat_rtt().PercentileMs(0.99),
          static_cast<unsigned long long>(after.answer_timeouts - before.answer_timeouts),
          static_cast<unsigned long long>(after.hello_timeouts - before.hello_timeouts));
    }
    if (perf != nullptr) {
      perf->Signal(SIGINT);
      (void)perf->Wait(30s);
    }
    if (!back) {
      return Fail(std::to_string(fleet_->StreamingSince(killed_at)) + " of " + std::to_string(n) +
                  " agents back " + std::to_string(bound.count() / 1000) + " s after the restart");
    }
    std::printf("  %d agents: all back %.1f s after the restart (healthy after %.1f s)\n", n,
                row_.reregister_s, row_.healthy_s);
    return false;
  }

  const Flags& flags_;
  Row row_;
  std::string dir_, url_, admin_;
  int port_ = 0, agent_port_ = 0;
  std::unique_ptr<Process> server_;
  std::unique_ptr<tessera::fleet::AgentFleet> fleet_;
};

void PrintTable(const std::vector<Row>& rows, const Flags& flags) {
  std::printf(
      "\n| agents | join | ctl CPU | ctl RSS | /healthz p50 / p99 | /v1/jobs p50 / p99 | "
      "heartbeat RTT p50 / p99 | heartbeats/s | submit->start | submit->done | "
      "re-register after %s | bench CPU |\n",
      flags.sigterm ? "SIGTERM" : "kill -9");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const Row& r : rows) {
    if (!r.failed.empty() && r.join_s == 0) {
      std::printf("| %d | failed: %s |\n", r.agents, r.failed.c_str());
      continue;
    }
    std::printf(
        "| %d | %.1f s | %.0f %% | %.0f MiB | %.1f / %.1f ms | %.1f / %.1f ms | %.1f / %.1f ms | "
        "%.0f | %.0f jobs/s | %.0f jobs/s | %.1f s (%.1f CPU s) | %.0f %% |\n",
        r.agents, r.join_s, r.cpu_pct, r.rss_mib, r.healthz_p50, r.healthz_p99, r.jobs_p50,
        r.jobs_p99, r.hb_p50, r.hb_p99, r.hb_per_s, r.start_jobs_s, r.done_jobs_s, r.reregister_s,
        r.reregister_cpu_s, r.fleet_cpu_pct);
    if (!r.failed.empty()) {
      std::printf("|   | failed after that: %s |\n", r.failed.c_str());
    }
  }
  for (const Row& r : rows) {
    const tessera::fleet::FleetStats& s = r.stats;
    std::printf(
        "  %d agents: scheduling cycles %.0f/s of %.2f ms on average in the steady window; "
        "registrations %llu (errors %llu), streams opened %llu, ended %llu, answer timeouts "
        "%llu, store errors %llu, double bookings %llu, fenced %llu\n",
        r.agents, r.cycles_per_s, r.cycle_ms, static_cast<unsigned long long>(s.registrations),
        static_cast<unsigned long long>(s.register_errors),
        static_cast<unsigned long long>(s.connects), static_cast<unsigned long long>(s.stream_ends),
        static_cast<unsigned long long>(s.answer_timeouts),
        static_cast<unsigned long long>(s.store_errors),
        static_cast<unsigned long long>(s.double_bookings),
        static_cast<unsigned long long>(s.fenced));
    for (const std::string& e : s.errors) {
      std::printf("    %s\n", e.c_str());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) {
    return 2;
  }
  // A socket per agent at both ends: the controller inherits this limit.
  rlimit files{};
  ::getrlimit(RLIMIT_NOFILE, &files);
  const rlim_t soft = files.rlim_cur;
  files.rlim_cur = files.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &files);
  std::printf(
      "agent_scale_bench: open files %llu -> %llu (hard), %u CPUs, heartbeat %s, telemetry "
      "every %d ms, store fsync %s, restart by %s\n",
      static_cast<unsigned long long>(soft), static_cast<unsigned long long>(files.rlim_max),
      std::thread::hardware_concurrency(),
      flags.heartbeat_ms > 0 ? (std::to_string(flags.heartbeat_ms) + " ms").c_str()
                             : "the controller's default",
      flags.telemetry_ms, flags.fsync ? "on" : "off", flags.sigterm ? "SIGTERM" : "kill -9");
  ::signal(SIGPIPE, SIG_IGN);
  std::vector<Row> rows;
  for (int n : flags.agents) {
    if (static_cast<rlim_t>(n) + 1000 > files.rlim_cur) {
      std::printf("  %d agents: the open-file limit (%llu) may not hold them\n", n,
                  static_cast<unsigned long long>(files.rlim_cur));
    }
    rows.push_back(Run(flags, n).Go());
    std::fflush(stdout);
  }
  PrintTable(rows, flags);
  return 0;
}
