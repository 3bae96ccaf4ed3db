#include "base/time_format.h"

#include <array>
#include <cctype>
#include <cstdint>
#include <limits>
#include <ctime>

namespace tessera {
namespace {

constexpr Micros kMicrosPerSecond = 1'000'000;

// Reads exactly `n` digits at `pos`.
bool Digits(std::string_view text, size_t pos, size_t n, int* out) {
  if (pos + n > text.size()) {
    return false;
  }
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (std::isdigit(static_cast<unsigned char>(text[i])) == 0) {
      return false;
    }
    v = v * 10 + (text[i] - '0');
  }
  *out = v;
  return true;
}

}  // namespace

std::string FormatRfc3339(Micros time) {
  Micros seconds = time / kMicrosPerSecond;
  if (time < 0 && time % kMicrosPerSecond != 0) {
    --seconds;
  }
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

StatusOr<Micros> ParseRfc3339(std::string_view text) {
  auto bad = [&] {
    return InvalidArgumentError("'" + std::string(text) +
                                "' is not a time like 2026-11-29T21:00:00Z or 2026-11-29");
  };
  std::tm tm{};
  int year = 0, month = 0, day = 0;
  if (!Digits(text, 0, 4, &year) || text.size() < 10 || text[4] != '-' ||
      !Digits(text, 5, 2, &month) || text[7] != '-' || !Digits(text, 8, 2, &day) ||
      month < 1 || month > 12 || day < 1 || day > 31) {
    return bad();
  }
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  Micros fraction = 0;
  Micros offset = 0;
  if (text.size() > 10) {
    int hour = 0, minute = 0, second = 0;
    if ((text[10] != 'T' && text[10] != 't' && text[10] != ' ') || !Digits(text, 11, 2, &hour) ||
        text.size() < 19 || text[13] != ':' || !Digits(text, 14, 2, &minute) || text[16] != ':' ||
        !Digits(text, 17, 2, &second) || hour > 23 || minute > 59 || second > 60) {
      return bad();
    }
    tm.tm_hour = hour;
    tm.tm_min = minute;
    tm.tm_sec = second;
    size_t pos = 19;
    if (pos < text.size() && text[pos] == '.') {
      ++pos;
      Micros scale = 100'000;
      const size_t digits_start = pos;
      while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])) != 0) {
        fraction += (text[pos] - '0') * scale;
        scale /= 10;
        ++pos;
      }
      if (pos == digits_start) {
        return bad();
      }
    }
    if (pos >= text.size()) {
      return bad();
    }
    if (text[pos] == 'Z' || text[pos] == 'z') {
      if (pos + 1 != text.size()) {
        return bad();
      }
    } else if (text[pos] == '+' || text[pos] == '-') {
      int oh = 0, om = 0;
      if (pos + 6 != text.size() || !Digits(text, pos + 1, 2, &oh) || text[pos + 3] != ':' ||
          !Digits(text, pos + 4, 2, &om) || oh > 23 || om > 59) {
        return bad();
      }
      offset = (static_cast<Micros>(oh) * 3600 + om * 60) * kMicrosPerSecond;
      if (text[pos] == '-') {
        offset = -offset;
      }
    } else {
      return bad();
    }
  }
  const std::time_t t = timegm(&tm);
  std::tm check{};
  gmtime_r(&t, &check);
  if (check.tm_mday != day || check.tm_mon != month - 1) {
    return bad();  // 2026-11-31 and the like
  }
  return static_cast<Micros>(t) * kMicrosPerSecond + fraction - offset;
}

std::string FormatDuration(Micros micros) {
  if (micros == 0) {
    return "0s";
  }
  if (micros < 0) {
    if (micros == std::numeric_limits<int64_t>::min()) {
      return std::to_string(micros) + "us";
    }
    return "-" + FormatDuration(-micros);
  }
  std::string out;
  int64_t seconds = micros / kMicrosPerSecond;
  const int64_t sub = micros % kMicrosPerSecond;
  const std::array<std::pair<int64_t, const char*>, 4> parts = {
      {{86'400, "d"}, {3'600, "h"}, {60, "m"}, {1, "s"}}};
  for (const auto& [size, name] : parts) {
    if (seconds >= size) {
      out += std::to_string(seconds / size) + name;
      seconds %= size;
    }
  }
  if (sub != 0) {
    out += sub % 1000 == 0 ? std::to_string(sub / 1000) + "ms" : std::to_string(sub) + "us";
  }
  return out;
}

}  // namespace tessera
