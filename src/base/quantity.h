// Integer resource quantities: milli-GPU, milli-CPU and MiB.
//
// The allocation ledger never uses floating point (double-equality bugs make a
// ledger drift); every quantity is an int64 count of its unit. Construction is
// explicit so that MilliGpu(500) can never be confused with MiB(500); the same
// kinds add and subtract, and compare. Thread safety: values.
#pragma once

#include <compare>
#include <cstdint>
#include <string>

namespace tessera {

template <typename Tag>
class Quantity {
 public:
  constexpr Quantity() = default;
  constexpr explicit Quantity(int64_t value) : value_(value) {}

  constexpr int64_t value() const { return value_; }

  constexpr auto operator<=>(const Quantity&) const = default;  // NOLINT(modernize-use-nullptr)

  constexpr Quantity operator+(Quantity o) const { return Quantity(value_ + o.value_); }
  constexpr Quantity operator-(Quantity o) const { return Quantity(value_ - o.value_); }
  constexpr Quantity operator*(int64_t k) const { return Quantity(value_ * k); }
  constexpr Quantity& operator+=(Quantity o) {
    value_ += o.value_;
    return *this;
  }
  constexpr Quantity& operator-=(Quantity o) {
    value_ -= o.value_;
    return *this;
  }

 private:
  int64_t value_ = 0;
};

struct MilliGpuTag {};
struct MilliCpuTag {};
struct MiBTag {};

// A GPU in thousandths: 1000 is one whole card.
using MilliGpu = Quantity<MilliGpuTag>;
// CPU in thousandths of a core.
using MilliCpu = Quantity<MilliCpuTag>;
// Memory in mebibytes (host or GPU memory).
using MiB = Quantity<MiBTag>;

inline constexpr int64_t kMilliPerGpu = 1000;
inline constexpr MilliGpu kWholeGpu{kMilliPerGpu};

inline std::string ToString(MilliGpu q) { return std::to_string(q.value()) + "m GPU"; }
inline std::string ToString(MilliCpu q) { return std::to_string(q.value()) + "m CPU"; }
inline std::string ToString(MiB q) { return std::to_string(q.value()) + " MiB"; }

}  // namespace tessera
