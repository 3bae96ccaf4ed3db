// CoreModules: the controller's own feature modules, built and put in their hook order
// (modules/module_host.h).
//
// The order: Accounting first (its families lead the modules' part of /metrics; modules
// attached later go right after it), then TimeLimits, GpuHealthModule, IdleModule, the
// ETAs (`eta`), NodeHistory, the job gates (`gates`), RestartsModule and TaskStartNotes.
// Stop runs in the reverse order. The host owns every module but `eta` and `gates`,
// which the controller calls by name and owns itself (they must outlive every call on
// the host; its destructor touches none of them).
#pragma once

#include "model/gpu_catalog.h"
#include "server/modules/eta_module.h"
#include "server/modules/gpu_health.h"
#include "server/modules/job_gates_module.h"
#include "server/modules/module_host.h"

namespace tessera {

// `health`: when telemetry drains a GPU; `catalog` (outlives the host): the GPU models
// the node history names.
ModuleHost CoreModules(const GpuHealthOptions& health, const GpuCatalog& catalog, EtaModule& eta,
                       JobGatesModule& gates);

}  // namespace tessera
