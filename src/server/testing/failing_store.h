// Test-only: a store whose commits fail while `fail` is set (a full disk, a lost etcd),
// over a real one it borrows. Header-only and part of no target: include it from
// *_test.cc files only.
#pragma once

#include "store/store.h"

namespace tessera::testing {

class FailingStore final : public ForwardingStore {
 public:
  explicit FailingStore(Store* inner) : ForwardingStore(inner) {}
  Status Commit(WriteBatch batch) override {
    return fail ? UnavailableError("disk full") : ForwardingStore::Commit(std::move(batch));
  }
  bool fail = false;
};

}  // namespace tessera::testing
