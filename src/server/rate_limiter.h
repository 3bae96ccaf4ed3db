// RateLimiter: one token bucket per key (the caller passes the API token's hash).
//
// Each key's bucket holds up to `burst` tokens and refills at `rate_per_second`; a request
// takes one token or is refused. A key seen for the first time starts with a full bucket.
// Time comes from the injected Clock (a clock that steps back refills nothing). Memory is
// bounded: when a new key would exceed max_keys, buckets that have refilled to full (idle
// for at least burst / rate seconds, so forgetting them changes nothing) are dropped; if
// that is not enough, the least recently used quarter is dropped (those keys get a fresh
// burst). rate_per_second <= 0 means no limit (Allow is always true); burst is at least 1.
// Thread safety: thread-safe (one mutex); the Clock must be safe to read from the calling
// threads.
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/clock.h"

namespace tessera {

class RateLimiter {
 public:
  static constexpr size_t kDefaultMaxKeys = 10000;

  RateLimiter(const Clock& clock, double rate_per_second, double burst,
              size_t max_keys = kDefaultMaxKeys);

  // Takes one token from the key's bucket; false when the bucket is empty.
  bool Allow(std::string_view key);

  // Keys with a bucket now (for tests and metrics).
  size_t size() const;

 private:
  struct Bucket {
    double tokens = 0;
    Micros last_us = 0;  // when tokens was last brought up to date
  };
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  double Refilled(const Bucket& bucket, Micros now) const;
  void Evict(Micros now);

  const Clock& clock_;
  const double rate_per_us_;
  const double burst_;
  const size_t max_keys_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Bucket, StringHash, std::equal_to<>> buckets_;
};

}  // namespace tessera
