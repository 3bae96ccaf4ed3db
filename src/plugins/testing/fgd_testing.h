// Test-only helpers for fragmentation-aware plugins: a FragmentationModel built
// straight from hand-written typical tasks, every one of them counted as covered.
#pragma once

#include <utility>
#include <vector>

#include "plugins/fgd.h"

namespace tessera::testing {

inline FragmentationModel ModelOf(std::vector<TypicalTask> tasks) {
  TypicalWorkload w;
  for (const TypicalTask& t : tasks) {
    w.covered += t.count;
  }
  w.total = w.covered;
  w.tasks = std::move(tasks);
  return FragmentationModel(std::move(w));
}

}  // namespace tessera::testing
