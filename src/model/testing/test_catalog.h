// Test-only: the default GPU catalog, which most tests describe their nodes and jobs
// against, and its models by name. Header-only and part of no target: include it from
// *_test.cc files and other test helpers only.
#pragma once

#include <string_view>

#include "model/gpu_catalog.h"

namespace tessera::testing {

inline const GpuCatalog& Catalog() { return GpuCatalog::Default(); }
inline GpuModelId Model(std::string_view name) { return *Catalog().Find(name); }

}  // namespace tessera::testing
