// Test-only: spans of time in microseconds (base/clock.h's Micros), the unit of the
// clocks, traces and records under test. Header-only and part of no target: include it
// from *_test.cc files and other test helpers only.
#pragma once

#include "base/clock.h"

namespace tessera::testing {

inline constexpr Micros kSecond = 1'000'000;
inline constexpr Micros kMinute = 60 * kSecond;
inline constexpr Micros kHour = 60 * kMinute;
inline constexpr Micros kDay = 24 * kHour;

}  // namespace tessera::testing
