// Rng: injected randomness.
//
// Core code that needs randomness (random placement, tie breaks) takes an Rng&;
// drivers seed it, so every run is reproducible from its seed. Pcg32 is the
// default generator (O'Neill's PCG XSH-RR 64/32): small state, good statistics,
// and the same stream on every platform, unlike std::uniform_int_distribution.
// Thread safety: none; use one generator per thread.
#pragma once

#include <cstdint>
#include <span>
#include <utility>

namespace tessera {

class Rng {
 public:
  virtual ~Rng() = default;
  virtual uint32_t NextU32() = 0;

  // Uniform in [0, bound), bound > 0, without modulo bias (Lemire's method).
  uint32_t Uniform(uint32_t bound);
  // Uniform in [0, 1).
  double UniformDouble();

  // Fisher-Yates shuffle, identical on every platform for a given seed.
  template <typename T>
  void Shuffle(std::span<T> items) {
    for (size_t i = items.size(); i > 1; --i) {
      size_t j = Uniform(static_cast<uint32_t>(i));
      std::swap(items[i - 1], items[j]);
    }
  }
};

class Pcg32 final : public Rng {
 public:
  explicit Pcg32(uint64_t seed, uint64_t stream = 0x5851f42d4c957f2dULL);
  uint32_t NextU32() override;

 private:
  uint64_t state_ = 0;
  uint64_t inc_ = 0;
};

}  // namespace tessera
