#include "server/tenant_identities.h"

#include <charconv>
#include <iostream>
#include <set>

namespace tessera {
namespace {

constexpr const char* kIdentityKeyPrefix = "uid/";

std::string IdentityText(int64_t uid, int64_t gid) {
  return std::to_string(uid) + ":" + std::to_string(gid);
}

bool ParseIdentity(const std::string& text, int64_t* uid, int64_t* gid) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) {
    return false;
  }
  const char* end = text.data() + text.size();
  auto a = std::from_chars(text.data(), text.data() + colon, *uid);
  auto b = std::from_chars(text.data() + colon + 1, end, *gid);
  return a.ec == std::errc() && b.ec == std::errc() && b.ptr == end && *uid > 0 && *gid > 0;
}

}  // namespace

Status TenantIdentities::Load(Store& store) {
  TESSERA_ASSIGN_OR_RETURN(auto stored, store.ListKv(kIdentityKeyPrefix));
  for (const auto& [key, text] : stored) {
    int64_t uid = 0;
    int64_t gid = 0;
    if (!ParseIdentity(text, &uid, &gid)) {
      return InternalError("stored identity '" + key + "' is not uid:gid");
    }
    assigned_[key.substr(std::string(kIdentityKeyPrefix).size())] = {uid, gid};
  }
  for (const auto& [tenant, id] : options_.run_as) {
    for (const auto& [other, held] : assigned_) {
      if (other != tenant && held.first == id.first) {
        return InvalidArgumentError("--run-as " + tenant + "=" + std::to_string(id.first) +
                                    ": uid " + std::to_string(id.first) + " is already tenant " +
                                    other + "'s");
      }
    }
  }
  return Status::Ok();
}

std::optional<TenantIdentities::Identity> TenantIdentities::Known(const std::string& tenant) const {
  if (auto it = options_.run_as.find(tenant); it != options_.run_as.end()) {
    return it->second;
  }
  if (auto it = assigned_.find(tenant); it != assigned_.end()) {
    return it->second;
  }
  return std::nullopt;
}

TenantIdentities::Identity TenantIdentities::For(const std::string& tenant, WriteBatch& batch) {
  if (std::optional<Identity> known = Known(tenant)) {
    return *known;
  }
  // The lowest pool uid nobody holds, neither from the pool nor from run_as.
  std::set<int64_t> taken;
  for (const auto& [name, id] : assigned_) {
    taken.insert(id.first);
  }
  for (const auto& [name, id] : options_.run_as) {
    taken.insert(id.first);
  }
  for (int64_t uid = options_.pool_start; uid < options_.pool_start + options_.pool_size; ++uid) {
    if (taken.count(uid) == 0) {
      assigned_[tenant] = {uid, uid};
      batch.kv.emplace_back(kIdentityKeyPrefix + tenant, IdentityText(uid, uid));
      return {uid, uid};
    }
  }
  std::cerr << "tessera server: the uid pool is exhausted; tenant " << tenant
            << " has no identity to run tasks as\n";
  return {-1, -1};
}

}  // namespace tessera
