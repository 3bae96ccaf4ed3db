// Device memory held by this process, against its cap. An allocation first reserves
// its size (refused when held + size would pass the cap), then commits it under the
// pointer or handle the driver returned, or gives the reservation back if the driver
// failed; a free releases what was committed under that key. Device pointers and
// cuMemCreate handles are separate key spaces. Thread-safe (one mutex).
#ifndef TESSERA_LIMITER_MEMORY_LEDGER_H_
#define TESSERA_LIMITER_MEMORY_LEDGER_H_

#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace tessera_limiter {

enum class MemoryKey { kPointer, kHandle };

class MemoryLedger {
 public:
  explicit MemoryLedger(std::uint64_t cap_bytes) : cap_(cap_bytes) {}

  // True, and `bytes` counted as held, when it fits under the cap.
  [[nodiscard]] bool Reserve(std::uint64_t bytes);
  void Unreserve(std::uint64_t bytes);
  // Records a reserved allocation under its key (a key seen twice keeps both sizes).
  void Commit(MemoryKey kind, std::uint64_t key, std::uint64_t bytes);
  // Gives back what was committed under the key; nullopt for a key never committed
  // (memory the limiter did not see allocated, which it does not count).
  std::optional<std::uint64_t> Release(MemoryKey kind, std::uint64_t key);

  std::uint64_t cap() const { return cap_; }
  std::uint64_t held() const;

 private:
  const std::uint64_t cap_;
  mutable std::mutex mu_;
  std::uint64_t held_ = 0;
  std::unordered_map<std::uint64_t, std::uint64_t> pointers_;
  std::unordered_map<std::uint64_t, std::uint64_t> handles_;
};

}  // namespace tessera_limiter

#endif  // TESSERA_LIMITER_MEMORY_LEDGER_H_
