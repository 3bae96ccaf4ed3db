// Dashboard: the controller's web page at `/` (GPU map, queue, usage against quota).
//
// The page's files (web/dashboard/) are embedded into the binary at build time
// (src/server/dashboard.cmake runs embed_assets.cmake), so the controller serves them
// without reading the filesystem and a browser loads nothing from elsewhere. The static
// files carry no data and need no token; the page asks for one and sends it as
// `Authorization: Bearer` to the JSON API. Every answer has `Cache-Control: no-cache`
// and a Content-Security-Policy that allows only 'self'.
//
// Routes: GET / (index.html) and GET /dashboard/<file>; an unknown /dashboard/ file is 404.
//
// Thread safety: the asset table is immutable; handlers may run on any thread.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

namespace httplib {
class Server;
}

namespace tessera {

struct DashboardAsset {
  std::string_view path;          // URL path: "/" or "/dashboard/app.js"
  std::string_view content_type;  // e.g. "text/javascript; charset=utf-8"
  std::string_view body;          // the file's bytes
};

// The Content-Security-Policy sent with every dashboard answer.
inline constexpr std::string_view kDashboardCsp =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'";

// Every embedded asset, "/" first.
std::span<const DashboardAsset> DashboardAssets();

// The asset served at `url_path`, or nullptr.
const DashboardAsset* FindDashboardAsset(std::string_view url_path);

// Adds GET / and GET /dashboard/... to `server`.
void RegisterDashboardRoutes(httplib::Server& server);

namespace dashboard_internal {

// One embedded file as the generated source lists it (name relative to web/dashboard/).
struct EmbeddedFile {
  const char* name;
  const unsigned char* data;
  size_t size;
};

// Defined in the generated dashboard_assets.cc.
std::span<const EmbeddedFile> EmbeddedFiles();

}  // namespace dashboard_internal
}  // namespace tessera
