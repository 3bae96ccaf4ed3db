// The etcd store's keys and values (etcd_store.h has the layout); internal to the store.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "store/store.h"

namespace tessera::etcd_store {

// A number zero-padded to 20 digits, so that key order is numeric order.
std::string Padded(uint64_t n);

struct Keys {
  std::string prefix;

  std::string Job(uint64_t id) const { return prefix + "jobs/" + Padded(id); }
  std::string Jobs() const { return prefix + "jobs/"; }
  std::string Usage(uint64_t job, uint64_t seq) const {
    return prefix + "usage/" + Padded(job) + "/" + Padded(seq);
  }
  std::string UsageOf(uint64_t job) const { return prefix + "usage/" + Padded(job) + "/"; }
  std::string Usages() const { return prefix + "usage/"; }
  std::string Token(std::string_view hash) const { return prefix + "tokens/" + std::string(hash); }
  std::string Tokens() const { return prefix + "tokens/"; }
  std::string Kv(std::string_view key) const { return prefix + "kv/" + std::string(key); }
  std::string Kvs() const { return prefix + "kv/"; }
  std::string Idempotency(std::string_view tenant, std::string_view key) const {
    return prefix + "idem/" + std::to_string(tenant.size()) + ":" + std::string(tenant) +
           std::string(key);
  }
  std::string Marker() const { return prefix + "meta/commit"; }
};

std::string EncodeJob(const JobRow& row);
std::optional<JobRow> DecodeJob(std::string_view bytes);
std::string EncodeUsage(const UsageRow& row);
std::optional<UsageRow> DecodeUsage(std::string_view bytes);
std::string EncodeToken(const TokenRow& row);
std::optional<TokenRow> DecodeToken(std::string_view bytes);

struct Marker {
  std::string nonce;
  uint64_t next_usage_seq = 1;
};
std::string EncodeMarker(const Marker& marker);
std::optional<Marker> DecodeMarker(std::string_view bytes);

// The insertion sequence number at the end of a usage key; 0 when malformed.
uint64_t UsageSeq(std::string_view key);

}  // namespace tessera::etcd_store
