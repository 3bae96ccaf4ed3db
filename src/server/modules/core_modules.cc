#include "server/modules/core_modules.h"

#include <memory>

#include "server/modules/accounting.h"
#include "server/modules/gpu_health_module.h"
#include "server/modules/idle_module.h"
#include "server/modules/node_history.h"
#include "server/modules/restarts_module.h"
#include "server/modules/task_start_notes.h"
#include "server/modules/time_limits.h"

namespace tessera {

ModuleHost CoreModules(const GpuHealthOptions& health, const GpuCatalog& catalog, EtaModule& eta,
                       JobGatesModule& gates) {
  ModuleHost host;
  host.Add(std::make_unique<Accounting>());
  host.Add(std::make_unique<TimeLimits>());
  host.Add(std::make_unique<GpuHealthModule>(health));
  host.Add(std::make_unique<IdleModule>());
  host.Add(eta);
  host.Add(std::make_unique<NodeHistory>(catalog));
  host.Add(gates);
  host.Add(std::make_unique<RestartsModule>());
  host.Add(std::make_unique<TaskStartNotes>());
  return host;
}

}  // namespace tessera
