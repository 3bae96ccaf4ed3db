// `tessera top`: the frame for a hand-made cluster, bars, cutting to a width, colours,
// and the command against a fake controller on 127.0.0.1 (one frame and live mode).
#include "cli/top_command.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/table.h"

namespace tessera {
namespace {

using nlohmann::json;

json Nodes() {
  return json::parse(R"({"nodes": [
    {"name": "node-1", "state": "up", "reason": "", "cpu_milli": 64000, "cpu_used_milli": 12000,
     "memory_mib": 524288, "memory_used_mib": 40960, "schedulable": true, "drain": null,
     "gpus": [
      {"index": 0, "uuid": "GPU-0", "model": "H100-80GB", "mode": "exclusive", "used_milli": 1000,
       "memory_mib": 81920, "health": "ok", "drain": null,
       "holders": [{"job": 12, "tenant": "team-a", "milli": 1000, "mig_profile": null}],
       "telemetry": {"util_pct": 78, "fb_used_mib": 30822, "fb_free_mib": 51098, "temp_c": 61,
                     "power_w": 350, "lost": false, "mig": []}},
      {"index": 1, "uuid": "GPU-1", "model": "H100-80GB", "mode": "shared", "used_milli": 750,
       "memory_mib": 81920, "health": "ok",
       "holders": [{"job": 14, "tenant": "team-a", "milli": 500, "mig_profile": null,
                    "job_name": "notebook", "memory_mib": 20480},
                   {"job": 15, "tenant": "team-b", "milli": 250, "mig_profile": null,
                    "memory_mib": 10240}],
       "telemetry": {"util_pct": 40, "fb_used_mib": 20000, "fb_free_mib": 61920, "temp_c": 50,
                     "power_w": 200.4}},
      {"index": 2, "uuid": "GPU-2", "model": "A100-80GB", "mode": "mig", "used_milli": 572,
       "memory_mib": 81920, "health": "ok",
       "holders": [{"job": 16, "tenant": "team-b", "milli": 429, "mig_profile": "3g.40gb",
                    "mig_start": 4, "mig_uuid": "MIG-b"},
                   {"job": 17, "tenant": "team-c", "milli": 143, "mig_profile": "1g.10gb",
                    "mig_start": 0, "mig_uuid": ""}],
       "telemetry": {"util_pct": 30, "fb_used_mib": 13619, "fb_free_mib": 68301, "temp_c": 55,
                     "power_w": 180,
                     "mig": [{"uuid": "MIG-a", "profile": "1g.10gb", "start": 0, "fb_used_mib": 1024},
                             {"uuid": "MIG-b", "profile": "3g.40gb", "start": 4,
                              "fb_used_mib": 12595}]}},
      {"index": 3, "uuid": "GPU-3", "model": "H100-80GB", "mode": "exclusive", "used_milli": 0,
       "memory_mib": 81920, "health": "drained",
       "drain": {"reason": "xid 79", "by": "health", "since": "2026-11-01T10:00:00Z"},
       "holders": [],
       "telemetry": {"util_pct": 0, "fb_used_mib": 0, "fb_free_mib": 81920, "temp_c": 45,
                     "power_w": 70}},
      {"index": 4, "uuid": "GPU-4", "model": "H100-80GB", "mode": "exclusive", "used_milli": 0,
       "memory_mib": 81920, "health": "lost", "holders": [], "telemetry": null},
      {"index": 5, "uuid": "GPU-5", "model": "H100-80GB", "mode": "exclusive", "used_milli": 0,
       "holders": []}
     ]},
    {"name": "node-2", "state": "down", "reason": "heartbeat lost", "cpu_milli": 32000,
     "cpu_used_milli": 0, "memory_mib": 262144, "memory_used_mib": 0, "gpus": []}
  ]})");
}

