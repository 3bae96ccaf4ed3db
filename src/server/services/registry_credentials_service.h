// RegistryCredentialsService: tenants' credentials for image registries (GET, PUT and
// DELETE /v1/registry-credentials; server/http/server_registry.cc).
//
// Owns: the RegistryCredentials module (modules/registry_credentials.h: the credentials
// and their rows under "registry-auth/"). Open attaches it to the controller
// (Controller::Attach), which loads its stored state then and from then on calls its
// OnLaunch as any module's: a launch of a job in an image carries its tenant's
// credential for that image's registry.
// Uses: the controller's transactions only (Controller::Transact: a change is a row of
// the transaction's batch, made durable before the module takes it).
// Lifetime: the service must outlive the controller it is attached to.
// Thread safety: every method may be called from any thread; the module has its own
// lock, taken after the core lock when a hook runs. Changes are made one at a time (a
// lock of the service's, taken before the core lock), so that the module applies them
// in the order the store made them durable.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "server/controller.h"
#include "server/modules/registry_credentials.h"

namespace tessera {

class RegistryCredentialsService {
 public:
  static StatusOr<std::unique_ptr<RegistryCredentialsService>> Open(Controller& controller);

  // Sets the tenant's credential for `registry` (host[:port]), or removes it when both
  // `username` and `password` are empty; durable when it returns OK. InvalidArgument
  // for a bad registry, tenant name, username or password (RegistryCredentials::Record).
  Status Set(const std::string& tenant, const std::string& registry, const std::string& username,
             const std::string& password);
  // The registries the tenant has a credential for, sorted; never a credential.
  std::vector<std::string> Registries(const std::string& tenant) const {
    return module_.Registries(tenant);
  }

 private:
  explicit RegistryCredentialsService(Controller& controller) : controller_(controller) {}

  Controller& controller_;
  RegistryCredentials module_;
  Mutex set_mu_;
};

}  // namespace tessera
