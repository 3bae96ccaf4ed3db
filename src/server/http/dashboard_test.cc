// The dashboard's routes on loopback: each embedded file is served byte for byte as it
// is in web/dashboard/, with its content type, no-cache and the Content-Security-Policy,
// without a token; unknown files are 404; the page refers only to files that exist here.
#include "server/http/dashboard.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

namespace tessera {
namespace {

std::string ReadSource(const std::string& name) {
  std::ifstream in(std::string(TESSERA_DASHBOARD_SOURCE_DIR) + "/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read web/dashboard/" << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class DashboardServer : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterDashboardRoutes(server_);
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!server_.is_running() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_TRUE(server_.is_running());
  }
  void TearDown() override {
    server_.stop();
    if (thread_.joinable()) {
      thread_.join();
    }
  }

  httplib::Result Get(const std::string& path) {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(2, 0);
    c.set_read_timeout(5, 0);
    return c.Get(path.c_str());
  }

  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

TEST_F(DashboardServer, ServesEveryFileAsInTheSourceTreeWithItsHeaders) {
  const std::map<std::string, std::pair<std::string, std::string>> expected = {
      {"/", {"index.html", "text/html; charset=utf-8"}},
      {"/dashboard/app.js", {"app.js", "text/javascript; charset=utf-8"}},
      {"/dashboard/model.js", {"model.js", "text/javascript; charset=utf-8"}},
      {"/dashboard/app.css", {"app.css", "text/css; charset=utf-8"}},
      {"/dashboard/favicon.svg", {"favicon.svg", "image/svg+xml"}},
  };
  std::set<std::string> served;
  for (const DashboardAsset& a : DashboardAssets()) {
    served.insert(std::string(a.path));
  }
  EXPECT_EQ(served.size(), expected.size());
  EXPECT_EQ(DashboardAssets().front().path, "/");
  for (const auto& [path, file_and_type] : expected) {
    SCOPED_TRACE(path);
    EXPECT_EQ(served.count(path), 1u);
    httplib::Result r = Get(path);  // no Authorization header: static files need no token
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value("Content-Type"), file_and_type.second);
    EXPECT_EQ(r->get_header_value("Cache-Control"), "no-cache");
    EXPECT_EQ(r->get_header_value("Content-Security-Policy"), kDashboardCsp);
    EXPECT_EQ(r->get_header_value("X-Content-Type-Options"), "nosniff");
    const std::string source = ReadSource(file_and_type.first);
    EXPECT_FALSE(source.empty());
    EXPECT_EQ(r->body, source);
    const DashboardAsset* asset = FindDashboardAsset(path);
    ASSERT_NE(asset, nullptr);
    EXPECT_EQ(asset->body, source);
  }
}

TEST_F(DashboardServer, UnknownFilesAre404WithTheSameHeaders) {
  for (const char* path : {"/dashboard/x", "/dashboard/", "/dashboard/model.test.js",
                           "/dashboard/../CMakeLists.txt", "/dashboard/app.js/x"}) {
    SCOPED_TRACE(path);
    httplib::Result r = Get(path);
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 404);
    EXPECT_EQ(r->get_header_value("Content-Security-Policy"), kDashboardCsp);
  }
  EXPECT_EQ(FindDashboardAsset("/dashboard/x"), nullptr);
  EXPECT_EQ(FindDashboardAsset("/index.html"), nullptr);
}

TEST(DashboardPolicy, OnlySelfIsAllowed) {
  // Every fetch directive is 'self' or 'none': no CDN, no inline script, no eval.
  const std::string csp(kDashboardCsp);
  EXPECT_NE(csp.find("default-src 'self'"), std::string::npos);
  EXPECT_NE(csp.find("script-src 'self'"), std::string::npos);
  EXPECT_NE(csp.find("connect-src 'self'"), std::string::npos);
  EXPECT_EQ(csp.find("unsafe"), std::string::npos);
  EXPECT_EQ(csp.find("http"), std::string::npos);
  EXPECT_EQ(csp.find('*'), std::string::npos);
}

TEST(DashboardPage, RefersOnlyToEmbeddedFilesAndNothingOnTheInternet) {
  const DashboardAsset* index = FindDashboardAsset("/");
  ASSERT_NE(index, nullptr);
  const std::string html(index->body);
  // Every src= and href= of the page is one of the embedded files.
  const std::regex ref(R"re((?:src|href)="([^"]*)")re");
  int refs = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), ref); it != std::sregex_iterator(); ++it) {
    const std::string target = (*it)[1];
    EXPECT_NE(FindDashboardAsset(target), nullptr) << "index.html refers to " << target;
    ++refs;
  }
  EXPECT_GE(refs, 3);  // the stylesheet, the script, the icon
  // Module imports between scripts resolve to embedded files too.
  const std::regex import(R"re(from '\./([^']+)')re");
  for (const DashboardAsset& a : DashboardAssets()) {
    const std::string body(a.body);
    for (auto it = std::sregex_iterator(body.begin(), body.end(), import); it != std::sregex_iterator(); ++it) {
      EXPECT_NE(FindDashboardAsset("/dashboard/" + std::string((*it)[1])), nullptr)
          << a.path << " imports " << (*it)[1];
    }
    // No URL to anywhere but the SVG namespace (a name, never fetched).
    const std::regex url(R"re(https?://[^\s"'`)]+)re");
    for (auto it = std::sregex_iterator(body.begin(), body.end(), url); it != std::sregex_iterator(); ++it) {
      EXPECT_EQ((*it)[0], "http://www.w3.org/2000/svg") << a.path;
    }
  }
}

}  // namespace
}  // namespace tessera