json Jobs() {
  return json::parse(R"({"jobs": [
    {"id": 21, "name": "wide", "tenant": "team-c", "queue": "c", "state": "pending", "gpus": 4,
     "gpu_milli": 4000, "reason": "no node has 4 free H100-80GB"},
    {"id": 20, "name": "big-gang", "tenant": "team-b", "queue": "b", "state": "pending",
     "gpus": 8, "gpu_milli": 8000, "reason": "waiting for quota: team-b needs 8 GPUs"},
    {"id": 17, "name": "tiny", "tenant": "team-c", "queue": "c", "state": "running"},
    {"id": 16, "name": "ft", "tenant": "team-b", "queue": "b", "state": "running"},
    {"id": 15, "name": "infer", "tenant": "team-b", "queue": "b", "state": "running"},
    {"id": 14, "name": "notebook", "tenant": "team-a", "queue": "a", "state": "running"},
    {"id": 12, "name": "train-gang", "tenant": "team-a", "queue": "a", "state": "stopping"}
  ]})");
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
  }
  return lines;
}

// The one line holding `needle`; fails the test when none or several do.
std::string LineWith(const std::string& frame, const std::string& needle) {
  std::string found;
  int count = 0;
  for (const std::string& line : Lines(frame)) {
    if (line.find(needle) != std::string::npos) {
      found = line;
      ++count;
    }
  }
  EXPECT_EQ(count, 1) << "'" << needle << "' in\n" << frame;
  return found;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

#define EXPECT_HAS(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << "'" << (part) << "' not in:\n" << (text)

TEST(RenderTopTest, ShowsEveryKindOfGpu) {
  TopOptions options;
  const std::string frame = RenderTop(Nodes(), Jobs(), options);
  EXPECT_EQ(frame.find('\x1b'), std::string::npos) << "no colour asked for";

  EXPECT_EQ(Lines(frame)[0],
            "cluster: 1/2 nodes up  GPUs 2.322/6 in use  util 37%  1 drained  1 lost  "
            "jobs 5 running, 2 pending");

  EXPECT_EQ(LineWith(frame, "node-1"), "node-1  up    cpu 12.0/64  mem 40/512 GiB  GPUs 2.322/6");
  EXPECT_EQ(LineWith(frame, "node-2"),
            "node-2  down  cpu 0.0/32  mem 0/256 GiB  GPUs 0/0  heartbeat lost");
  EXPECT_HAS(frame, "node-2  down  cpu 0.0/32  mem 0/256 GiB  GPUs 0/0  heartbeat lost\n"
                    "  (no GPUs)\n");

  // Exclusive: bars (78% of 10 cells is 8; 30822/81920 MiB is 4), values, the holder.
  EXPECT_EQ(LineWith(frame, "[0]"),
            "  [0] H100-80GB  exclusive  util ▕████████  ▏  78%  mem ▕████      ▏ 30.1/80 GiB"
            "   61C  350W  team-a job 12 train-gang");

  // Shared: a summary, then one sub-line per holder; the name of job 15 comes from the
  // job list.
  const std::string shared = LineWith(frame, "[1]");
  EXPECT_HAS(shared, "shared     util ▕████      ▏  40%  mem ▕██        ▏ 19.5/80 GiB   50C  200W");
  EXPECT_HAS(shared, "2 shares, 0.75 GPU");
  EXPECT_EQ(LineWith(frame, "job 14"), "      ├─ team-a  job 14 notebook  share 0.5   mem 20 GiB");
  EXPECT_EQ(LineWith(frame, "job 15"), "      └─ team-b  job 15 infer     share 0.25  mem 10 GiB");

  // MIG: instances in slot order with their profile, memory from the profile and use
  // from telemetry (by UUID, else by profile and start).
  EXPECT_HAS(LineWith(frame, "[2]"), "[2] A100-80GB  mig        util ▕███       ▏  30%");
  EXPECT_HAS(LineWith(frame, "[2]"), "2 MIG instances, 0.572 GPU");
  EXPECT_EQ(LineWith(frame, "job 16"),
            "      └─ team-b  job 16 ft    mig 3g.40gb  mem 40 GiB, 12.3 GiB used");
  EXPECT_EQ(LineWith(frame, "job 17"),
            "      ├─ team-c  job 17 tiny  mig 1g.10gb  mem 10 GiB, 1 GiB used");
  EXPECT_LT(frame.find("job 17"), frame.find("job 16"));

  // Drained: the reason; lost: no telemetry columns.
  const std::string drained = LineWith(frame, "[3]");
  EXPECT_HAS(drained, "util ▕          ▏   0%");
  EXPECT_HAS(drained, "45C   70W  DRAINED: xid 79  free");
  EXPECT_EQ(LineWith(frame, "[4]"), "  [4] H100-80GB  exclusive  LOST  free");

  // No telemetry: "-" for each value, no bars; memory from the model's name.
  const std::string bare = LineWith(frame, "[5]");
  EXPECT_HAS(bare, "util" + std::string(17, ' ') + "-  mem" + std::string(13, ' ') +
                       "    -/80 GiB     -     -  free");
  EXPECT_EQ(bare.find("▕"), std::string::npos);

  // Pending jobs, oldest first, with the reason they wait.
  EXPECT_HAS(frame, "pending jobs: 2\n"
                    "  20  team-b  big-gang  8 GPUs  waiting for quota: team-b needs 8 GPUs\n"
                    "  21  team-c  wide      4 GPUs  no node has 4 free H100-80GB\n");
}

TEST(RenderTopTest, FiltersNodesAndLimitsThePendingList) {
  TopOptions options;
  options.nodes = {"node-2"};
  options.max_pending = 1;
  options.title = "tessera top  http://x";
  const std::string frame = RenderTop(Nodes(), Jobs(), options);
  EXPECT_EQ(Lines(frame)[0], "tessera top  http://x");
  EXPECT_HAS(Lines(frame)[1], "cluster: 1/2 nodes up");  // the header stays cluster-wide
  EXPECT_EQ(frame.find("node-1"), std::string::npos);
  EXPECT_HAS(frame, "node-2  down");
  EXPECT_HAS(frame, "  20  team-b  big-gang  8 GPUs");
  EXPECT_EQ(frame.find("  21  "), std::string::npos);
  EXPECT_HAS(frame, "  … and 1 more\n");

  options.nodes = {"node-9"};
  EXPECT_HAS(RenderTop(Nodes(), Jobs(), options), "no node named node-9\n");
  // The arrays themselves are accepted too; nothing at all still renders.
  const std::string empty = RenderTop(json::array(), json::array(), TopOptions{});
  EXPECT_HAS(empty, "cluster: 0/0 nodes up  GPUs 0/0 in use  0 drained  jobs 0 running, 0 pending");
  EXPECT_HAS(empty, "no nodes have registered");
  EXPECT_HAS(empty, "pending jobs: none");
  // Garbage in odd places reads as absent.
  const std::string odd = RenderTop(json::parse(R"({"nodes": [{"name": 5, "gpus": {"x": 1}},
      {"name": "n", "gpus": [{"index": "zero", "telemetry": [1], "holders": [3]}]}]})"),
                                    json::parse(R"({"jobs": "none"})"), TopOptions{});
  EXPECT_HAS(odd, "  [?] ?");

  // Names cannot drive the terminal: control characters show as '?'.
  json jobs = Jobs();
  jobs["jobs"][6]["name"] = "evil\x1b[2J" "\xc2\x9b" "2Jname\n";
  const std::string evil = RenderTop(Nodes(), jobs, TopOptions{});
  EXPECT_HAS(evil, "team-a job 12 evil?[2J?2Jname?\n");
  EXPECT_EQ(evil.find('\x1b'), std::string::npos) << evil;
}

