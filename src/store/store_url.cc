// OpenStore: see store_url.h.
#include "store/store_url.h"

#include <utility>

namespace tessera {
namespace {

constexpr std::string_view kEtcdScheme = "etcd://";
constexpr std::string_view kSqliteScheme = "sqlite:";

Status BadUrl(std::string_view url, const std::string& why) {
  return InvalidArgumentError("store URL '" + std::string(url) + "': " + why +
                              " (expected sqlite:PATH, a path, or "
                              "etcd://HOST:PORT[,HOST:PORT...][/PREFIX])");
}

}  // namespace

StatusOr<StoreUrl> ParseStoreUrl(std::string_view url) {
  StoreUrl out;
  if (url.empty()) {
    return BadUrl(url, "empty");
  }
  if (url.starts_with(kSqliteScheme)) {
    out.path = std::string(url.substr(kSqliteScheme.size()));
    if (out.path.empty()) {
      return BadUrl(url, "no path after sqlite:");
    }
    return out;
  }
  if (!url.starts_with(kEtcdScheme)) {
    const size_t scheme = url.find("://");
    if (scheme != std::string_view::npos) {
      return BadUrl(url, "unknown scheme '" + std::string(url.substr(0, scheme)) + "'");
    }
    out.path = std::string(url);
    return out;
  }
  out.kind = StoreUrl::Kind::kEtcd;
  std::string_view rest = url.substr(kEtcdScheme.size());
  const size_t slash = rest.find('/');
  std::string_view hosts = rest.substr(0, slash);
  std::string_view prefix = slash == std::string_view::npos ? "" : rest.substr(slash);
  if (hosts.empty()) {
    return BadUrl(url, "no etcd endpoint");
  }
  while (true) {
    const size_t comma = hosts.find(',');
    std::string_view endpoint = hosts.substr(0, comma);
    if (endpoint.empty()) {
      return BadUrl(url, "an empty endpoint in the list");
    }
    const size_t colon = endpoint.rfind(':');
    if (colon == std::string_view::npos || colon == 0) {
      return BadUrl(url, "endpoint '" + std::string(endpoint) + "' is not HOST:PORT");
    }
    std::string_view port = endpoint.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string_view::npos ||
        std::stoi(std::string(port)) < 1 || std::stoi(std::string(port)) > 65535) {
      return BadUrl(url, "endpoint '" + std::string(endpoint) + "' has no valid port");
    }
    out.endpoints.emplace_back(endpoint);
    if (comma == std::string_view::npos) {
      break;
    }
    hosts = hosts.substr(comma + 1);
  }
  if (prefix.empty() || prefix == "/") {
    out.prefix = EtcdStoreOptions{}.prefix;
  } else {
    if (prefix.find("//") != std::string_view::npos) {
      return BadUrl(url, "an empty segment in the key prefix");
    }
    out.prefix = std::string(prefix);
    if (out.prefix.back() != '/') {
      out.prefix += '/';
    }
  }
  return out;
}

namespace {

EtcdStoreOptions WithUrl(StoreUrl parsed, EtcdStoreOptions etcd) {
  etcd.endpoints = std::move(parsed.endpoints);
  etcd.prefix = std::move(parsed.prefix);
  return etcd;
}

}  // namespace

StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& url, OpenStoreOptions options) {
  TESSERA_ASSIGN_OR_RETURN(StoreUrl parsed, ParseStoreUrl(url));
  if (parsed.kind == StoreUrl::Kind::kSqlite) {
    if (!options.fence.key.empty()) {
      return InvalidArgumentError("store URL '" + url +
                                  "': a fenced store (several controllers) needs etcd://, not "
                                  "SQLite");
    }
    return OpenSqliteStore(parsed.path, options.sqlite);
  }
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<EtcdStore> store,
                           EtcdStore::Open(WithUrl(std::move(parsed), std::move(options.etcd))));
  if (!options.fence.key.empty()) {
    // Before the store is handed out: no write of this term goes unfenced.
    store->SetFence(std::move(options.fence.key), options.fence.create_revision);
  }
  return std::unique_ptr<Store>(std::move(store));
}

StatusOr<EtcdStoreOptions> EtcdStoreOptionsOf(const std::string& url,
                                              const OpenStoreOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(StoreUrl parsed, ParseStoreUrl(url));
  if (parsed.kind != StoreUrl::Kind::kEtcd) {
    return BadUrl(url, "not an etcd store");
  }
  return WithUrl(std::move(parsed), options.etcd);
}

}  // namespace tessera
