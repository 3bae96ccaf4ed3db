#include "base/rng.h"

namespace tessera {

uint32_t Rng::Uniform(uint32_t bound) {
  // Lemire, "Fast Random Integer Generation in an Interval" (2019).
  uint64_t m = static_cast<uint64_t>(NextU32()) * bound;
  auto low = static_cast<uint32_t>(m);
  if (low < bound) {
    uint32_t threshold = (0U - bound) % bound;
    while (low < threshold) {
      m = static_cast<uint64_t>(NextU32()) * bound;
      low = static_cast<uint32_t>(m);
    }
  }
  return static_cast<uint32_t>(m >> 32);
}

double Rng::UniformDouble() {
  uint64_t hi = NextU32() >> 5;  // 27 bits
  uint64_t lo = NextU32() >> 6;  // 26 bits
  return static_cast<double>((hi << 26) | lo) * (1.0 / 9007199254740992.0);
}

Pcg32::Pcg32(uint64_t seed, uint64_t stream) : inc_((stream << 1) | 1) {
  NextU32();
  state_ += seed;
  NextU32();
}

uint32_t Pcg32::NextU32() {
  uint64_t old = state_;
  state_ = old * 6364136223846793005ULL + inc_;
  auto xorshifted = static_cast<uint32_t>(((old >> 18) ^ old) >> 27);
  auto rot = static_cast<uint32_t>(old >> 59);
  return (xorshifted >> rot) | (xorshifted << ((0U - rot) & 31));
}

}  // namespace tessera
