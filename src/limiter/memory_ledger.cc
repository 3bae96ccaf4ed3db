#include "limiter/memory_ledger.h"

#include <cstdint>
#include <mutex>
#include <optional>

namespace tessera_limiter {

bool MemoryLedger::Reserve(std::uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > cap_ || held_ > cap_ - bytes) return false;
  held_ += bytes;
  return true;
}

void MemoryLedger::Unreserve(std::uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  held_ -= bytes < held_ ? bytes : held_;
}

void MemoryLedger::Commit(MemoryKey kind, std::uint64_t key, std::uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& table = kind == MemoryKey::kPointer ? pointers_ : handles_;
  table[key] += bytes;
}

std::optional<std::uint64_t> MemoryLedger::Release(MemoryKey kind, std::uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& table = kind == MemoryKey::kPointer ? pointers_ : handles_;
  const auto it = table.find(key);
  if (it == table.end()) return std::nullopt;
  const std::uint64_t bytes = it->second;
  table.erase(it);
  held_ -= bytes < held_ ? bytes : held_;
  return bytes;
}

std::uint64_t MemoryLedger::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_;
}

}  // namespace tessera_limiter
