// The web dashboard in a real browser: `tessera up` with fake GPUs runs jobs of two
// tenants (whole GPUs, software shares, MIG instances, and one that never fits);
// headless Chromium loads the dashboard with the admin token in the URL fragment, and the
// DOM it renders must draw every GPU of GET /v1/nodes and every slice with its job and
// tenant, the pending job with its reason, a usage chart per tenant, and no error. A
// screenshot is saved as a test artifact. Every wait is bounded; without Chromium the
// test fails (it is installed by scripts/setup.sh).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "e2e/cluster_fixture.h"
#include "e2e/process.h"

namespace tessera::e2e {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Attrs = std::map<std::string, std::string>;

// The fake inventory: whole cards, one card in MIG mode and one shared by software shares.
constexpr const char* kFakeGpus = "8xH100-80GB,1xA100-80GB:mig,1xA100-80GB:shared";
constexpr int kFakeGpuCount = 10;

// The browser: the configured one, else `chromium` or `chromium-browser` on PATH.
std::string FindChromium() {
  std::vector<std::string> candidates;
#ifdef TESSERA_CHROMIUM
  candidates.push_back(TESSERA_CHROMIUM);
#endif
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  size_t at = 0;
  while (at <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', at), dirs.size());
    const std::string dir = dirs.substr(at, end - at);
    if (!dir.empty()) {
      candidates.push_back(dir + "/chromium");
      candidates.push_back(dir + "/chromium-browser");
    }
    at = end + 1;
  }
  for (const std::string& c : candidates) {
    if (!c.empty() && ::access(c.c_str(), X_OK) == 0) {
      return c;
    }
  }
  return "";
}

// Runs argv (argv[0] a path) in its own process group with stdout and stderr to files;
// kills the whole group when it ends or after `timeout`. The exit status, or nullopt on
// timeout.
std::optional<int> RunCaptured(const std::vector<std::string>& argv, const std::string& out_path,
                               const std::string& err_path, std::chrono::milliseconds timeout) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0) {
      std::_Exit(126);
    }
    ::dup2(out, 1);
    ::dup2(err, 2);
    std::vector<char*> args;
    for (const std::string& a : argv) {
      args.push_back(const_cast<char*>(a.c_str()));
    }
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    std::_Exit(127);
  }
  if (pid < 0) {
    return std::nullopt;
  }
  ::setpgid(pid, pid);  // also from here, so that the kill below cannot miss the group
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool exited = false;
  while (std::chrono::steady_clock::now() < deadline) {
    siginfo_t info{};
    // Look without reaping: the group is killed while its leader's id is still ours.
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == pid) {
      exited = true;
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  ::kill(-pid, SIGKILL);  // the browser's helpers, or everything on timeout
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!exited) {
    return std::nullopt;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string Unescape(const std::string& s) {
  static const std::vector<std::pair<std::string, std::string>> kEntities = {
      {"&quot;", "\""}, {"&#39;", "'"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&nbsp;", "\xc2\xa0"},
      {"&amp;", "&"}};
  std::string out;
  for (size_t i = 0; i < s.size();) {
    bool matched = false;
    if (s[i] == '&') {
      for (const auto& [entity, text] : kEntities) {
        if (s.compare(i, entity.size(), entity) == 0) {
          out += text;
          i += entity.size();
          matched = true;
          break;
        }
      }
    }
    if (!matched) {
      out += s[i++];
    }
  }
  return out;
}

// The start tags of serialized HTML (what --dump-dom prints) with their attributes;
// "<tag>" is stored under the key "".
std::vector<Attrs> StartTags(const std::string& html) {
  std::vector<Attrs> tags;
  size_t i = 0;
  auto is_name = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ':';
  };
  while ((i = html.find('<', i)) != std::string::npos) {
    ++i;
    if (i >= html.size() || !std::isalpha(static_cast<unsigned char>(html[i]))) {
      continue;
    }
    Attrs attrs;
    size_t j = i;
    while (j < html.size() && is_name(html[j])) {
      ++j;
    }
    attrs[""] = html.substr(i, j - i);
    while (j < html.size() && html[j] != '>') {
      if (std::isspace(static_cast<unsigned char>(html[j])) || html[j] == '/') {
        ++j;
        continue;
      }
      size_t k = j;
      while (k < html.size() && html[k] != '=' && html[k] != '>' &&
             !std::isspace(static_cast<unsigned char>(html[k]))) {
        ++k;
      }
      const std::string name = html.substr(j, k - j);
      std::string value;
      if (k < html.size() && html[k] == '=') {
        ++k;
        if (k < html.size() && (html[k] == '"' || html[k] == '\'')) {
          const char quote = html[k];
          const size_t close = html.find(quote, k + 1);
          value = html.substr(k + 1, (close == std::string::npos ? html.size() : close) - k - 1);
          k = close == std::string::npos ? html.size() : close + 1;
        } else {
          size_t e = k;
          while (e < html.size() && html[e] != '>' && !std::isspace(static_cast<unsigned char>(html[e]))) {
            ++e;
          }
          value = html.substr(k, e - k);
          k = e;
        }
      }
      attrs[name] = Unescape(value);
      j = std::max(k, j + 1);
    }
    tags.push_back(std::move(attrs));
    i = j;
  }
  return tags;
}

std::string Get(const Attrs& a, const std::string& key) {
  auto it = a.find(key);
  return it == a.end() ? "" : it->second;
}

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTestDir("dashboard");
    ASSERT_FALSE(dir_.empty());
    port_ = FreePort();
    url_ = "http://127.0.0.1:" + std::to_string(port_);
  }
  void TearDown() override {
    if (up_ && up_->running()) {
      ExpectCleanStop(*up_, 30s);
    }
    up_.reset();
    RemoveTestDir(dir_, HasFailure());
  }

  httplib::Client Client(const std::string& token) { return ApiClient(url_, token, 20); }

  json GetJson(const std::string& path, const std::string& token) {
    return e2e::GetJson(url_, token, path, 20);
  }

  uint64_t Submit(const std::string& token, const json& spec) {
    auto r = Client(token).Post("/v1/jobs", spec.dump(), "application/json");
    if (!r || (r->status != 200 && r->status != 201)) {
      ADD_FAILURE() << "submit " << spec.dump() << ": " << (r ? r->body : httplib::to_string(r.error()));
      return 0;
    }
    return json::parse(r->body)["id"].get<uint64_t>();
  }

  std::string dir_;
  int port_ = 0;
  std::string url_;
  std::unique_ptr<Process> up_;
};

