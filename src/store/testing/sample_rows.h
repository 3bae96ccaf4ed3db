// Test-only: a store filled with every kind of row, for tests that copy or compare
// whole stores (store_migrate_test, the etcd store's migration test).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "store/store.h"

namespace tessera {

// Every kind of row: 250 jobs in every state (some keyed), 400
// usage intervals (some open), tokens of each role, queue configuration and metadata.
inline void PopulateSampleRows(Store& store) {
  for (int b = 0; b < 5; ++b) {
    WriteBatch batch;
    for (int i = 0; i < 50; ++i) {
      const int n = b * 50 + i;
      JobRow job;
      job.id = static_cast<uint64_t>(n + 1);
      job.tenant = n % 2 == 0 ? "team-a" : "team-b";
      job.queue = job.tenant;
      job.name = "job-" + std::to_string(n);
      job.idempotency_key = n % 3 == 0 ? "key-" + std::to_string(n) : "";
      job.spec_json = R"({"name":"job-)" + std::to_string(n) + R"("})";
      job.state = std::string(kJobStates[static_cast<size_t>(n) % kJobStates.size()]);
      job.submit_us = 1'000'000 + n;
      job.start_us = job.state == "pending" ? 0 : 2'000'000 + n;
      job.attempts = n % 4;
      job.preemptions = n % 2;
      job.exit_code = job.state == "failed" ? 3 : 0;
      job.reason = job.state == "failed" ? "exit 3" : "";
      job.placement_json = job.state == "running" ? R"({"node":"a","gpus":[0]})" : "";
      job.progress_us = n * 10;
      batch.jobs.push_back(job);
    }
    for (int i = 0; i < 80; ++i) {
      const int n = b * 80 + i;
      UsageRow u;
      u.job = static_cast<uint64_t>(n % 250 + 1);
      u.tenant = n % 2 == 0 ? "team-a" : "team-b";
      u.queue = u.tenant;
      u.start_us = 5'000'000 - n * 1000;  // not in insertion order
      u.end_us = n % 7 == 0 ? 0 : u.start_us + 500;
      u.gpu_milli = 1000 * (1 + n % 8);
      u.used_gpu_milli = n % 5 == 0 ? -1 : u.gpu_milli / 2;
      batch.usage.push_back(u);
    }
    ASSERT_TRUE(store.Commit(std::move(batch)).ok());
  }
  WriteBatch rest;
  rest.tokens = {{"hash-admin", "admin", "", "admin.token", 1, ""},
                 {"hash-a", "tenant", "team-a", "a", 2, ""},
                 {"hash-alice", "tenant", "team-a", "alice@team-a", 2, "alice"},
                 {"hash-node", "node", "", "node-1", 3, ""}};
  rest.kv = {{"queues", "cohorts: []"}, {"cluster/id", "abc"}, {"validation/x", "{}"}};
  ASSERT_TRUE(store.Commit(std::move(rest)).ok());
}

}  // namespace tessera
