#include "api/units.h"

#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "base/strings.h"

namespace tessera {
namespace {

constexpr int64_t kMicrosPerSecond = 1'000'000;
constexpr size_t kMaxQuoted = 64;

// 'text' for messages, cut short when long.
std::string Quote(std::string_view text) {
  if (text.size() <= kMaxQuoted) {
    return "'" + std::string(text) + "'";
  }
  return "'" + std::string(text.substr(0, kMaxQuoted)) + "...'";
}

enum class Decimal { kOk, kNotNumber, kTooLarge, kInexact };

// number * mul / div, exactly. `number` is digits with at most one '.', at least one digit.
Decimal ScaleDecimal(std::string_view number, int64_t mul, int64_t div, int64_t* out) {
  if (mul <= 0 || mul > 1'000'000'000'000'000 || div <= 0) {
    return Decimal::kNotNumber;
  }
  // Digits of the number without the point, least significant first, and how many of
  // them are fraction digits.
  std::vector<uint8_t> digits;
  digits.reserve(number.size());
  size_t frac_digits = 0;
  bool seen_point = false;
  for (char c : number) {
    if (c == '.') {
      if (seen_point) {
        return Decimal::kNotNumber;
      }
      seen_point = true;
    } else if (c >= '0' && c <= '9') {
      digits.push_back(static_cast<uint8_t>(c - '0'));
      if (seen_point) {
        ++frac_digits;
      }
    } else {
      return Decimal::kNotNumber;
    }
  }
  if (digits.empty()) {
    return Decimal::kNotNumber;
  }
  // Product digits * mul, least significant first. Each step stays below 10 * mul.
  std::vector<uint8_t> product;
  product.reserve(digits.size() + 20);
  uint64_t carry = 0;
  const uint64_t m = static_cast<uint64_t>(mul);
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    uint64_t v = uint64_t{*it} * m + carry;
    product.push_back(static_cast<uint8_t>(v % 10));
    carry = v / 10;
  }
  while (carry > 0) {
    product.push_back(static_cast<uint8_t>(carry % 10));
    carry /= 10;
  }
  // Dividing by 10^frac_digits must leave no remainder.
  for (size_t i = 0; i < frac_digits; ++i) {
    if (product[i] != 0) {
      return Decimal::kInexact;
    }
  }
  uint64_t value = 0;
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  for (size_t i = product.size(); i > frac_digits; --i) {
    uint8_t d = product[i - 1];
    if (value > (kMax - d) / 10) {
      return Decimal::kTooLarge;
    }
    value = value * 10 + d;
  }
  if (value % static_cast<uint64_t>(div) != 0) {
    return Decimal::kInexact;
  }
  *out = static_cast<int64_t>(value / static_cast<uint64_t>(div));
  return Decimal::kOk;
}

bool IsNumberChar(char c) { return (c >= '0' && c <= '9') || c == '.'; }

// Splits "1.5GiB" into "1.5" and "GiB" (spaces between them allowed).
void SplitNumber(std::string_view text, std::string_view* number, std::string_view* suffix) {
  size_t i = 0;
  while (i < text.size() && IsNumberChar(text[i])) {
    ++i;
  }
  *number = text.substr(0, i);
  *suffix = Trim(text.substr(i));
}

struct SuffixUnit {
  std::string_view name;
  int64_t mul;
  int64_t div;
};

}  // namespace

StatusOr<int64_t> ParseScaledDecimal(std::string_view number, int64_t mul, int64_t div) {
  int64_t value = 0;
  switch (ScaleDecimal(number, mul, div, &value)) {
    case Decimal::kOk:
      return value;
    case Decimal::kNotNumber:
      return InvalidArgumentError(Quote(number) + " is not a number");
    case Decimal::kTooLarge:
      return InvalidArgumentError(Quote(number) + " is too large");
    case Decimal::kInexact:
      return InvalidArgumentError(Quote(number) + " is not a whole number of the unit");
  }
  return InvalidArgumentError(Quote(number) + " is not a number");
}

