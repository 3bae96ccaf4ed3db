#include "cli/table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "base/strings.h"
#include "base/time_format.h"

namespace tessera {
namespace {

constexpr Micros kSecond = 1'000'000;
constexpr Micros kMinute = 60 * kSecond;
constexpr Micros kHour = 60 * kMinute;
constexpr Micros kDay = 24 * kHour;

bool IsContinuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Byte length of the first `count` code points of `text`.
size_t PrefixBytes(std::string_view text, size_t count) {
  size_t i = 0;
  size_t seen = 0;
  while (i < text.size()) {
    if (!IsContinuation(text[i])) {
      if (seen == count) {
        return i;
      }
      ++seen;
    }
    ++i;
  }
  return text.size();
}

}  // namespace

Table::Table(std::vector<std::string> headers)
    : headers_(std::move(headers)),
      max_width_(headers_.size(), 0),
      right_(headers_.size(), false) {}

void Table::SetMaxWidth(size_t column, size_t width) {
  if (column < max_width_.size()) {
    max_width_[column] = width;
  }
}

void Table::SetRightAligned(size_t column) {
  if (column < right_.size()) {
    right_[column] = true;
  }
}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  for (size_t c = 0; c < cells.size(); ++c) {
    if (max_width_[c] > 0) {
      cells[c] = Truncate(cells[c], max_width_[c]);
    }
  }
  rows_.push_back(std::move(cells));
}

std::string Table::Render() const {
  std::vector<size_t> width(headers_.size(), 0);
  for (size_t c = 0; c < headers_.size(); ++c) {
    width[c] = DisplayWidth(headers_[c]);
    for (const std::vector<std::string>& row : rows_) {
      width[c] = std::max(width[c], DisplayWidth(row[c]));
    }
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < cells.size(); ++c) {
      const size_t pad = width[c] - DisplayWidth(cells[c]);
      if (c > 0) {
        text += "  ";
      }
      if (right_[c]) {
        text.append(pad, ' ');
        text += cells[c];
      } else {
        text += cells[c];
        text.append(pad, ' ');
      }
    }
    while (!text.empty() && text.back() == ' ') {
      text.pop_back();
    }
    out += text;
    out += '\n';
  };
  line(headers_);
  for (const std::vector<std::string>& row : rows_) {
    line(row);
  }
  return out;
}

size_t DisplayWidth(std::string_view text) {
  return static_cast<size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return !IsContinuation(c); }));
}

std::string Truncate(std::string_view text, size_t width) {
  if (DisplayWidth(text) <= width) {
    return std::string(text);
  }
  if (width < 4) {
    return std::string(text.substr(0, PrefixBytes(text, width)));
  }
  return std::string(text.substr(0, PrefixBytes(text, width - 3))) + "...";
}

std::string FormatAge(Micros duration) {
  if (duration < kMinute) {
    return std::to_string(std::max<Micros>(duration, 0) / kSecond) + "s";
  }
  if (duration < kHour) {
    const Micros m = duration / kMinute;
    const Micros s = (duration % kMinute) / kSecond;
    if (m < 10 && s > 0) {
      return std::to_string(m) + "m" + std::to_string(s) + "s";
    }
    return std::to_string(m) + "m";
  }
  if (duration < kDay) {
    const Micros h = duration / kHour;
    const Micros m = (duration % kHour) / kMinute;
    return std::to_string(h) + "h" + (m > 0 ? std::to_string(m) + "m" : "");
  }
  const Micros d = duration / kDay;
  const Micros h = (duration % kDay) / kHour;
  if (d < 10 && h > 0) {
    return std::to_string(d) + "d" + std::to_string(h) + "h";
  }
  return std::to_string(d) + "d";
}

std::string FormatMilli(int64_t milli) {
  const bool negative = milli < 0;
  // Unsigned arithmetic keeps INT64_MIN well defined.
  const uint64_t magnitude =
      negative ? ~static_cast<uint64_t>(milli) + 1 : static_cast<uint64_t>(milli);
  std::string out = (negative ? "-" : "") + std::to_string(magnitude / 1000);
  uint64_t frac = magnitude % 1000;
  if (frac != 0) {
    std::string digits = std::to_string(frac);
    digits.insert(0, 3 - digits.size(), '0');
    while (digits.back() == '0') {
      digits.pop_back();
    }
    out += "." + digits;
  }
  return out;
}

std::string FormatMiBShort(int64_t mib) {
  constexpr int64_t kGiB = 1024;
  constexpr int64_t kTiB = 1024 * 1024;
  const bool negative = mib < 0;
  const int64_t v = negative ? -mib : mib;
  std::string unit = "MiB";
  int64_t tenths = v * 10;
  if (v >= kTiB) {
    unit = "TiB";
    tenths = (v * 10 + kTiB / 2) / kTiB;
  } else if (v >= kGiB) {
    unit = "GiB";
    tenths = (v * 10 + kGiB / 2) / kGiB;
  }
  std::string out = (negative ? "-" : "") + std::to_string(tenths / 10);
  if (tenths % 10 != 0) {
    out += "." + std::to_string(tenths % 10);
  }
  return out + unit;
}

std::string FormatFixed(double value, int places) {
  if (!std::isfinite(value)) {
    return "-";
  }
  return FixedDecimal(value, places);
}

StatusOr<Micros> ParseTimeArgument(std::string_view text, Micros now) {
  const std::string_view t = Trim(text);
  if (t == "now") {
    return now;
  }
  if (t.size() >= 10 && t[4] == '-') {
    return ParseRfc3339(t);
  }
  if (t.size() >= 2) {
    Micros unit = 0;
    switch (t.back()) {
      case 's':
        unit = kSecond;
        break;
      case 'm':
        unit = kMinute;
        break;
      case 'h':
        unit = kHour;
        break;
      case 'd':
        unit = kDay;
        break;
      case 'w':
        unit = 7 * kDay;
        break;
      default:
        break;
    }
    if (unit > 0) {
      StatusOr<int64_t> n = ParseInt64(t.substr(0, t.size() - 1));
      if (n.ok() && *n >= 0 && *n <= 100 * 365 * kDay / unit) {
        return now - *n * unit;
      }
    }
  }
  return InvalidArgumentError(
      "expected 'now', a date (2026-11-01), an RFC 3339 time or a "
      "duration ago (24h, 7d), got '" +
      std::string(t) + "'");
}

std::string CsvField(std::string_view text) {
  if (text.find_first_of(",\"\n\r") == std::string_view::npos) {
    return std::string(text);
  }
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') {
      out += '"';
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace tessera
