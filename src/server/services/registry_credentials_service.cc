#include "server/services/registry_credentials_service.h"

#include <utility>

#include "server/services/service_step.h"

namespace tessera {

StatusOr<std::unique_ptr<RegistryCredentialsService>> RegistryCredentialsService::Open(
    Controller& controller) {
  std::unique_ptr<RegistryCredentialsService> service(new RegistryCredentialsService(controller));
  TESSERA_RETURN_IF_ERROR(controller.Attach(service->module_));
  return service;
}

Status RegistryCredentialsService::Set(const std::string& tenant, const std::string& registry,
                                       const std::string& username, const std::string& password) {
  TESSERA_ASSIGN_OR_RETURN(auto record, module_.Record(tenant, registry, username, password));
  // One change at a time: the module takes them in the order the store made them durable.
  MutexLock one(set_mu_);
  TESSERA_RETURN_IF_ERROR(controller_.Transact([&record](ServiceStep& step) {
    step.Put(record.first, record.second);
    return Status::Ok();
  }));
  module_.Apply(record);  // durable now
  return Status::Ok();
}

}  // namespace tessera