StatusOr<int64_t> ParseMemoryMiB(std::string_view text) {
  const std::string_view t = Trim(text);
  const std::string hint = "; expected a size such as 512MiB, 20GiB, 1.5TiB or a number of MiB";
  if (!t.empty() && t[0] == '-') {
    return InvalidArgumentError("memory size " + Quote(text) + " must not be negative");
  }
  std::string_view number;
  std::string_view suffix;
  SplitNumber(t, &number, &suffix);
  static constexpr std::array<SuffixUnit, 9> kUnits = {{{"", 1, 1},
                                                        {"ki", 1, 1024},
                                                        {"kib", 1, 1024},
                                                        {"mi", 1, 1},
                                                        {"mib", 1, 1},
                                                        {"gi", 1024, 1},
                                                        {"gib", 1024, 1},
                                                        {"ti", 1024 * 1024, 1},
                                                        {"tib", 1024 * 1024, 1}}};
  const std::string unit = AsciiLower(suffix);
  const SuffixUnit* found = nullptr;
  for (const SuffixUnit& u : kUnits) {
    if (u.name == unit) {
      found = &u;
    }
  }
  if (found == nullptr) {
    for (std::string_view decimal : {"k", "kb", "m", "mb", "g", "gb", "t", "tb"}) {
      if (unit == decimal && !number.empty()) {
        const char first = static_cast<char>(unit[0] - 'a' + 'A');
        const std::string binary = std::string(1, first) + "iB";
        return InvalidArgumentError("memory size " + Quote(text) + " uses the decimal unit " +
                                    std::string(suffix) + "; write " + std::string(number) +
                                    binary + " (binary, powers of 1024)");
      }
    }
    return InvalidArgumentError(Quote(text) + " is not a memory size" + hint);
  }
  int64_t value = 0;
  switch (ScaleDecimal(number, found->mul, found->div, &value)) {
    case Decimal::kOk:
      return value;
    case Decimal::kNotNumber:
      return InvalidArgumentError(Quote(text) + " is not a memory size" + hint);
    case Decimal::kTooLarge:
      return InvalidArgumentError("memory size " + Quote(text) + " is too large");
    case Decimal::kInexact:
      return InvalidArgumentError("memory size " + Quote(text) + " is not a whole number of MiB");
  }
  return InvalidArgumentError(Quote(text) + " is not a memory size" + hint);
}

StatusOr<int64_t> ParseCpuMilli(std::string_view text) {
  const std::string_view t = Trim(text);
  if (!t.empty() && t[0] == '-') {
    return InvalidArgumentError("CPU amount " + Quote(text) + " must not be negative");
  }
  std::string_view number;
  std::string_view suffix;
  SplitNumber(t, &number, &suffix);
  int64_t mul = 0;
  if (suffix.empty()) {
    mul = 1000;
  } else if (suffix == "m") {
    mul = 1;
  } else {
    return InvalidArgumentError(Quote(text) +
                                " is not a CPU amount; expected cores such as 4 or 0.5, or "
                                "milli-cores such as 500m");
  }
  int64_t value = 0;
  switch (ScaleDecimal(number, mul, 1, &value)) {
    case Decimal::kOk:
      return value;
    case Decimal::kNotNumber:
      break;
    case Decimal::kTooLarge:
      return InvalidArgumentError("CPU amount " + Quote(text) + " is too large");
    case Decimal::kInexact:
      return InvalidArgumentError("CPU amount " + Quote(text) +
                                  " is finer than a milli-core (0.001 or 1m)");
  }
  return InvalidArgumentError(Quote(text) +
                              " is not a CPU amount; expected cores such as 4 or 0.5, or "
                              "milli-cores such as 500m");
}

StatusOr<int64_t> ParseGpuMilli(std::string_view text) {
  const std::string_view t = Trim(text);
  const std::string bad =
      "GPU fraction " + Quote(text) + " must be a number in (0, 1] such as 0.25 or 0.5";
  int64_t value = 0;
  switch (ScaleDecimal(t, 1000, 1, &value)) {
    case Decimal::kOk:
      break;
    case Decimal::kNotNumber:
    case Decimal::kTooLarge:
      return InvalidArgumentError(bad);
    case Decimal::kInexact:
      return InvalidArgumentError("GPU fraction " + Quote(text) +
                                  " is finer than a thousandth of a GPU");
  }
  if (value <= 0 || value > 1000) {
    return InvalidArgumentError(bad);
  }
  return value;
}

