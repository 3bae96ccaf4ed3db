// RateLimiter: one token bucket per key (the caller passes the API token's hash).
//
// Each key's bucket holds up to `burst` tokens and refills at `rate_per_second`; a request
// takes one token or is refused. A key seen for the first time starts with a full bucket.
// Time comes from the injected Clock (a clock that steps back refills nothing). Memory is
// bounded: when a new key would exceed max_keys, buckets that have refilled to full (idle
// for at least burst / rate seconds, so forgetting them changes nothing) are dropped; if
// that is not enough, the least recently used quarter is dropped (those keys get a fresh
// burst). rate_per_second <= 0 means no limit (Allow is always true); burst is at least 1.
// Costly requests (a listing of many rows) take more through Charge, after the fact:
// the bucket may go into debt (down to -burst), and the key is refused until it has
// refilled to one token, so a key's sustained cost, not its request count, is bounded.
//
// AuthThrottle: failed authentications per source address. More than max_failures
// failures within `window` block the address for `block` (Blocked() says how long is
// left); each further block of the same address within a quiet period of 10 windows
// doubles, up to max_block. It keeps at most max_keys addresses (the oldest are
// forgotten first). max_failures <= 0 disables it.
// Thread safety: both classes are thread-safe (one mutex each); the Clock must be safe
// to read from the calling threads.
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/mutex.h"
#include "base/clock.h"

namespace tessera {

class RateLimiter {
 public:
  static constexpr size_t kDefaultMaxKeys = 10000;

  RateLimiter(const Clock& clock, double rate_per_second, double burst,
              size_t max_keys = kDefaultMaxKeys);

  // Takes one token from the key's bucket; false when the bucket is empty.
  bool Allow(std::string_view key);
  // Takes `cost` more tokens from the key's bucket (after Allow let the request in); the
  // bucket may go as low as -burst. Nothing for a key without a bucket or cost <= 0.
  void Charge(std::string_view key, double cost);

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
  void Evict(Micros now) REQUIRES(mu_);

  const Clock& clock_;
  const double rate_per_us_;
  const double burst_;
  const size_t max_keys_;
  mutable Mutex mu_;
  std::unordered_map<std::string, Bucket, StringHash, std::equal_to<>> buckets_ GUARDED_BY(mu_);
};

struct AuthThrottleOptions {
  int max_failures = 10;              // failures allowed per window; <= 0: never block
  Micros window = 10'000'000;         // 10 s
  Micros block = 10'000'000;          // the first block of an address
  Micros max_block = 300'000'000;     // blocks double up to this
  size_t max_keys = 10000;            // addresses remembered
};

class AuthThrottle {
 public:
  AuthThrottle(const Clock& clock, AuthThrottleOptions options);

  // How long `address` stays blocked (0: not blocked).
  Micros Blocked(std::string_view address);
  // Records one failed authentication from `address`.
  void Failed(std::string_view address);
  size_t size() const;

 private:
  struct Entry {
    Micros window_start = 0;
    int failures = 0;
    Micros blocked_until = 0;
    Micros last_block = 0;  // the length of the last block (0: none yet)
    Micros last_seen = 0;
  };
  const Clock& clock_;
  const AuthThrottleOptions options_;
  mutable Mutex mu_;
  std::unordered_map<std::string, Entry> entries_ GUARDED_BY(mu_);
};

}  // namespace tessera