TEST(RenderTopTest, BarsRoundToCells) {
  auto full = [](int64_t permille, size_t width) {
    const std::string bar = UsageBar(permille, width);
    EXPECT_EQ(DisplayWidth(bar), width + 2) << bar;
    EXPECT_EQ(bar.rfind("▕", 0), 0U);
    return Count(bar, "█");
  };
  EXPECT_EQ(UsageBar(0, 10), "▕          ▏");
  EXPECT_EQ(UsageBar(1000, 4), "▕████▏");
  EXPECT_EQ(full(780, 10), 8U);
  EXPECT_EQ(full(149, 10), 1U);
  EXPECT_EQ(full(150, 10), 2U);
  EXPECT_EQ(full(500, 20), 10U);
  EXPECT_EQ(full(5, 10), 1U);     // anything shows
  EXPECT_EQ(full(999, 10), 9U);   // not full unless it is
  EXPECT_EQ(full(1000, 10), 10U);
  EXPECT_EQ(full(2500, 10), 10U);  // clamped
  EXPECT_EQ(full(-30, 10), 0U);
  EXPECT_EQ(full(500, 1), 1U);
}

TEST(RenderTopTest, CutsLinesToTheWidth) {
  EXPECT_EQ(FitLine("abcdef", 6), "abcdef");
  EXPECT_EQ(FitLine("abcdefg", 6), "abcde…");
  EXPECT_EQ(FitLine("abcdefg", 0), "abcdefg");
  EXPECT_EQ(FitLine("▕██▏xyz", 4), "▕██…");
  // Escape sequences take no columns; a cut line ends in a reset.
  EXPECT_EQ(FitLine("\x1b[32mabcdef\x1b[0m", 6), "\x1b[32mabcdef\x1b[0m");
  EXPECT_EQ(FitLine("\x1b[32mabcdef\x1b[0m", 4), "\x1b[32mabc…\x1b[0m");

  for (bool color : {false, true}) {
    TopOptions options;
    options.width = 40;
    options.color = color;
    const std::string frame = RenderTop(Nodes(), Jobs(), options);
    size_t cut = 0;
    std::string visible_frame;
    for (const std::string& line : Lines(frame)) {
      std::string visible;
      for (size_t i = 0; i < line.size(); ++i) {
        if (line[i] == '\x1b') {
          i = line.find('m', i);
          continue;
        }
        visible += line[i];
      }
      visible_frame += visible + "\n";
      EXPECT_LE(DisplayWidth(visible), 40U) << line;
      if (DisplayWidth(visible) == 40 && visible.size() >= 3 &&
          visible.compare(visible.size() - 3, 3, "…") == 0) {
        ++cut;
      }
    }
    EXPECT_GE(cut, 8U) << frame;
    EXPECT_EQ(frame.find('\x1b') != std::string::npos, color);
    EXPECT_HAS(visible_frame, "\nnode-1  up    cpu 12.0/64  mem 40/512 G…\n");
    EXPECT_HAS(visible_frame, "\n  [4] H100-80GB  exclusive  LOST  free\n");  // fits
    EXPECT_HAS(visible_frame, "\n  [0] H100-80GB  exclusive  util ▕█████…\n");
  }
}

