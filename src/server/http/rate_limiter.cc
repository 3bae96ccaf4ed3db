#include "base/mutex.h"
#include "server/http/rate_limiter.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace tessera {
namespace {

// Slack for floating-point refill arithmetic: a bucket this close to one token has one.
constexpr double kEpsilon = 1e-9;

}  // namespace

RateLimiter::RateLimiter(const Clock& clock, double rate_per_second, double burst, size_t max_keys)
    : clock_(clock),
      rate_per_us_(rate_per_second > 0 ? rate_per_second / 1e6 : 0),
      burst_(std::max(burst, 1.0)),
      max_keys_(std::max<size_t>(max_keys, 1)) {}

double RateLimiter::Refilled(const Bucket& bucket, Micros now) const {
  Micros elapsed = std::max<Micros>(now - bucket.last_us, 0);
  return std::min(burst_, bucket.tokens + static_cast<double>(elapsed) * rate_per_us_);
}

bool RateLimiter::Allow(std::string_view key) {
  if (rate_per_us_ <= 0) {
    return true;
  }
  MutexLock lock(mu_);
  const Micros now = clock_.NowMicros();
  auto found = buckets_.find(key);
  if (found == buckets_.end()) {
    if (buckets_.size() >= max_keys_) {
      Evict(now);
    }
    found = buckets_.emplace(std::string(key), Bucket{burst_, now}).first;
  }
  Bucket& bucket = found->second;
  bucket.tokens = Refilled(bucket, now);
  bucket.last_us = std::max(bucket.last_us, now);
  if (bucket.tokens + kEpsilon < 1.0) {
    return false;
  }
  bucket.tokens = std::max(bucket.tokens - 1.0, 0.0);
  return true;
}

void RateLimiter::Charge(std::string_view key, double cost) {
  if (rate_per_us_ <= 0 || cost <= 0) {
    return;
  }
  MutexLock lock(mu_);
  auto found = buckets_.find(key);
  if (found == buckets_.end()) {
    return;
  }
  const Micros now = clock_.NowMicros();
  Bucket& bucket = found->second;
  bucket.tokens = std::max(Refilled(bucket, now) - cost, -burst_);
  bucket.last_us = std::max(bucket.last_us, now);
}

void RateLimiter::Evict(Micros now) {
  std::erase_if(buckets_, [&](const auto& entry) {
    return Refilled(entry.second, now) + kEpsilon >= burst_;
  });
  if (buckets_.size() < max_keys_) {
    return;
  }
  // Every bucket is in use: drop the least recently used quarter.
  std::vector<std::pair<Micros, const std::string*>> by_age;
  by_age.reserve(buckets_.size());
  for (const auto& [key, bucket] : buckets_) {
    by_age.emplace_back(bucket.last_us, &key);
  }
  size_t drop = std::max<size_t>(by_age.size() / 4, 1);
  std::nth_element(by_age.begin(), by_age.begin() + static_cast<std::ptrdiff_t>(drop - 1),
                   by_age.end());
  std::vector<std::string> victims;
  victims.reserve(drop);
  for (size_t i = 0; i < drop; ++i) {
    victims.push_back(*by_age[i].second);
  }
  for (const std::string& victim : victims) {
    buckets_.erase(victim);
  }
}

size_t RateLimiter::size() const {
  MutexLock lock(mu_);
  return buckets_.size();
}

AuthThrottle::AuthThrottle(const Clock& clock, AuthThrottleOptions options)
    : clock_(clock), options_(options) {}

Micros AuthThrottle::Blocked(std::string_view address) {
  if (options_.max_failures <= 0) {
    return 0;
  }
  MutexLock lock(mu_);
  auto it = entries_.find(std::string(address));
  if (it == entries_.end()) {
    return 0;
  }
  return std::max<Micros>(it->second.blocked_until - clock_.NowMicros(), 0);
}

void AuthThrottle::Failed(std::string_view address) {
  if (options_.max_failures <= 0) {
    return;
  }
  MutexLock lock(mu_);
  const Micros now = clock_.NowMicros();
  auto it = entries_.find(std::string(address));
  if (it == entries_.end()) {
    if (entries_.size() >= options_.max_keys) {
      // Forget the addresses seen least recently; a blocked one keeps its block only
      // while it is among the newest, which a guesser cannot use (it is blocked).
      std::vector<std::pair<Micros, std::string>> by_age;
      for (const auto& [key, e] : entries_) {
        by_age.emplace_back(std::max(e.last_seen, e.blocked_until), key);
      }
      const size_t drop = std::max<size_t>(by_age.size() / 4, 1);
      std::nth_element(by_age.begin(), by_age.begin() + static_cast<std::ptrdiff_t>(drop - 1),
                       by_age.end());
      for (size_t i = 0; i < drop; ++i) {
        entries_.erase(by_age[i].second);
      }
    }
    it = entries_.emplace(std::string(address), Entry{now, 0, 0, 0, now}).first;
  }
  Entry& e = it->second;
  if (now - e.last_seen > 10 * options_.window && now >= e.blocked_until) {
    e.last_block = 0;  // quiet for long enough: the next block starts small again
  }
  e.last_seen = now;
  if (now - e.window_start >= options_.window) {
    e.window_start = now;
    e.failures = 0;
  }
  if (++e.failures > options_.max_failures && now >= e.blocked_until) {
    e.last_block = e.last_block == 0 ? options_.block : std::min(2 * e.last_block, options_.max_block);
    e.blocked_until = now + e.last_block;
    e.failures = 0;
    e.window_start = now;
  }
}

size_t AuthThrottle::size() const {
  MutexLock lock(mu_);
  return entries_.size();
}

}  // namespace tessera