TEST_F(DashboardTest, BrowserDrawsEveryGpuAndSliceWithItsTenant) {
  const std::string chromium = FindChromium();
  ASSERT_FALSE(chromium.empty()) << "chromium not found: run scripts/setup.sh";

  // A one-machine cluster with fake GPUs.
  const std::string data = dir_ + "/data";
  up_ = std::make_unique<Process>(
      std::vector<std::string>{TESSERA_BINARY, "up", "--data", data, "--listen",
                               "127.0.0.1:" + std::to_string(port_), "--fake-gpus", kFakeGpus,
                               "--no-fsync", "--no-cgroups"},
      dir_ + "/up.log");
  std::string admin, team_a, team_b;
  ASSERT_TRUE(WaitFor(
      [&] {
        admin = ReadToken(data + "/admin.token");
        team_a = ReadToken(data + "/tokens/team-a.token");
        team_b = ReadToken(data + "/tokens/team-b.token");
        if (admin.empty() || team_a.empty() || team_b.empty()) {
          return false;
        }
        json nodes = GetJson("/v1/nodes", admin);
        return nodes.contains("nodes") && nodes["nodes"].size() == 1 &&
               nodes["nodes"][0].value("state", "") == "up" &&
               nodes["nodes"][0]["gpus"].size() == static_cast<size_t>(kFakeGpuCount);
      },
      60s))
      << "tessera up did not come up:\n" << up_->Output();

  // The page is served without a token.
  {
    auto r = Client("").Get("/");
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    ASSERT_EQ(r->status, 200) << "the controller does not serve the dashboard at / "
                                 "(is RegisterDashboardRoutes called by the server?): "
                              << r->body;
    EXPECT_NE(r->get_header_value("Content-Type").find("text/html"), std::string::npos);
  }

  // Jobs of two tenants: whole GPUs, software shares and MIG instances, two tenants on the
  // MIG card and two on the shared card, and one that never fits.
  const json whole = {{"name", "train-whole"},
                      {"resources", {{"gpus", 2}, {"gpu_model", "H100-80GB"}}},
                      {"command", "sleep 600"}};
  const json share_b = {{"name", "serve-share"},
                        {"resources", {{"gpus", 1}, {"gpu_fraction", 0.25}, {"gpu_memory", "20GiB"}}},
                        {"command", "sleep 600"}};
  const json share_a = {{"name", "eval-share"},
                        {"resources", {{"gpus", 1}, {"gpu_fraction", 0.5}, {"gpu_memory", "10GiB"}}},
                        {"command", "sleep 600"}};
  const json mig_b = {{"name", "notebook-mig"},
                      {"resources", {{"mig", "1g.10gb"}, {"gpu_model", "A100-80GB"}}},
                      {"command", "sleep 600"}};
  const json mig_a = {{"name", "tune-mig"},
                      {"resources", {{"mig", "3g.40gb"}, {"gpu_model", "A100-80GB"}}},
                      {"command", "sleep 600"}};
  const json never = {{"name", "too-big"},
                      {"resources", {{"gpus", 64}}},
                      {"command", "sleep 600"},
                      {"hold_if_unfit", true}};
  std::vector<uint64_t> running = {Submit(team_a, whole), Submit(team_b, share_b),
                                   Submit(team_a, share_a), Submit(team_b, mig_b),
                                   Submit(team_a, mig_a)};
  const uint64_t pending = Submit(team_a, never);
  ASSERT_FALSE(HasFailure());
  for (uint64_t id : running) {
    ASSERT_TRUE(WaitFor(
        [&] { return GetJson("/v1/jobs/" + std::to_string(id), admin).value("state", "") == "running"; },
        60s))
        << "job " << id << ": " << GetJson("/v1/jobs/" + std::to_string(id), admin).dump();
  }
  json pending_job = GetJson("/v1/jobs/" + std::to_string(pending), admin);
  ASSERT_EQ(pending_job.value("state", ""), "pending") << pending_job.dump();
  const std::string pending_reason = pending_job.value("reason", "");
  ASSERT_FALSE(pending_reason.empty());

  const json nodes = GetJson("/v1/nodes", admin);
  ASSERT_TRUE(nodes.contains("nodes")) << nodes.dump();
  std::map<std::string, int> holders_by_mode;
  size_t holder_count = 0;
  for (const json& node : nodes["nodes"]) {
    for (const json& gpu : node["gpus"]) {
      holders_by_mode[gpu.value("mode", "")] += static_cast<int>(gpu["holders"].size());
      holder_count += gpu["holders"].size();
    }
  }
  ASSERT_EQ(holders_by_mode["exclusive"], 2) << nodes.dump();
  ASSERT_EQ(holders_by_mode["shared"], 2) << nodes.dump();
  ASSERT_EQ(holders_by_mode["mig"], 2) << nodes.dump();

  // The page as the browser renders it, after its scripts have fetched and drawn.
  const std::string page = url_ + "/#token=" + admin;
  const std::vector<std::string> common = {
      chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
      "--no-first-run", "--no-default-browser-check", "--hide-scrollbars",
      "--user-data-dir=" + dir_ + "/chromium-profile", "--virtual-time-budget=15000",
      "--window-size=1400,1000"};
  std::vector<std::string> dump = common;
  dump.push_back("--dump-dom");
  dump.push_back(page);
  const std::string dom_path = dir_ + "/dom.html";
  std::optional<int> rc = RunCaptured(dump, dom_path, dir_ + "/chromium-dom.log", 120s);
  ASSERT_EQ(rc, std::optional<int>(0)) << Process::ReadFile(dir_ + "/chromium-dom.log");
  const std::string dom = Process::ReadFile(dom_path);
  ASSERT_FALSE(dom.empty()) << Process::ReadFile(dir_ + "/chromium-dom.log");
  const std::vector<Attrs> tags = StartTags(dom);

  auto find = [&](const std::function<bool(const Attrs&)>& pred) -> const Attrs* {
    for (const Attrs& t : tags) {
      if (pred(t)) {
        return &t;
      }
    }
    return nullptr;
  };
  // Signed in with the fragment's token, which is gone from the address bar, and no error.
  const Attrs* banner = find([](const Attrs& t) { return Get(t, "id") == "banner"; });
  ASSERT_NE(banner, nullptr) << dom;
  EXPECT_TRUE(banner->count("hidden")) << "the page shows an error:\n" << dom;
  const Attrs* login = find([](const Attrs& t) { return Get(t, "id") == "login"; });
  ASSERT_NE(login, nullptr);
  EXPECT_TRUE(login->count("hidden")) << "the page asks for a token:\n" << dom;

  // Every GPU, with its node, index and UUID.
  size_t gpu_count = 0;
  for (const json& node : nodes["nodes"]) {
    const std::string name = node["name"];
    for (const json& gpu : node["gpus"]) {
      ++gpu_count;
      const std::string index = std::to_string(gpu["index"].get<int>());
      const Attrs* box = find([&](const Attrs& t) {
        return Get(t, "data-node") == name && Get(t, "data-gpu") == index;
      });
      ASSERT_NE(box, nullptr) << "GPU " << name << "/" << index << " is not drawn";
      EXPECT_EQ(Get(*box, "data-uuid"), gpu["uuid"].get<std::string>());
      // Every slice of it, with its job and tenant.
      for (const json& h : gpu["holders"]) {
        const std::string job = std::to_string(h["job"].get<uint64_t>());
        const std::string tenant = h["tenant"];
        const Attrs* slice = find([&](const Attrs& t) {
          return Get(t, "data-job") == job && Get(t, "data-gpu-node") == name &&
                 Get(t, "data-gpu-index") == index;
        });
        ASSERT_NE(slice, nullptr) << "job " << job << " on " << name << "/" << index << " is not drawn";
        EXPECT_EQ(Get(*slice, "data-tenant"), tenant) << "job " << job;
        EXPECT_NE(Get(*slice, "title").find("tenant: " + tenant), std::string::npos) << Get(*slice, "title");
      }
    }
  }
  EXPECT_EQ(gpu_count, static_cast<size_t>(kFakeGpuCount));
  size_t gpu_boxes = 0, slices = 0;
  for (const Attrs& t : tags) {
    gpu_boxes += t.count("data-gpu") && t.count("data-node") ? 1 : 0;
    slices += t.count("data-job") && t.count("data-gpu-node") ? 1 : 0;
  }
  EXPECT_EQ(gpu_boxes, gpu_count) << "GPUs drawn that the API does not list";
  EXPECT_EQ(slices, holder_count) << "slices drawn that the API does not list";

  // The queue: the pending job with its reason, the running ones.
  const Attrs* row = find([&](const Attrs& t) { return Get(t, "data-queue-job") == std::to_string(pending); });
  ASSERT_NE(row, nullptr) << "the pending job is not in the queue table";
  EXPECT_EQ(Get(*row, "data-state"), "pending");
  EXPECT_NE(dom.find(pending_reason), std::string::npos) << "no reason '" << pending_reason << "' on the page";
  for (uint64_t id : running) {
    const Attrs* r = find([&](const Attrs& t) { return Get(t, "data-queue-job") == std::to_string(id); });
    ASSERT_NE(r, nullptr) << "job " << id << " is not in the queue table";
    EXPECT_EQ(Get(*r, "data-state"), "running");
  }
  // A usage chart for each tenant with jobs, and the legend.
  for (const std::string& tenant : std::vector<std::string>{"team-a", "team-b"}) {
    EXPECT_NE(find([&](const Attrs& t) { return Get(t, "data-tenant-chart") == tenant; }), nullptr)
        << "no usage chart for " << tenant;
    EXPECT_NE(find([&](const Attrs& t) { return Get(t, "data-legend-tenant") == tenant; }), nullptr)
        << "no legend entry for " << tenant;
  }

  // A screenshot for people to look at.
  const std::string artifact = TESSERA_DASHBOARD_ARTIFACT;
  std::filesystem::create_directories(std::filesystem::path(artifact).parent_path());
  std::filesystem::remove(artifact);
  std::vector<std::string> shot = common;
  shot.push_back("--screenshot=" + artifact);
  shot.push_back(page);
  rc = RunCaptured(shot, dir_ + "/chromium-shot.out", dir_ + "/chromium-shot.log", 120s);
  ASSERT_EQ(rc, std::optional<int>(0)) << Process::ReadFile(dir_ + "/chromium-shot.log");
  ASSERT_TRUE(std::filesystem::exists(artifact)) << Process::ReadFile(dir_ + "/chromium-shot.log");
  const std::string png = Process::ReadFile(artifact);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_GT(png.size(), 20u * 1024) << "the screenshot is suspiciously small";
  std::cout << "dashboard screenshot: " << artifact << " (" << png.size() << " bytes)\n";
}

}  // namespace
}  // namespace tessera::e2e
