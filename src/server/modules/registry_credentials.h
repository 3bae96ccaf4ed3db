// RegistryCredentials: each tenant's credentials for image registries (the secret a
// tenant sets so that its jobs can pull private images), kept in the store under
// "registry-auth/<tenant>/<registry>" as {"username", "password"}, read into memory at
// start (Load) and changed only by a record Record made, once it is durable (Apply;
// services/registry_credentials_service.h commits it). A module attached to the
// controller: its OnLaunch gives a launch of a job in an image its tenant's credential
// for the image's registry as a Podman auth file (AuthFile), which the agent uses for
// that pull only. Nothing here is ever in a view, and no tenant can read any credential
// back (Registries names the registries only).
// Thread safety: its own lock (a leaf: it calls out to nothing while holding it); the
// hooks run under the controller's core lock, the service's calls without it.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "server/modules/controller_module.h"
#include "store/store.h"

namespace tessera {

class RegistryCredentials final : public ControllerModule {
 public:
  static constexpr const char* kKeyPrefix = "registry-auth/";

  // Reads what was stored before; a stored value that does not read back is passed over
  // (counted in unreadable()). An error only when the store cannot be read.
  Status Load(Store& store) override;
  void OnLaunch(const std::string& tenant, const JobSubmission& job,
                TaskLaunch& launch) const override {
    launch.registry_auth = AuthFile(tenant, job.container.image);
  }
  int unreadable() const {
    MutexLock lock(mu_);
    return unreadable_;
  }
  // The store record for setting (password non-empty) or removing (both empty) the
  // tenant's credential for `registry` (host[:port], e.g. nvcr.io, 127.0.0.1:5000).
  // InvalidArgument for a bad registry or a username or password that is empty, over
  // 1 KiB, or not printable text.
  StatusOr<std::pair<std::string, std::string>> Record(const std::string& tenant,
                                                       const std::string& registry,
                                                       const std::string& username,
                                                       const std::string& password) const;
  // Takes a record Record made once it is durable.
  void Apply(const std::pair<std::string, std::string>& record);
  // The registries the tenant has a credential for, sorted.
  std::vector<std::string> Registries(const std::string& tenant) const;
  // A Podman auth file ({"auths": {REGISTRY: {"auth": base64(user:password)}}}) with the
  // tenant's credential for the registry of `image` (a normalised reference); "" when it
  // has none (or `image` is "").
  std::string AuthFile(const std::string& tenant, const std::string& image) const;

 private:
  struct Credential {
    std::string username;
    std::string password;
  };
  void ApplyLocked(const std::pair<std::string, std::string>& record) REQUIRES(mu_);

  mutable Mutex mu_;
  // tenant -> registry -> credential
  std::map<std::string, std::map<std::string, Credential>> by_tenant_ GUARDED_BY(mu_);
  int unreadable_ GUARDED_BY(mu_) = 0;
};

}  // namespace tessera