TEST(RenderTopTest, ColoursTenantsStably) {
  const std::string a = TenantColor("team-a");
  EXPECT_EQ(a, TenantColor("team-a"));
  std::vector<std::string> seen;
  for (const char* t : {"team-a", "team-b", "team-c", "team-d", "research", "prod"}) {
    const std::string c = TenantColor(t);
    EXPECT_TRUE(c.size() == 2 && (c[0] == '3' || c[0] == '9') && c[1] >= '2' && c[1] <= '6') << c;
    if (std::find(seen.begin(), seen.end(), c) == seen.end()) {
      seen.push_back(c);
    }
  }
  EXPECT_GE(seen.size(), 3U);

  TopOptions options;
  options.color = true;
  const std::string frame = RenderTop(Nodes(), Jobs(), options);
  EXPECT_HAS(frame, "\x1b[" + a + "mteam-a\x1b[0m job 12 train-gang");
  EXPECT_HAS(frame, "\x1b[33mDRAINED: xid 79\x1b[0m");
  EXPECT_HAS(frame, "\x1b[31mLOST\x1b[0m");
  EXPECT_HAS(frame, "util ▕\x1b[32m████████\x1b[0m  ▏  78%");
}

// ---------------------------------------------------------------------------------
// The command against a fake controller.

