// The Store contract as parameterised tests (StoreTest), shared by every store's test
// binary: store_test.cc runs it on the in-memory and SQLite stores, etcd/etcd_store_test.cc
// on the etcd store. A binary that compiles store_contract_test.cc instantiates StoreTest
// with its own StoreFactory values.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/testing/temp_dir.h"
#include "store/store.h"

namespace tessera::store_contract {

JobRow MakeJob(uint64_t id, std::string tenant = "team-a", std::string key = "");
UsageRow MakeUsage(uint64_t job, int64_t start_us, int64_t end_us);
std::vector<uint64_t> Ids(const std::vector<JobRow>& jobs);

// Opens a fresh, empty store for one test; `dir` is the test's own scratch directory.
struct StoreFactory {
  std::string name;
  std::function<std::unique_ptr<Store>(const std::string& dir)> open;
};

class StoreTest : public ::testing::TestWithParam<StoreFactory> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    store_ = GetParam().open(dir_.path());
    ASSERT_NE(store_, nullptr);
  }

  ::tessera::testing::TempDir dir_{"tessera_store_"};
  std::unique_ptr<Store> store_;
};

}  // namespace tessera::store_contract
