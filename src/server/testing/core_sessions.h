// Test-only: a core session (server/core_session.h) and what it learns, for the tests
// of the session and of what the scheduler learned (scheduler_memory.h). Header-only and
// part of no target: include it from *_test.cc files only.
#pragma once

#include <string>

#include "model/gpu_catalog.h"
#include "server/core_session.h"

namespace tessera::testing {

// A session on the default catalog, seed 1, the "bestfit" placer.
inline CoreSession BestFitSession() { return CoreSession(GpuCatalog::Default(), 1, "bestfit"); }

// Teaches `core`'s runtime predictor twelve runs and its workload learner five tasks.
inline void TeachSomeWork(CoreSession& core) {
  constexpr Micros kS = 1'000'000;
  for (int i = 1; i <= 12; ++i) {
    RuntimeFeatures f{"team-a", i % 2 == 0 ? "alice" : "bob", "train-" + std::to_string(i % 3),
                      1 + i % 4, 3600 * kS};
    core.predictor().Observe(f, (i * 97 % 50 + 1) * 60 * kS);
  }
  for (int i = 0; i < 5; ++i) {
    TaskRequest t;
    t.cpu = MilliCpu(4000 * (1 + i % 2));
    t.memory = MiB(16000 + 1000 * i);
    t.gpu_count = 1 + i % 2;
    t.gpu_milli = i % 2 == 0 ? MilliGpu(500) : kWholeGpu;
    core.learner().Observe(t);
  }
}

}  // namespace tessera::testing