class FakeTopController {
 public:
  FakeTopController() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    EXPECT_GT(port_, 0);
    server_.Get("/v1/nodes", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      authorization_ = req.get_header_value("Authorization");
      ++node_calls_;
      if (fail_after_ > 0 && node_calls_ > fail_after_) {
        res.status = fail_status_;
        res.set_content(R"({"error":{"code":"unavailable","message":"store is busy"}})",
                        "application/json");
        return;
      }
      res.set_content(Nodes().dump(), "application/json");
    });
    server_.Get("/v1/jobs", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      job_states_ = req.get_param_value("state");
      res.set_content(Jobs().dump(), "application/json");
    });
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    for (int i = 0; i < 5000 && !server_.is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(server_.is_running());
  }
  ~FakeTopController() {
    server_.stop();
    thread_.join();
  }

  // After `n` good answers, GET /v1/nodes answers `status`.
  void FailAfter(int n, int status) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_after_ = n;
    fail_status_ = status;
  }

  ClientConfig Config() const {
    ClientConfig config;
    config.server = "http://127.0.0.1:" + std::to_string(port_);
    config.token = "tok-top";
    config.connect_timeout_ms = 2000;
    config.read_timeout_ms = 10000;
    return config;
  }
  std::string authorization() {
    std::lock_guard<std::mutex> lock(mu_);
    return authorization_;
  }
  std::string job_states() {
    std::lock_guard<std::mutex> lock(mu_);
    return job_states_;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::string authorization_;
  std::string job_states_;
  int node_calls_ = 0;
  int fail_after_ = 0;
  int fail_status_ = 503;
};

constexpr Micros kNoon = 1'793'534'400'000'000;  // 2026-11-01T12:00:00Z

TEST(RunTopTest, OnceDrawsOneFrame) {
  FakeTopController fake;
  ManualClock clock(kNoon);
  TopOptions options;
  options.once = true;
  std::ostringstream out;
  std::ostringstream err;
  ASSERT_EQ(RunTop(fake.Config(), options, clock, out, err), 0) << err.str();
  EXPECT_EQ(err.str(), "");
  EXPECT_EQ(fake.authorization(), "Bearer tok-top");
  EXPECT_EQ(fake.job_states(), "pending,running,stopping");
  const std::string frame = out.str();
  EXPECT_EQ(Lines(frame)[0], "tessera top  " + fake.Config().server + "  2026-11-01T12:00:00Z");
  EXPECT_HAS(frame, "team-a job 12 train-gang");
  EXPECT_HAS(frame, "├─ team-c  job 17 tiny");
  EXPECT_HAS(frame, "pending jobs: 2");
  EXPECT_EQ(frame.find('\x1b'), std::string::npos);
}

TEST(RunTopTest, OnceReportsAnUnreachableController) {
  ClientConfig config;
  config.server = "http://127.0.0.1:1";
  config.connect_timeout_ms = 2000;
  ManualClock clock(kNoon);
  TopOptions options;
  options.once = true;
  std::ostringstream out;
  std::ostringstream err;
  EXPECT_EQ(RunTop(config, options, clock, out, err), 5);
  EXPECT_EQ(out.str(), "");
  EXPECT_HAS(err.str(), "tessera: cannot reach the controller at http://127.0.0.1:1");
  options.interval = 0;
  EXPECT_EQ(RunTop(config, options, clock, out, err), 2);
}

