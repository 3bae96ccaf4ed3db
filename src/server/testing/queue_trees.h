// Test-only: a queue tree from queue YAML, for tests of the controller's pure parts.
// Header-only and part of no target: include it from *_test.cc files only.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "api/queue_config.h"
#include "model/gpu_catalog.h"
#include "model/queue_tree.h"

namespace tessera::testing {

// The tree of `yaml` on the default catalog. YAML it refuses fails the test (value()
// of an error throws, which the test reports).
inline QueueTree TreeFromYaml(const std::string& yaml) {
  StatusOr<QueueTreeSpec> spec = ParseQueueTreeText(yaml, GpuCatalog::Default());
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  StatusOr<QueueTree> tree = QueueTree::Create(std::move(spec).value(), GpuCatalog::Default());
  EXPECT_TRUE(tree.ok()) << tree.status().message();
  return std::move(tree).value();
}

}  // namespace tessera::testing
