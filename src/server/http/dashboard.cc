#include "server/http/dashboard.h"

#include <algorithm>
#include <string>
#include <vector>

#include <httplib.h>

namespace tessera {
namespace {

std::string_view ContentTypeOf(std::string_view name) {
  auto ends_with = [&](std::string_view suffix) {
    return name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
  };
  if (ends_with(".html")) return "text/html; charset=utf-8";
  if (ends_with(".js")) return "text/javascript; charset=utf-8";
  if (ends_with(".css")) return "text/css; charset=utf-8";
  if (ends_with(".svg")) return "image/svg+xml";
  if (ends_with(".png")) return "image/png";
  if (ends_with(".json")) return "application/json";
  return "application/octet-stream";
}

struct AssetTable {
  std::vector<std::string> paths;  // owns the URL paths the assets' views point into
  std::vector<DashboardAsset> assets;
};

const AssetTable& Table() {
  static const AssetTable* table = [] {
    auto* t = new AssetTable();
    const std::span<const dashboard_internal::EmbeddedFile> files = dashboard_internal::EmbeddedFiles();
    t->paths.reserve(files.size());  // no reallocation below: the views stay valid
    for (const dashboard_internal::EmbeddedFile& f : files) {
      const std::string_view name(f.name);
      t->paths.push_back(name == "index.html" ? std::string("/") : "/dashboard/" + std::string(name));
      t->assets.push_back(DashboardAsset{t->paths.back(), ContentTypeOf(name),
                                         std::string_view(reinterpret_cast<const char*>(f.data), f.size)});
    }
    std::stable_partition(t->assets.begin(), t->assets.end(),
                          [](const DashboardAsset& a) { return a.path == "/"; });
    return t;
  }();
  return *table;
}

void SetCommonHeaders(httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("Content-Security-Policy", std::string(kDashboardCsp));
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("X-Frame-Options", "DENY");
}

void Serve(const std::string& path, httplib::Response& res) {
  SetCommonHeaders(res);
  const DashboardAsset* asset = FindDashboardAsset(path);
  if (asset == nullptr) {
    res.status = 404;
    res.set_content("no such dashboard file: " + path + "\n", "text/plain; charset=utf-8");
    return;
  }
  res.status = 200;
  res.set_content(asset->body.data(), asset->body.size(), std::string(asset->content_type));
}

}  // namespace

std::span<const DashboardAsset> DashboardAssets() { return Table().assets; }

const DashboardAsset* FindDashboardAsset(std::string_view url_path) {
  for (const DashboardAsset& a : DashboardAssets()) {
    if (a.path == url_path) {
      return &a;
    }
  }
  return nullptr;
}

void RegisterDashboardRoutes(httplib::Server& server) {
  server.Get("/", [](const httplib::Request&, httplib::Response& res) { Serve("/", res); });
  server.Get(R"(/dashboard/(.*))", [](const httplib::Request& req, httplib::Response& res) {
    Serve(req.path, res);
  });
}

}  // namespace tessera
