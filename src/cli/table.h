// Plain-text tables and value formatting for the cluster commands of `tessera`.
//
// Table lays out rows in columns padded to the widest cell (widths count UTF-8 code
// points, not bytes), two spaces apart, with the last column left unpadded. A column may
// have a maximum width: longer cells are cut and end in "...". The helpers format ages
// ("45s", "3h5m", "2d4h"), milli-unit quantities as decimals ("0.5", "16"), MiB as
// GiB/TiB, and read the time arguments of the CLI ("24h" ago, dates, RFC 3339).
// Thread safety: Table is a value (not synchronised); the functions are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/status.h"

namespace tessera {

class Table {
 public:
  explicit Table(std::vector<std::string> headers);

  // Cells of `column` longer than `width` code points are cut to it (0: no limit).
  void SetMaxWidth(size_t column, size_t width);
  // Pads the cells of `column` on the left (numbers).
  void SetRightAligned(size_t column);
  // Missing cells are empty; cells beyond the headers are dropped.
  void AddRow(std::vector<std::string> cells);
  size_t rows() const { return rows_.size(); }

  // Header line and one line per row, each ending in '\n'; trailing spaces trimmed.
  std::string Render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<size_t> max_width_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

// Number of code points in UTF-8 `text` (continuation bytes are not counted).
size_t DisplayWidth(std::string_view text);
// `text` if it fits in `width` code points; else its first width-3 code points and
// "..." (or just the first `width` when width < 4). Never splits a code point.
std::string Truncate(std::string_view text, size_t width);

// Compact durations: "0s", "45s", "5m3s" (under 10 minutes), "42m", "3h", "3h5m",
// "2d4h" (under 10 days), "45d". Negative durations read "0s".
std::string FormatAge(Micros duration);

// 16000 -> "16", 500 -> "0.5", 1234 -> "1.234", -250 -> "-0.25": milli-units as a
// decimal with up to 3 places and no trailing zeros.
std::string FormatMilli(int64_t milli);

// 512 -> "512MiB", 1536 -> "1.5GiB", 2097152 -> "2TiB": one decimal at most, rounded
// (for reading; api/units.h FormatMiB writes the exact text a parser reads back).
std::string FormatMiBShort(int64_t mib);

// Fixed-point decimal with `places` places, e.g. FormatFixed(12.5, 2) -> "12.50".
std::string FormatFixed(double value, int places);

// A time argument of the CLI, relative to `now`: "now"; a date "2026-11-01" (midnight
// UTC) or an RFC 3339 time (ParseRfc3339 of base/time_format.h); or a duration ago:
// "90s", "30m", "24h", "7d", "2w".
StatusOr<Micros> ParseTimeArgument(std::string_view text, Micros now);

// A CSV field: quoted (with quotes doubled) when it holds a comma, quote or newline.
std::string CsvField(std::string_view text);

}  // namespace tessera
