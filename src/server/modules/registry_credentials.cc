#include "server/modules/registry_credentials.h"

#include <nlohmann/json.hpp>

#include "api/agent_protocol.h"
#include "api/container_spec.h"

namespace tessera {
namespace {

constexpr size_t kMaxSecret = 1024;

Status CheckSecret(const std::string& what, const std::string& text) {
  if (text.empty() || text.size() > kMaxSecret) {
    return InvalidArgumentError(what + ": 1 to 1024 characters are required");
  }
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) {
      return InvalidArgumentError(what + ": control characters are not allowed");
    }
  }
  return Status::Ok();
}

}  // namespace

Status RegistryCredentials::Load(Store& store) {
  TESSERA_ASSIGN_OR_RETURN(auto stored, store.ListKv(kKeyPrefix));
  MutexLock lock(mu_);
  for (const auto& record : stored) {
    // Record wrote only readable values: one that is not (a damaged store) is passed
    // over, so that its tenant logs in again, rather than stopping the controller.
    const nlohmann::json v = nlohmann::json::parse(record.second, nullptr, false);
    if (!record.second.empty() &&
        (!v.is_object() || !v.value("username", nlohmann::json()).is_string() ||
         !v.value("password", nlohmann::json()).is_string())) {
      ++unreadable_;
      continue;
    }
    ApplyLocked(record);
  }
  return Status::Ok();
}

StatusOr<std::pair<std::string, std::string>> RegistryCredentials::Record(
    const std::string& tenant, const std::string& registry, const std::string& username,
    const std::string& password) const {
  // A registry is what a reference's first component names: check it as one.
  StatusOr<ImageReference> ref = ParseImageReference(registry + "/x");
  if (!ref.ok() || ref->registry != registry || registry.find('/') != std::string::npos) {
    return InvalidArgumentError("registry: '" + registry.substr(0, 120) +
                                "' is not a registry host[:port], e.g. nvcr.io");
  }
  // The tenant is the key's first component: one without '/' and printable.
  TESSERA_RETURN_IF_ERROR(CheckSecret("tenant", tenant));
  if (tenant.find('/') != std::string::npos) {
    return InvalidArgumentError("tenant: '/' is not allowed in a tenant's name");
  }
  const std::string key = std::string(kKeyPrefix) + tenant + "/" + registry;
  if (username.empty() && password.empty()) {
    return std::make_pair(key, std::string());  // removed
  }
  TESSERA_RETURN_IF_ERROR(CheckSecret("username", username));
  TESSERA_RETURN_IF_ERROR(CheckSecret("password", password));
  return std::make_pair(key, nlohmann::json{{"username", username}, {"password", password}}.dump());
}

void RegistryCredentials::Apply(const std::pair<std::string, std::string>& record) {
  MutexLock lock(mu_);
  ApplyLocked(record);
}

void RegistryCredentials::ApplyLocked(const std::pair<std::string, std::string>& record) {
  const std::string rest = record.first.substr(std::string(kKeyPrefix).size());
  const size_t slash = rest.find('/');
  if (slash == std::string::npos) {
    return;
  }
  const std::string tenant = rest.substr(0, slash);
  const std::string registry = rest.substr(slash + 1);
  if (record.second.empty()) {
    by_tenant_[tenant].erase(registry);
    return;
  }
  const nlohmann::json v = nlohmann::json::parse(record.second, nullptr, false);
  if (v.is_object()) {
    by_tenant_[tenant][registry] = {v.value("username", ""), v.value("password", "")};
  }
}

std::vector<std::string> RegistryCredentials::Registries(const std::string& tenant) const {
  MutexLock lock(mu_);
  std::vector<std::string> out;
  if (auto it = by_tenant_.find(tenant); it != by_tenant_.end()) {
    for (const auto& [registry, unused] : it->second) {
      out.push_back(registry);
    }
  }
  return out;
}

std::string RegistryCredentials::AuthFile(const std::string& tenant,
                                          const std::string& image) const {
  if (image.empty()) {
    return "";  // a bare process
  }
  MutexLock lock(mu_);
  auto it = by_tenant_.find(tenant);
  if (it == by_tenant_.end()) {
    return "";  // most tenants: no parse
  }
  StatusOr<ImageReference> ref = ParseImageReference(image);
  if (!ref.ok()) {
    return "";
  }
  auto cred = it->second.find(ref->registry);
  if (cred == it->second.end()) {
    return "";
  }
  const std::string auth = Base64Encode(cred->second.username + ":" + cred->second.password);
  return nlohmann::json{{"auths", {{ref->registry, {{"auth", auth}}}}}}.dump();
}

}  // namespace tessera