StatusOr<int64_t> ParseDurationMicros(std::string_view text) {
  const std::string_view t = Trim(text);
  const std::string hint =
      "; expected a duration such as 90 (seconds), 30s, 5m, 4h, 1d, 1h30m or 250ms";
  if (!t.empty() && t[0] == '-') {
    return InvalidArgumentError("duration " + Quote(text) + " must not be negative");
  }
  if (t.empty()) {
    return InvalidArgumentError("empty duration" + hint);
  }
  static constexpr std::array<SuffixUnit, 7> kUnits = {{{"d", 86'400 * kMicrosPerSecond, 1},
                                                        {"h", 3'600 * kMicrosPerSecond, 1},
                                                        {"m", 60 * kMicrosPerSecond, 1},
                                                        {"s", kMicrosPerSecond, 1},
                                                        {"ms", 1'000, 1},
                                                        {"us", 1, 1},
                                                        {"\xC2\xB5s", 1, 1}}};  // µs
  int64_t total = 0;
  size_t pos = 0;
  std::vector<std::string_view> seen;
  while (pos < t.size()) {
    size_t start = pos;
    while (pos < t.size() && IsNumberChar(t[pos])) {
      ++pos;
    }
    std::string_view number = t.substr(start, pos - start);
    size_t unit_start = pos;
    while (pos < t.size() && !IsNumberChar(t[pos])) {
      ++pos;
    }
    std::string_view unit_text = t.substr(unit_start, pos - unit_start);
    if (number.empty()) {
      return InvalidArgumentError(Quote(text) + " is not a duration" + hint);
    }
    int64_t mul = 0;
    if (unit_text.empty()) {
      // A bare number is seconds, and only on its own.
      if (start != 0) {
        return InvalidArgumentError("duration " + Quote(text) + ": the number " +
                                    std::string(number) + " has no unit" + hint);
      }
      mul = kMicrosPerSecond;
    } else {
      for (const SuffixUnit& u : kUnits) {
        if (u.name == unit_text) {
          mul = u.mul;
        }
      }
      if (mul == 0) {
        return InvalidArgumentError(Quote(text) + " is not a duration: unknown unit " +
                                    Quote(unit_text) + hint);
      }
      for (std::string_view s : seen) {
        if (s == unit_text) {
          return InvalidArgumentError("duration " + Quote(text) + " gives the unit " +
                                      std::string(unit_text) + " twice");
        }
      }
      seen.push_back(unit_text);
    }
    int64_t part = 0;
    switch (ScaleDecimal(number, mul, 1, &part)) {
      case Decimal::kOk:
        break;
      case Decimal::kNotNumber:
        return InvalidArgumentError(Quote(text) + " is not a duration" + hint);
      case Decimal::kTooLarge:
        return InvalidArgumentError("duration " + Quote(text) + " is too long");
      case Decimal::kInexact:
        return InvalidArgumentError("duration " + Quote(text) + " is finer than a microsecond");
    }
    if (__builtin_add_overflow(total, part, &total)) {
      return InvalidArgumentError("duration " + Quote(text) + " is too long");
    }
  }
  return total;
}

std::string FormatMiB(int64_t mib) {
  if (mib < 0) {
    if (mib == std::numeric_limits<int64_t>::min()) {
      return std::to_string(mib) + "MiB";
    }
    return "-" + FormatMiB(-mib);
  }
  constexpr int64_t kTiB = int64_t{1024} * 1024;
  if (mib != 0 && mib % kTiB == 0) {
    return std::to_string(mib / kTiB) + "TiB";
  }
  if (mib != 0 && mib % 1024 == 0) {
    return std::to_string(mib / 1024) + "GiB";
  }
  return std::to_string(mib) + "MiB";
}

std::string FormatCpuMilli(int64_t milli) {
  if (milli % 1000 == 0) {
    return std::to_string(milli / 1000);
  }
  return std::to_string(milli) + "m";
}

std::string FormatGpuFraction(int64_t milli) {
  if (milli < 0) {
    if (milli == std::numeric_limits<int64_t>::min()) {
      return std::to_string(milli) + "m";
    }
    return "-" + FormatGpuFraction(-milli);
  }
  std::string out = std::to_string(milli / 1000);
  int64_t frac = milli % 1000;
  if (frac != 0) {
    std::string digits = std::to_string(frac);
    digits.insert(0, 3 - digits.size(), '0');
    while (!digits.empty() && digits.back() == '0') {
      digits.pop_back();
    }
    out += "." + digits;
  }
  return out;
}

StatusOr<int64_t> ParseSlurmMemoryMiB(std::string_view text) {
  const std::string_view t = Trim(text);
  const std::string hint = "; expected a size such as 4G, 512M, 1T or a number of MiB";
  if (!t.empty() && t[0] == '-') {
    return InvalidArgumentError("memory size " + Quote(text) + " must not be negative");
  }
  std::string_view number;
  std::string_view suffix;
  SplitNumber(t, &number, &suffix);
  const std::string unit = AsciiLower(suffix);
  int64_t mul = 1;
  if (unit == "g") {
    mul = 1024;
  } else if (unit == "t") {
    mul = 1024 * 1024;
  } else if (unit == "k") {
    // Slurm rounds KiB up to whole MiB.
    StatusOr<int64_t> kib = ParseScaledDecimal(number, 1);
    if (!kib.ok()) {
      return InvalidArgumentError(Quote(text) + " is not a memory size" + hint);
    }
    return *kib / 1024 + (*kib % 1024 != 0 ? 1 : 0);
  } else if (!unit.empty() && unit != "m") {
    return InvalidArgumentError(Quote(text) + " is not a memory size" + hint);
  }
  int64_t value = 0;
  switch (ScaleDecimal(number, mul, 1, &value)) {
    case Decimal::kOk:
      return value;
    case Decimal::kTooLarge:
      return InvalidArgumentError("memory size " + Quote(text) + " is too large");
    case Decimal::kInexact:
      return InvalidArgumentError("memory size " + Quote(text) + " is not a whole number of MiB");
    case Decimal::kNotNumber:
      break;
  }
  return InvalidArgumentError(Quote(text) + " is not a memory size" + hint);
}

StatusOr<std::optional<Micros>> ParseSlurmTime(std::string_view text) {
  const std::string_view t = Trim(text);
  const std::string lower = AsciiLower(t);
  if (lower == "unlimited" || lower == "infinite") {
    return std::optional<Micros>();
  }
  const auto bad = [&] {
    return InvalidArgumentError(Quote(text) +
                                " is not a Slurm time; expected minutes (90), M:S, H:M:S, D-H, "
                                "D-H:M, D-H:M:S or UNLIMITED");
  };
  std::string_view rest = t;
  int64_t days = 0;
  const size_t dash = t.find('-');
  if (dash != std::string_view::npos) {
    StatusOr<int64_t> d = ParseInt64(t.substr(0, dash));
    if (dash == 0 || !d.ok() || *d < 0) {
      return bad();
    }
    days = *d;
    rest = t.substr(dash + 1);
  }
  const std::vector<std::string_view> parts = Split(rest, ':');
  if (parts.empty() || parts.size() > 3) {
    return bad();
  }
  std::vector<int64_t> v;
  for (std::string_view p : parts) {
    if (p.empty() || p.size() > 9 || p.find_first_not_of("0123456789") != std::string_view::npos) {
      return bad();
    }
    v.push_back(*ParseInt64(p));
  }
  // Which field each part is depends on whether days were given.
  int64_t h = 0;
  int64_t m = 0;
  int64_t sec = 0;
  if (dash != std::string_view::npos) {
    h = v[0];
    m = v.size() > 1 ? v[1] : 0;
    sec = v.size() > 2 ? v[2] : 0;
  } else if (v.size() == 1) {
    m = v[0];
  } else if (v.size() == 2) {
    m = v[0];
    sec = v[1];
  } else {
    h = v[0];
    m = v[1];
    sec = v[2];
  }
  if (days > 100'000) {
    return InvalidArgumentError("time " + Quote(text) + " is too large");
  }
  const int64_t seconds = ((days * 24 + h) * 60 + m) * 60 + sec;
  if (seconds == 0) {
    return std::optional<Micros>();  // Slurm: a limit of 0 is none
  }
  return std::optional<Micros>(seconds * kMicrosPerSecond);
}

}  // namespace tessera