TEST(RunTopTest, LiveRedrawsInPlaceAndRestoresTheScreen) {
  FakeTopController fake;
  ManualClock clock(kNoon);
  TopOptions options;
  options.max_frames = 2;
  options.terminal_size = [] { return TerminalSize{60, 10}; };
  int waits = 0;
  options.wait = [&](Micros micros) {
    EXPECT_EQ(micros, 2'000'000);
    ++waits;
    return true;
  };
  std::ostringstream out;
  std::ostringstream err;
  ASSERT_EQ(RunTop(fake.Config(), options, clock, out, err), 0) << err.str();
  EXPECT_EQ(waits, 1);
  const std::string screen = out.str();
  EXPECT_EQ(screen.rfind("\x1b[?1049h\x1b[?25l\x1b[H", 0), 0U) << "alternate screen, no cursor";
  EXPECT_EQ(Count(screen, "\x1b[H"), 2U);
  EXPECT_EQ(Count(screen, "\x1b[J"), 2U);
  const std::string leave = "\x1b[?25h\x1b[?1049l";
  ASSERT_GE(screen.size(), leave.size());
  EXPECT_EQ(screen.substr(screen.size() - leave.size()), leave);
  // The last frame: 10 rows at most, no newline after the last, each line cleared.
  const std::string last = screen.substr(screen.rfind("\x1b[H"));
  EXPECT_EQ(Count(last, "\n"), 9U);
  EXPECT_EQ(Count(last, "\x1b[K"), 10U);
  EXPECT_HAS(last, "tessera top  http://127.0.0.1:");
  EXPECT_HAS(last, "more lines\x1b[K\x1b[J");
}

TEST(RunTopTest, LiveShowsErrorsAndKeepsGoing) {
  FakeTopController fake;
  fake.FailAfter(1, 503);
  ManualClock clock(kNoon);
  TopOptions options;
  options.max_frames = 3;
  int waits = 0;
  options.wait = [&](Micros) { return ++waits < 10; };
  std::ostringstream out;
  std::ostringstream err;
  ASSERT_EQ(RunTop(fake.Config(), options, clock, out, err), 0) << err.str();
  EXPECT_EQ(err.str(), "");
  const std::string last = out.str().substr(out.str().rfind("\x1b[H"));
  EXPECT_HAS(last, "store is busy");
  EXPECT_HAS(last, "retrying every 2s (showing the last answer)");
  EXPECT_HAS(last, "team-a job 12 train-gang");
  EXPECT_HAS(last, "2026-11-01T12:00:00Z  every 2s  q: quit\x1b[K\n");

  // Nothing listening: the error is the frame.
  ClientConfig nowhere;
  nowhere.server = "http://127.0.0.1:1";
  nowhere.connect_timeout_ms = 2000;
  std::ostringstream out2;
  options.max_frames = 2;
  ASSERT_EQ(RunTop(nowhere, options, clock, out2, err), 0);
  EXPECT_HAS(out2.str(), "cannot reach the controller at http://127.0.0.1:1");
  EXPECT_HAS(out2.str(), ": retrying every 2s\x1b[K");

  // The user quits: the wait says stop.
  std::ostringstream out3;
  options.max_frames = 0;
  waits = 0;
  options.wait = [&](Micros) {
    ++waits;
    return false;
  };
  ASSERT_EQ(RunTop(fake.Config(), options, clock, out3, err), 0);
  EXPECT_EQ(waits, 1);
  EXPECT_EQ(Count(out3.str(), "\x1b[?1049l"), 1U);
}

TEST(RunTopTest, LiveEndsOnARefusedToken) {
  FakeTopController fake;
  fake.FailAfter(1, 401);
  ManualClock clock(kNoon);
  TopOptions options;
  options.max_frames = 5;
  options.wait = [](Micros) { return true; };
  std::ostringstream out;
  std::ostringstream err;
  EXPECT_EQ(RunTop(fake.Config(), options, clock, out, err), 4);
  EXPECT_HAS(err.str(), "tessera: store is busy");
  const std::string leave = "\x1b[?25h\x1b[?1049l";
  EXPECT_EQ(out.str().substr(out.str().size() - leave.size()), leave);
  EXPECT_EQ(Count(out.str(), "\x1b[H"), 1U);
}

}  // namespace
}  // namespace tessera
