// Test-only: a job's stored row (store/store.h JobRow) as the controller writes it, for
// the tests of what reads rows back (the job table, the views). Header-only and part of
// no target: include it from *_test.cc files only.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "api/job_codec.h"
#include "model/gpu_catalog.h"
#include "store/store.h"

namespace tessera::testing {

// The row of job `id` in `state`, submitted as `job_yaml` (default catalog) by tenant
// team-a to queue main; named after the submission. YAML it refuses fails the test.
inline JobRow StoredJobRow(uint64_t id, const std::string& state, const std::string& job_yaml) {
  StatusOr<JobSubmission> sub = ParseJobYaml(job_yaml, GpuCatalog::Default());
  EXPECT_TRUE(sub.ok()) << sub.status().message();
  JobRow row;
  row.id = id;
  row.tenant = "team-a";
  row.queue = "main";
  row.state = state;
  if (sub.ok()) {
    row.name = sub->spec.name;
    row.spec_json = JobSubmissionToJson(*sub, GpuCatalog::Default()).dump();
  }
  return row;
}

}  // namespace tessera::testing
